// Result files (search/result_io.h): every field round-trips exactly, and a file that was truncated, edited,
// or written by another format version is rejected with a message naming the file and line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ir/diagnostic.h"
#include "search/result_io.h"
#include "search/text_hash.h"
#include "tests/common/golden.h"
#include "tests/search/synthetic_results.h"

namespace morgana::search {
namespace {

using testing::expect_same;
using testing::shard_result;

// A result that exercises every field with values other than the defaults, and texts with awkward endings.
SearchResult awkward() {
  SearchResult r = shard_result(2, 4);
  r.options.time_limit_s = 0.1;
  r.options.threads = 7;
  r.options.max_kernel_ops = 3;
  r.options.max_block_ops = 9;
  r.options.trials = 5;
  r.options.seed = 18446744073709551615ull;
  r.options.abstract_pruning = false;
  r.top[0].cost_us = 1.0 / 3.0;  // needs every digit to round-trip
  r.top[0].hash = 0xfedcba9876543210ull;
  r.top[1].mugraph += "\n\n";               // ends in blank lines
  r.top[1].cost = "no newline at the end";  // and without one
  r.top.push_back(testing::candidate(0, 99.5));
  r.top.back().cost = "";
  r.top.back().verification = "";
  r.stats.timed_out = true;
  r.stats.unverified_for_time = 3;
  r.stats.tasks_done = 3;
  r.stats.seconds = 12.345678;
  r.stats.verify_seconds = 10.5;
  return r;
}

TEST(ResultIo, EveryFieldRoundTrips) {
  for (const SearchResult& r : {shard_result(0, 1), awkward(), SearchResult{}}) {
    std::string text = write_result(r);
    std::string made_by;
    SearchResult back = read_result(text, "r.result", &made_by);
    expect_same(back, r);
    EXPECT_EQ(made_by, MORGANA_VERSION);
    EXPECT_EQ(write_result(back), text);
  }
}

TEST(ResultIo, StartsWithItsVersionAndIsReadable) {
  std::string text = write_result(shard_result(1, 4));
  EXPECT_EQ(text.rfind("morgana-search-result 2\nmade-by ", 0), 0u) << text;
  EXPECT_NE(text.find("\noption shard 1/4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nstat pruned abstract 20\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nspec " + std::to_string(testing::kMatmulSpec.size()) + "\nkernel matmul("),
            std::string::npos)
      << text;
}

std::string error_of(const std::string& text) {
  try {
    read_result(text, "bad.result");
  } catch (const UserError& e) {
    return e.render();
  }
  return "(no error)";
}

TEST(ResultIo, EveryTruncationIsRejected) {
  std::string text = write_result(awkward());
  for (size_t n = 0; n < text.size(); ++n) {
    std::string e = error_of(text.substr(0, n));
    ASSERT_EQ(e.rfind("bad.result", 0), 0u) << "cut at " << n << ": " << e;
  }
  EXPECT_NE(error_of(text.substr(0, text.size() / 2)).find("truncated"), std::string::npos);
}

TEST(ResultIo, EveryFlippedByteIsRejected) {
  std::string text = write_result(awkward());
  for (size_t i = 0; i < text.size(); ++i) {
    std::string bad = text;
    bad[i] = static_cast<char>(bad[i] ^ 0x04);
    ASSERT_NE(error_of(bad), "(no error)") << "flipped byte " << i;
  }
}

TEST(ResultIo, WrongVersionAndBadChecksumSaySo) {
  std::string text = write_result(shard_result(0, 1));
  std::string old = text;
  old.replace(0, std::string("morgana-search-result 2").size(), "morgana-search-result 1");
  EXPECT_EQ(error_of(old),
            "bad.result:1:1: error: search result format version is not 2 (written by another "
            "version of morgana; search again)");
  EXPECT_NE(error_of("hello\n").find("not a morgana search result"), std::string::npos);
  std::string sum = text;
  sum[sum.size() - 2] = sum[sum.size() - 2] == '0' ? '1' : '0';
  EXPECT_EQ(error_of(sum),
            "bad.result: error: checksum mismatch (the file was changed or damaged after it was "
            "written)");
  std::string extra = text + "stat states 5\n";
  EXPECT_NE(error_of(extra).find("no checksum line"), std::string::npos) << error_of(extra);
}

// An edit followed by a fresh checksum: the content checks name the line.
std::string reseal(std::string text) {
  size_t last = text.rfind("checksum ");
  text.resize(last);
  return text + "checksum " + hex64(hash_text(text)) + "\n";
}

std::string edited(const std::string& from, const std::string& to) {
  std::string text = write_result(shard_result(1, 4));
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return reseal(text.replace(at, from.size(), to));
}

TEST(ResultIo, MalformedFieldsNameTheLine) {
  EXPECT_EQ(error_of(edited("option top 3\n", "option top three\n")),
            "bad.result:10:1: error: 'option top' needs an integer, not 'three'");
  EXPECT_EQ(error_of(edited("option shard 1/4\n", "option shard 4/4\n")),
            "bad.result:9:1: error: shard 4/4 is not i/n with 0 <= i < n");
  EXPECT_EQ(error_of(edited("option seed 1\n", "")),
            "bad.result:12:1: error: expected 'option seed ...' but found 'option abstract_pruning true'");
  EXPECT_EQ(error_of(edited("stat timed_out false\n", "stat timed_out maybe\n")),
            "bad.result:23:1: error: 'stat timed_out' needs true or false");
  std::string spec_size = "\nspec " + std::to_string(testing::kMatmulSpec.size()) + "\n";
  EXPECT_NE(error_of(edited(spec_size, "\nspec 8000\n")).find("run past their end"), std::string::npos);
  EXPECT_NE(error_of(edited(spec_size, "\nspec 79\n")).find("run past their end"), std::string::npos);
  EXPECT_NE(
      error_of(edited("hash 0000000000000065", "hash 00000000000000G5")).find("16 lowercase hex digits"),
      std::string::npos);
}

// Result files as `morgana optimize --shard` writes them, kept as golden files: they show the format, and the CLI
// tests merge them (tests/frontend/cli_test.cpp): three shards of a search for h200 and a whole search for a100.
TEST(ResultFilesGolden, ShardsOfAMatmulSearch) {
  const std::string dir = "tests/golden/search/shards/";
  for (int i = 0; i < 3; ++i)
    morgana::testing::expect_golden(dir + "matmul.h200." + std::to_string(i) + "-of-3.result",
                                    write_result(shard_result(i, 3)));
  SearchResult a100 = shard_result(0, 1);
  a100.target = "a100";
  a100.key = "fedcba9876543210fedcba9876543210";
  a100.top = {testing::candidate(42, 20.5, testing::kMatmulSpec)};
  morgana::testing::expect_golden(dir + "matmul.a100.result", write_result(a100));
}

}  // namespace
}  // namespace morgana::search
