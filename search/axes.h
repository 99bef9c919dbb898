// Axis labels (docs/search.md, "Axes"): which logical index of the spec each tensor dimension walks.
//
// Abstract expressions forget indices, so on their own they cannot tell a tile that is cut along the right
// dimension from one cut along the wrong one. The generator therefore labels every dimension with an axis of the
// spec: the spec's dimensions are unified through its ops (a matmul's inner dims are one axis, an elementwise op's
// aligned dims are one axis, ...), and a candidate's dimensions inherit the labels of the spec inputs they come
// from. Grid dims and the for-loop then cut axes, not dimension numbers, and an op whose operands disagree on an
// axis is pruned before it is ever verified.
//
// A dimension of extent 1 that broadcasts (a reduction's kept dim) carries the unit label. A kernel tensor that
// a block op saved from per-block partial results (split-K, split-KV) carries a stacked label on the dimension it
// was stacked along: `parts` partial results over axis `over`, each of which has the inner label.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace morgana::search {

struct Label {
  uint16_t axis = 0;   // 0: unit (extent 1, broadcasts); else a spec axis
  uint16_t over = 0;   // stacked partial results over this axis; 0: not stacked
  uint32_t parts = 0;  // number of partial results when stacked
  bool unit() const { return axis == 0 && over == 0; }
  bool stacked() const { return over != 0; }
  bool operator==(const Label&) const = default;
  std::string str() const;  // "a3", "1", "a2/8x[a5]"
};

struct Labels {
  uint8_t rank = 0;
  std::array<Label, ir::kMaxRank> dims{};
  bool operator==(const Labels&) const = default;
  bool any_stacked() const;
  std::string str() const;
};

// The spec's axes: every dimension of every spec tensor, unified through the spec's ops.
struct SpecAxes {
  std::vector<Labels> tensors;      // by spec TensorId
  std::vector<int64_t> extent;      // by axis id (index 0, the unit axis, has extent 1)
  int num_axes() const { return static_cast<int>(extent.size()); }
};
SpecAxes analyze_axes(const ir::Graph& spec);

// The labels of an op's result from its operands' labels, for the ops the generator builds (unary, binary with
// broadcasting, matmul, reduce with to=1, rms_norm); nullopt when the operands disagree on an axis. Stacked
// labels never combine (a stacked tensor is consumed only by a block op that slices the stacked dimension).
// `contracted`/`reduced` receive the label an op sums or maximises over (unit when none).
std::optional<Labels> infer_labels(ir::OpCode op, const ir::Attrs& attrs, const Labels* a, const Labels* b,
                                   Label* reduced);

}  // namespace morgana::search
