// The lazy interpreter's arena: allocations of one round never overlap, and after a reset the same requests get the
// same memory (the chunks are kept, no fresh pages).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "verify/arena.h"

namespace morgana::verify {
namespace {

TEST(Arena, AllocationsOfARoundAreDisjointAndResetReusesTheMemory) {
  Arena arena;
  std::vector<uint64_t*> first_round;
  for (int round = 0; round < 3; ++round) {
    arena.reset();
    std::mt19937_64 rng(1);
    std::vector<std::pair<uintptr_t, uintptr_t>> spans;
    for (int i = 0; i < 300; ++i) {
      int64_t n = static_cast<int64_t>(rng() % (i % 50 == 0 ? 100000 : 700)) + 1;  // now and then beyond a chunk
      auto* p = arena.alloc<uint64_t>(n);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
      std::fill(p, p + n, static_cast<uint64_t>(round));
      spans.emplace_back(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p + n));
      if (round == 0)
        first_round.push_back(p);
      else
        EXPECT_EQ(p, first_round[static_cast<size_t>(i)]) << "round " << round << " allocation " << i;
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first) << "round " << round;
  }
}

}  // namespace
}  // namespace morgana::verify
