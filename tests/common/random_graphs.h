// A generator of random valid kernel graphs with block graphs, for property tests (round trip, lazy vs eager).
// Every choice that does not fit (shapes, splits) is discarded; callers should still run the verifier.
#pragma once

#include <algorithm>
#include <random>

#include "ir/diagnostic.h"
#include "ir/graph.h"
#include "ir/verify.h"

namespace morgana::testing {

using namespace morgana::ir;

class RandomGraphs {
 public:
  explicit RandomGraphs(uint64_t seed) : rng_(seed) {}

  Graph kernel() {
    Graph g;
    g.set_name("k" + std::to_string(pick(1000)));
    dtype_ = static_cast<DType>(pick(3));
    int n_inputs = 1 + pick(3);
    for (int i = 0; i < n_inputs; ++i) g.add_input(random_type(), pick(2) ? "In" + std::to_string(i) : "");
    int n_ops = 2 + pick(8);
    for (int i = 0; i < n_ops; ++i) {
      if (pick(4) == 0)
        try_block(g);
      else
        try_op(g, kKernelLevel);
    }
    int n_out = 1 + pick(2);
    for (int i = 0; i < n_out; ++i) g.add_output(static_cast<TensorId>(g.num_tensors() - 1 - pick(std::min<int>(2, static_cast<int>(g.num_tensors())))));
    for (size_t t = 0; t < g.num_tensors(); ++t)
      if (g.name(static_cast<TensorId>(t)).empty() && pick(3) == 0) g.set_name(static_cast<TensorId>(t), "v" + std::to_string(t));
    return g;
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  int64_t pick_of(std::initializer_list<int64_t> v) { return *(v.begin() + pick(static_cast<int>(v.size()))); }

  TensorType random_type() {
    std::vector<int64_t> dims(static_cast<size_t>(1 + pick(3)));
    for (int64_t& d : dims) d = pick_of({1, 2, 4, 8, 16});
    return TensorType::make(dtype_, dims);
  }

  Attrs random_attrs(const OpInfo& info, const TensorType& t0) {
    Attrs a;
    if (info.attrs & kAttrDim) a.dim = pick(t0.rank);
    if ((info.attrs & kAttrTo) && pick(2)) a.to = pick_of({1, 2, 4});
    if (info.attrs & kAttrS) a.s = pick(2) ? static_cast<double>(pick(100)) / 8 : std::ldexp(static_cast<double>(rng_() >> 11), -60);
    if ((info.attrs & kAttrEps) && pick(2)) a.eps = 1e-5;
    return a;
  }

  // Appends one random op to g (kernel level) or to a block body; returns false when the choice did not fit.
  bool try_op(Graph& g, Level level, const std::vector<TensorId>* pool = nullptr) {
    std::vector<OpCode> ops;
    for (size_t i = 0; i < all_ops().size(); ++i) {
      const OpInfo& info = all_ops()[i];
      if ((info.levels & level) && info.kind != OpKind::Input && info.kind != OpKind::Output &&
          info.kind != OpKind::Block && info.kind != OpKind::Iter && info.kind != OpKind::Save &&
          info.kind != OpKind::Accum)
        ops.push_back(static_cast<OpCode>(i));
    }
    OpCode op = ops[static_cast<size_t>(pick(static_cast<int>(ops.size())))];
    const OpInfo& info = op_info(op);
    std::vector<TensorId> operands;
    for (int i = 0; i < info.arity; ++i) {
      if (pool) operands.push_back((*pool)[static_cast<size_t>(pick(static_cast<int>(pool->size())))]);
      else operands.push_back(static_cast<TensorId>(pick(static_cast<int>(g.num_tensors()))));
    }
    try {
      std::vector<TensorId> r = g.add(op, operands, random_attrs(info, g.type(operands[0])));
      if (pool) const_cast<std::vector<TensorId>*>(pool)->push_back(r[0]);
      return true;
    } catch (const UserError&) {
      return false;
    }
  }

  void try_block(Graph& g) {
    std::vector<TensorId> operands;
    int n = 1 + pick(2);
    for (int i = 0; i < n; ++i) {
      auto t = static_cast<TensorId>(pick(static_cast<int>(g.num_tensors())));
      if (std::find(operands.begin(), operands.end(), t) == operands.end() && g.tensor(t).type.rank > 0 &&
          g.node(g.tensor(t).producer).op != OpCode::output)
        operands.push_back(t);
    }
    BlockParams p;
    p.grid = {pick_of({1, 2, 4}), pick_of({1, 1, 2}), 1};
    p.loop = pick_of({1, 2});
    p.threads = pick_of({32, 64, 128, 256});
    std::vector<TensorType> types;
    for (TensorId t : operands) types.push_back(g.type(t));
    Graph body = Graph::make_block(p, types);
    try {
      std::vector<TensorId> loop_vals;
      for (uint32_t i = 0; i < operands.size(); ++i) {
        const TensorType& t = types[i];
        std::array<int8_t, kGridDims> imap{kPhi, kPhi, kPhi};
        for (int gd = 0; gd < 2; ++gd)
          if (p.grid[static_cast<size_t>(gd)] > 1 && pick(2)) imap[static_cast<size_t>(gd)] = static_cast<int8_t>(pick(t.rank));
        int8_t fmap = p.loop > 1 && pick(2) ? static_cast<int8_t>(pick(t.rank)) : kPhi;
        loop_vals.push_back(body.add_iter(i, imap, fmap, pick(4) == 0));
      }
      for (int i = pick(3); i > 0; --i) try_op(body, kBlockLevel, &loop_vals);
      // Fold everything not yet used into accumulators, so every value reaches a saver.
      std::vector<bool> used(body.num_tensors(), false);
      for (const Node& nd : body.nodes())
        for (TensorId t : body.operands(nd)) used[t] = true;
      std::vector<TensorId> post;
      for (TensorId t : loop_vals)
        if (!used[t]) post.push_back(body.add1(pick(3) ? OpCode::acc_sum : OpCode::acc_max, {t}));
      if (pick(2)) try_op(body, kBlockLevel, &post);
      used.assign(body.num_tensors(), false);
      for (const Node& nd : body.nodes())
        for (TensorId t : body.operands(nd)) used[t] = true;
      for (TensorId t : post) {
        if (used[t]) continue;
        Attrs s;
        int rank = body.type(t).rank;
        for (int gd = 0, next_dim = pick(rank); gd < kGridDims; ++gd)
          if (p.grid[static_cast<size_t>(gd)] > 1) s.map[static_cast<size_t>(gd)] = static_cast<int8_t>(next_dim++ % rank);
        body.add(OpCode::save, std::vector<TensorId>{t}, s);
      }
      if (!verify(body).empty()) return;
      g.add_block(operands, std::move(body));
    } catch (const UserError&) {
    }
  }

  std::mt19937_64 rng_;
  DType dtype_ = DType::f32;
};

}  // namespace morgana::testing
