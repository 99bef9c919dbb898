// Which columns (positions along the last dim) of each tensor the requested output elements can read. The cheap
// equivalence mode evaluates rows (last-dim slices) on demand; attention's sample compares 4 of O's 64 columns, and
// O = S·V reads the same 4 columns of V, so only those are drawn and multiplied. Backward over the graph from the
// requested output columns, like exponent_use.h; an op that reads whole rows (matmul's left operand, softmax and
// norms along the last dim) asks for every column of its operand, and a tensor read by several ops gets the union.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace morgana::verify {

using Columns = std::vector<int32_t>;  // sorted, distinct

struct ColumnUse {
  std::vector<Columns> kernel;             // per kernel-level tensor
  std::vector<std::vector<Columns>> body;  // per block graph (in Graph::bodies() order), per body tensor
};

// `outputs[i]`: the columns of output i whose elements will be requested.
ColumnUse column_use(const ir::Graph& g, const std::vector<Columns>& outputs);

// Every column of every tensor.
ColumnUse all_columns(const ir::Graph& g);

Columns column_union(const Columns& a, const Columns& b);

}  // namespace morgana::verify
