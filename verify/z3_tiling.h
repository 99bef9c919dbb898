// Z3 proofs about a block graph's tiling (built only when Meson finds Z3: MORGANA_HAVE_Z3). For the launch
// grid and the for-loop, as integer constraints over block indices, iteration and tile index:
//   - each save writes every element of its result exactly once: no two (block, tile index) pairs write the
//   same
//     in-bounds element (quantifier-free), and no element is left unwritten (one ∃∀ formula over the
//     integers);
//   - each iter reads within its operand, unless it is masked (ragged edges read as zero), and its reads
//   cover the
//     operand.
// A refuted claim comes with Z3's counterexample. The IR's shape rules (ir/shape_rules.cpp) already make
// these violations unreachable through Graph's builder and the parser; the proof re-derives them from the
// index arithmetic the interpreters and the code generators use, and the tests refute hand-edited tilings.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace morgana::verify {

struct IterTiling {
  std::string name;
  ir::TensorType operand;  // the block operand it reads
  ir::TensorType tile;
  std::array<int8_t, ir::kGridDims> imap{ir::kPhi, ir::kPhi, ir::kPhi};
  int8_t fmap = ir::kPhi;
  bool mask = false;
};

struct SaveTiling {
  std::string name;
  ir::TensorType tile;
  ir::TensorType result;
  std::array<int8_t, ir::kGridDims> omap{ir::kPhi, ir::kPhi, ir::kPhi};
};

// The index arithmetic of one block graph, as data (so that a test can describe a tiling the IR would
// reject).
struct BlockTiling {
  ir::BlockParams params;
  std::vector<IterTiling> iters;
  std::vector<SaveTiling> saves;
};

BlockTiling tiling_of(const ir::Graph& block_graph);

struct TilingProof {
  int claims = 0;                    // claims checked
  std::vector<std::string> refuted;  // "save 'y': writes element [0,5] twice: block (1,0,0) ... and ..."
  std::vector<std::string> unknown;  // claims Z3 did not decide in time
  bool proved() const { return refuted.empty() && unknown.empty(); }
};

TilingProof prove_tiling(const BlockTiling& tiling, unsigned timeout_ms = 10000);
TilingProof prove_tiling(const ir::Graph& block_graph, unsigned timeout_ms = 10000);

}  // namespace morgana::verify
