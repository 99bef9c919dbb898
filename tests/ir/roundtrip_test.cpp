// Randomized round trip: generate valid kernel graphs (with block graphs), print, parse, print again; the texts and
// the structural hashes must match.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verify.h"
#include "tests/common/random_graphs.h"

namespace morgana::ir {
namespace {

using testing::RandomGraphs;


TEST(RoundTrip, RandomGraphsPrintParsePrintIdentically) {
  int tested = 0, with_blocks = 0;
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    Graph g = RandomGraphs(seed).kernel();
    if (!verify(g).empty()) continue;
    ++tested;
    with_blocks += !g.bodies().empty();
    std::string text = print(g);
    Module m;
    try {
      m = parse_module(text, "random.mg");
    } catch (const UserError& e) {
      FAIL() << "seed " << seed << ": " << e.render() << "\n" << text;
    }
    ASSERT_EQ(m.programs.size(), 1u);
    EXPECT_EQ(print(m.programs[0]), text) << "seed " << seed;
    EXPECT_EQ(m.programs[0].hash(), g.hash()) << "seed " << seed << "\n" << text;
  }
  EXPECT_GE(tested, 500);
  EXPECT_GE(with_blocks, 100) << "the generator should exercise block graphs";
}


// `morgana fmt` (print_with_comments) keeps every comment where it was written: before the statement, closing brace
// or kernel that follows it (indented like the block's statements before a closing brace), or after the statement
// it trails, whatever line of a statement written over several lines it trails; comments after the last kernel end
// the text. Blank lines and spacing become canonical; printing the result again changes nothing.
TEST(Fmt, CommentsStayWhereTheyWereWritten) {
  constexpr const char* kSource = R"(# file header
# second line

kernel g(X: f16[8,64],   # trailing on the header
   W1: f16[64,64], W2: f16[64,64]) {
      # before the block
  Y = block(X, W1, W2) grid=[2,1,1] threads=128 loop=4 {   # trailing on the block line
    # first in the block
    x = iter(X, imap=[-,-,-], fmap=1)  # trailing on an iter
    w1 = iter(W1, imap=[1,-,-], fmap=0)
    w2 = iter(W2, imap=[1,-,-], fmap=0)
    p1 = matmul(x,
       w1)  # trailing on a continuation line
    p2 = matmul(x, w2)
    a1 = acc_sum(p1)
    a2 = acc_sum(p2)
    y = mul(a1, a2)
    save(y, omap=[1,-,-])
        # last in the block
  }  # after the block's brace
  # before the return
  return Y
  # before the kernel's brace
}
# between programs

kernel h(X: f16[4]) for [h100] {
  Y = exp(X)
  return Y
} # after h
# end of file
)";
  constexpr const char* kFormatted = R"(# file header
# second line
kernel g(X: f16[8,64], W1: f16[64,64], W2: f16[64,64]) {  # trailing on the header
  # before the block
  Y = block(X, W1, W2) grid=[2,1,1] threads=128 loop=4 {  # trailing on the block line
    # first in the block
    x = iter(X, imap=[-,-,-], fmap=1)  # trailing on an iter
    w1 = iter(W1, imap=[1,-,-], fmap=0)
    w2 = iter(W2, imap=[1,-,-], fmap=0)
    p1 = matmul(x, w1)  # trailing on a continuation line
    p2 = matmul(x, w2)
    a1 = acc_sum(p1)
    a2 = acc_sum(p2)
    y = mul(a1, a2)
    save(y, omap=[1,-,-])
    # last in the block
  }  # after the block's brace
  # before the return
  return Y
  # before the kernel's brace
}

# between programs
kernel h(X: f16[4]) for [h100] {
  Y = exp(X)
  return Y
}  # after h
# end of file
)";
  Module m = parse_module(kSource, "comments.mg");
  EXPECT_EQ(print_with_comments(m, kSource), kFormatted);
  EXPECT_EQ(print_with_comments(parse_module(kFormatted, "formatted.mg"), kFormatted), kFormatted);
  EXPECT_EQ(print_with_comments(m, print(m)), print(m));  // no comments: the plain canonical text
}

// Every .mg file the repository ships for people to read (examples, the bench's specs and variants) is in the
// canonical form `morgana fmt --check` asks, comments included.
TEST(Fmt, EveryShippedFileIsCanonical) {
  int files = 0;
  for (const char* dir : {"examples", "bench/unseen", "bench/variants"})
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
      if (e.path().extension() != ".mg") continue;
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string source = text.str();
      EXPECT_EQ(print_with_comments(parse_module(source, e.path().string()), source), source) << e.path();
      ++files;
    }
  EXPECT_GE(files, 40);
}

}  // namespace
}  // namespace morgana::ir
