// Randomized round trip: generate valid kernel graphs (with block graphs), print, parse, print again; the texts and
// the structural hashes must match.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace morgana::ir
