// merge_results (search.h) over hand-built shards: the merged result is written out by hand, and shards that
// do not belong together are refused with a message that says why.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/diagnostic.h"
#include "search/search.h"
#include "tests/search/synthetic_results.h"

namespace morgana::search {
namespace {

using testing::candidate;
using testing::shard_result;

std::vector<SearchResult> four_shards() {
  return {shard_result(0, 4), shard_result(1, 4), shard_result(2, 4), shard_result(3, 4)};
}

TEST(Merge, FourShardsGiveTheHandBuiltResult) {
  SearchResult expected;
  expected.spec = testing::kMatmulSpec;
  expected.target = "h200";
  expected.key = "0123456789abcdef0123456789abcdef";
  expected.options = shard_result(0, 4).options;
  expected.options.shard = {0, 1};
  // Costs per shard i: hash 100+i at 10+i, hash 200+i at 30-i. The best three of the eight.
  expected.top = {candidate(100, 10), candidate(101, 11), candidate(102, 12)};
  expected.stats.states = 1000 + 2000 + 3000 + 4000;
  expected.stats.pruned = {{"abstract", 10 + 20 + 30 + 40}, {"shape", 0 + 1 + 2 + 3}, {"smem", 7}};
  expected.stats.complete = 5 + 6 + 7 + 8;
  expected.stats.verified = 8;
  expected.stats.rejected = 0 + 1 + 2 + 3;
  expected.stats.tasks_total = 40;
  expected.stats.tasks_done = 40;
  expected.stats.seconds = 4.5;
  expected.stats.verify_seconds = 0.5;

  std::vector<SearchResult> shards = four_shards();
  std::reverse(shards.begin(), shards.end());  // the order of the files does not matter
  testing::expect_same(merge_results(shards), expected);
}

TEST(Merge, DeduplicatesByHashBreaksTiesByHashAndKeepsTimedOut) {
  std::vector<SearchResult> shards = {shard_result(0, 2), shard_result(1, 2)};
  shards[0].top = {candidate(7, 5.0), candidate(9, 5.0)};
  shards[1].top = {candidate(7, 5.0), candidate(3, 5.0), candidate(8, 6.0)};
  shards[1].stats.timed_out = true;
  SearchResult m = merge_results(shards);
  ASSERT_EQ(m.top.size(), 3u);
  EXPECT_EQ(m.top[0].hash, 3u);
  EXPECT_EQ(m.top[1].hash, 7u);
  EXPECT_EQ(m.top[2].hash, 9u);
  EXPECT_TRUE(m.stats.timed_out);
  EXPECT_EQ(m.options.shard, Shard{});
}

TEST(Merge, OneShardOfOneIsItself) {
  SearchResult r = shard_result(0, 1);
  SearchResult m = merge_results({r});
  EXPECT_EQ(m.top, r.top);
  EXPECT_EQ(m.stats, r.stats);
  EXPECT_EQ(m.key, r.key);
}

std::string merge_error(std::vector<SearchResult> shards) {
  try {
    merge_results(shards);
  } catch (const UserError& e) {
    return e.message();
  }
  return "(no error)";
}

TEST(Merge, RefusesShardsThatDoNotBelongTogether) {
  EXPECT_EQ(merge_error({}), "nothing to merge: no shard results");
  std::vector<SearchResult> s = four_shards();
  s.erase(s.begin() + 2);
  EXPECT_EQ(merge_error(s), "the search for target h200 has 4 shards but shard(s) 2 of them are missing");
  s = four_shards();
  s.push_back(shard_result(1, 4));
  EXPECT_EQ(merge_error(s), "shard 1/4 of target h200 is given twice");

  s = four_shards();
  s[3].target = "a100";
  EXPECT_EQ(merge_error(s),
            "cannot merge shard 3/4 with shard 0/4: they differ in target (a100 vs h200) (shards "
            "of one search share everything but the shard index)");
  s = four_shards();
  s[1].spec += "# edited\n";
  EXPECT_NE(merge_error(s).find("differ in spec"), std::string::npos);
  s = four_shards();
  s[1].options.seed = 9;
  EXPECT_NE(merge_error(s).find("differ in search options"), std::string::npos);
  s = four_shards();
  s[2] = shard_result(2, 5);
  EXPECT_NE(merge_error(s).find("differ in shard count (5 vs 4)"), std::string::npos);
  s = four_shards();
  s[1].key = "ffffffffffffffffffffffffffffffff-shard-1-of-4";
  EXPECT_NE(merge_error(s).find("differ in cache key"), std::string::npos);

  // Threads and the time limit do not change the answer: shards may differ in them.
  s = four_shards();
  s[1].options.threads = 64;
  s[2].options.time_limit_s = 3600;
  EXPECT_EQ(merge_error(s), "(no error)");
}

}  // namespace
}  // namespace morgana::search
