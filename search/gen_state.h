// The generator's partial-result state (docs/search.md, "Generator"): what it knows of every value of a prefix
// while it builds a μGraph, at the kernel level (KTensor) and inside one block graph (BTensor, Block), and the
// shapes of the space it walks (Skeleton, Header, Task). Plain data with the few questions asked of it; the
// rules that read it are in search/gen_rules.h, the walk in search/generator.cpp (kernel level) and
// search/gen_block.cpp (block level).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ir/abstract_expr.h"
#include "ir/graph.h"
#include "search/axes.h"

namespace morgana::search::gen {

using ir::ExprId;
using ir::OpCode;
using ir::TensorId;

constexpr int kMaxSaves = 4;              // results of one block op
constexpr int kMaxScalarChain = 2;        // scalar ops (mul_scalar, add_scalar) in a row
constexpr int kMaxOpen = 3;               // body values computed but not yet consumed, at any point
constexpr int64_t kMaxLoop = 64;          // the for-loop walks at most this many chunks
constexpr size_t kSizesPerStructure = 3;  // a last block op's cheapest sizes that become candidates

// Canonical order (paper §4): an op's rank is (its newest operand, then the rest of what it is); a graph is
// canonical when its ops' ranks strictly increase, which every DAG has exactly one way of being.
struct Rank {
  uint32_t newest = 0;
  uint64_t rest = 0;
  auto operator<=>(const Rank&) const = default;
};
Rank rank_of(std::span<const TensorId> operands, OpCode op, uint64_t attr_key);
uint64_t attr_key(const ir::Attrs& a);
// A label as a hash key, without its part count: a structure found for one split replays at any other.
inline uint64_t label_key(const Label& l) { return (uint64_t{l.axis} << 16 | l.over) + 1; }

// Joined axes: a concat along a dim joins the two axes its operands have there into an axis of its own (an id
// past the spec's axes, with the sum of their extents). A concat then matmul over the joined axis is the sum of
// two products, so only the axes a spec's sum of two products contracts are joined, both ways round (LoRA's
// XW + (XA)B: (K, R) and (R, K), for (X‖XA)·(W;B)).
struct JoinedAxes {
  struct Joint {
    uint16_t a, b, id;
  };
  std::vector<Joint> list;
  bool empty() const { return list.empty(); }
  // The joined axis of `a` then `b`, or nullopt.
  std::optional<Label> of(const Label& a, const Label& b) const {
    for (const Joint& j : list)
      if (a == Label{j.a, 0, 0} && b == Label{j.b, 0, 0}) return Label{j.id, 0, 0};
    return std::nullopt;
  }
  bool is_joint(const Label& l) const {
    for (const Joint& j : list)
      if (l == Label{j.id, 0, 0}) return true;
    return false;
  }
  bool any_joint(const Labels& l) const {
    for (int d = 0; d < l.rank && !empty(); ++d)
      if (is_joint(l.dims[static_cast<size_t>(d)])) return true;
    return false;
  }
};

// A kernel-level tensor of the candidate.
struct KTensor {
  ExprId expr = ir::kNoExpr;
  Labels labels;
  bool shift = false;
  bool shifted = false;  // x - max
  bool maxdep = false;   // partial results scaled by their own part's max (combine them with that max)
  uint8_t dist = 0;      // SubexprOracle::distance: ops it still needs, at least, to become an output
  int uses = 0;
};

// A block op before its tile sizes are chosen: its operands (kernel tensors) and the axes the grid dims and the
// for-loop cut.
struct Skeleton {
  std::vector<TensorId> operands;
  std::vector<Label> grid;  // grid x, y, z in order
  Label loop;               // unit: no for-loop
};

// A block graph found at representative sizes, and which of its saved values are partial results scaled by
// their own part's max.
struct Structure {
  ir::Graph body;
  std::vector<bool> scaled;
};

// A task: one block-op skeleton as the first kernel op, or (block false) every predefined op first.
struct Task {
  bool block = false;
  Skeleton sk;
};

// What a block op slices a stacked dim by: the split that made its partial results (the axis they are partial
// over and the number of parts), whichever dim of theirs holds the parts. A split-KV flash kernel whose grid also
// cuts the heads stacks its row sums along their unit dim and its P·V along V's columns; one loop over the splits
// combines both. Unstacked labels are their own partition.
inline Label partition(const Label& l) { return l.stacked() ? Label{0, l.over, l.parts} : l; }

// The header of a skeleton: its distinct axes, which grid dim cuts each (-1: none) and which the loop cuts.
// A stacked dim is cut by its partition's axis (partition()). Partial states below are bit sets over `axes`.
struct Header {
  std::vector<Label> axes;
  std::vector<int> grid_of;
  int loop = -1;  // index into axes
  int bit(const Label& l) const {
    const Label p = partition(l);
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] == p) return static_cast<int>(i);
    return -1;
  }
  // Whether the for-loop's axis is not also cut by the grid, so that the loop completes it.
  bool loop_completes_axis() const { return loop >= 0 && grid_of[static_cast<size_t>(loop)] < 0; }
};
Header header_of(const Skeleton& sk);

