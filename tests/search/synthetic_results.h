// Hand-built search results for the tests of the driver's pieces (result files, cache, merge, report), which
// must not depend on a real search: a matmul spec and two μGraphs of it with made-up costs, hashes and
// counts.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "search/search.h"

namespace morgana::search::testing {

inline const std::string kMatmulSpec =
    "kernel matmul(X: f16[64,4096], W: f16[4096,1024]) {\n"
    "  Y = matmul(X, W)\n"
    "  return Y\n"
    "}\n";

inline const std::string kSplitK =
    "kernel matmul(X: f16[64,4096], W: f16[4096,1024]) {\n"
    "  P = block(X, W) grid=[8,4,1] threads=128 loop=8 {\n"
    "    x = iter(X, imap=[-,1,-], fmap=1)\n"
    "    w = iter(W, imap=[1,0,-], fmap=0)\n"
    "    p = matmul(x, w)\n"
    "    a = acc_sum(p)\n"
    "    save(a, omap=[1,0,-])\n"
    "  }\n"
    "  Y = reduce_sum(P, dim=0, to=64)\n"
    "  return Y\n"
    "}\n";

inline RankedCandidate candidate(uint64_t hash, double cost_us, const std::string& mugraph = kSplitK) {
  RankedCandidate c;
  c.mugraph = mugraph;
  c.hash = hash;
  c.cost_us = cost_us;
  c.cost = "cost on h200: " + std::to_string(cost_us) + " us\n#0 made up\n";
  c.verification = "cheap 3 trials; full 3 trials; float max err 0.001";
  return c;
}

// Shard `index` of `count` of one search for h200: candidates and counts that differ per shard.
inline SearchResult shard_result(int index, int count) {
  SearchResult r;
  r.spec = kMatmulSpec;
  r.target = "h200";
  r.key = "0123456789abcdef0123456789abcdef";
  if (count > 1) r.key += "-shard-" + std::to_string(index) + "-of-" + std::to_string(count);
  // Every option set here, so that a new default in search.h does not change the golden files.
  r.options.time_limit_s = 60;
  r.options.threads = 0;
  r.options.max_kernel_ops = 2;
  r.options.max_block_ops = 12;
  r.options.shard = {index, count};
  r.options.top = 3;
  r.options.trials = 3;
  r.options.seed = 1;
  r.options.abstract_pruning = true;
  const uint64_t i = static_cast<uint64_t>(index);
  r.top = {candidate(100 + i, 10.0 + static_cast<double>(index)),
           candidate(200 + i, 30.0 - static_cast<double>(index))};
  r.stats.states = 1000 * (i + 1);
  r.stats.pruned = {{"abstract", 10 * (i + 1)}, {"shape", i}};
  if (index == 2) r.stats.pruned["smem"] = 7;
  r.stats.complete = 5 + i;
  r.stats.verified = 2;
  r.stats.rejected = i;
  r.stats.tasks_total = 10;
  r.stats.tasks_done = 10;
  r.stats.seconds = 1.5 + static_cast<double>(index);
  r.stats.verify_seconds = 0.5;
  return r;
}

// Field by field, so that a failure says which field differs.
inline void expect_same(const SearchResult& a, const SearchResult& b) {
  EXPECT_EQ(a.spec, b.spec);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.options, b.options);
  EXPECT_EQ(a.top, b.top);
  EXPECT_EQ(a.stats, b.stats);
}

}  // namespace morgana::search::testing
