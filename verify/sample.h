// The structured sample of output elements that the cheap equivalence mode (equivalence.cpp) and the sampled float
// check (float_check.cpp) compare: a few coordinates per dim, so that an output's elements share few rows (rows are
// what the lazy interpreter makes, and what reductions and matmuls make expensive) and few columns (column_use.h).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "verify/column_use.h"

namespace morgana::verify {

struct Sample {
  std::vector<std::vector<int64_t>> elements;  // per output, flat indices, sorted and distinct
  std::vector<Columns> columns;                // per output, the last-dim positions of its elements
};

// The product of a few coordinates per dim of each of `g`'s outputs; it depends on their types and `seed` alone. The
// last dim gets its two ends and two random positions. Every other dim gets one position (all of a dim of extent
// <= 2): its last one in trial 0, a random one in later trials, so the trials together reach both ends of every dim
// (where tiling mistakes show first) while each trial touches few rows.
Sample choose_sample(const ir::Graph& g, uint64_t seed, int trial);

// Every element of either sample (of the same graph's outputs).
Sample sample_union(const Sample& a, const Sample& b);

}  // namespace morgana::verify
