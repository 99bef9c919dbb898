// Which values' Z_q parts matter. A field value is (u mod p, v mod q) and outputs compare in Z_p alone, so the v part
// of a value matters only where it can reach the u part of a compared output: through exp (whose u part is ω^v),
// through an uninterpreted oracle (keyed on both parts), or through max (an oracle). Everywhere else, add, sub,
// mul, div, matmul and sums compute u from u alone. The cheap equivalence mode skips the Z_q arithmetic (and the
// Z_q part of random inputs) of values whose v part cannot matter; this pass says which those are.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace morgana::verify {

struct ExponentUse {
  std::vector<char> kernel;             // per kernel-level tensor: its v part can reach an output's u part
  std::vector<std::vector<char>> body;  // per block graph (in Graph::bodies() order), per body tensor
};

// Backward over the graph: a tensor's v part is needed when some consumer needs it (exp, oracles, max, rms_norm,
// softmax, the max operand of acc_rescale_sum always; every other op only when its own result's v part is needed).
// Graph outputs need none.
ExponentUse exponent_use(const ir::Graph& g);

}  // namespace morgana::verify