// A block-level tensor while the block graph is built.
struct BTensor {
  ExprId expr = ir::kNoExpr;
  Labels labels;
  uint8_t psum = 0;  // partial sums over these header axes (bits index Header::axes)
  uint8_t pmax = 0;  // partial maxima (the tensor is then a Shift)
  bool shift = false;
  bool iter = false;
  bool epilogue = false;
  uint8_t scalar_chain = 0;
  OpCode scalar = OpCode::input;  // mul_scalar or add_scalar when the tensor is one's result
  uint32_t cls = UINT32_MAX;      // e-class of expr in the spec's e-graph (SubexprOracle::class_of), where the
                                  // op shows what it computes (not a scalar op or a max subtraction)
  uint32_t eclass = UINT32_MAX;   // e-class of expr, always (UINT32_MAX: not in the e-graph)
  bool shifted = false;           // x - max: its max is taken already
  uint8_t maxdep = 0;             // scaled by exp(-m) for a max m that is partial over these header axes
  bool squared = false;           // square(x)
  uint8_t dist = 0;               // SubexprOracle::distance
  int uses = 0;
};

// The largest distance of a value nothing has consumed yet.
template <class T>
int farthest_open(const std::vector<T>& values) {
  int far = 0;
  for (const T& v : values)
    if (v.uses == 0) far = std::max<int>(far, v.dist);
  return far;
}

// The state of building one block graph.
struct Block {
  const Skeleton* sk = nullptr;
  Header h;
  ir::Graph g;
  std::vector<BTensor> bt;
  std::vector<ExprId> ex;
  std::vector<ExprId> operand_exprs;
  int compute_ops = 0;
  bool final = false;
  int budget = 0;  // compute ops this block and the kernel ops after it may apply to its values, at most
  // Whether some open value is further from the spec's outputs than the ops that may still be added.
  bool too_far() const { return compute_ops + farthest_open(bt) > budget; }
};

constexpr TensorId kNone = UINT32_MAX;
// A scalar op's result is consumed by the very next op (scalar_consumer_ok says which): a constant belongs to
// the op it feeds, and leaving it open would only multiply the ways of writing the same graph.
TensorId pending_scalar(const Block& b);
// Whether `t` has a dim on one of the header axes in `bits`.
bool has_axis_in(const BTensor& t, uint8_t bits, const Header& h);
// Whether `x` has the loop's axis as a dim of its own (it then is not a partial result over it).
bool has_loop_dim(const Header& h, const BTensor& x);
// Whether the skeleton's grid cuts `l`.
bool grid_cuts(const Skeleton& sk, const Label& l);

}  // namespace morgana::search::gen
