// Copies the nodes of one kernel graph into another, each tensor of the source bound to one of the target: how the
// partial-fusion fallback cuts windows out of a spec and stitches their μGraphs, and how transposed inputs are
// taken out of a spec and put back (input_views.h).
#pragma once

#include <limits>
#include <vector>

#include "ir/graph.h"

namespace morgana::search {

// Names go along only where asked (a window of the spec keeps the spec's names, which are distinct; the windows'
// μGraphs each name their own tensors t0, t1, ... and would clash).
class Inliner {
 public:
  Inliner(ir::Graph& into, const ir::Graph& from, bool names)
      : into_(into), from_(from), names_(names), map_(from.num_tensors(), kUnbound) {}

  void bind(ir::TensorId from, ir::TensorId to) { map_[from] = to; }
  ir::TensorId at(ir::TensorId from) const { return map_[from]; }

  // Appends node `n` of `from` over the tensors its operands are bound to, and binds its results.
  void copy(const ir::Node& n) {
    std::vector<ir::TensorId> ops;
    for (ir::TensorId o : from_.operands(n)) ops.push_back(map_[o]);
    const std::vector<ir::TensorId> results =
        n.op == ir::OpCode::block ? into_.add_block(ops, from_.body(n)) : into_.add(n.op, ops, n.attrs);
    for (size_t r = 0; r < results.size(); ++r) {
      const ir::TensorId t = from_.result(n, static_cast<int>(r));
      map_[t] = results[r];
      if (names_ && !from_.name(t).empty()) into_.set_name(results[r], from_.name(t));
    }
  }

 private:
  static constexpr ir::TensorId kUnbound = std::numeric_limits<ir::TensorId>::max();
  ir::Graph& into_;
  const ir::Graph& from_;
  bool names_;
  std::vector<ir::TensorId> map_;
};

}  // namespace morgana::search
