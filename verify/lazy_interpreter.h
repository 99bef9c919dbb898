// Demand-driven evaluation for the cheap equivalence mode: computes only the output elements asked for and only the
// elements they depend on, memoizing each one (per block and for-loop iteration inside block graphs). Its semantics
// are exactly those of the eager Interpreter (interpreter.h), in the same operation order, so that results are
// identical in every domain; tests run both on every example and on random graphs and require equality.
#pragma once

#include <cstdlib>
#include <optional>
#include <memory>
#include <unordered_map>

#include "verify/interpreter.h"

namespace morgana::verify {

using Index = std::array<int64_t, ir::kMaxRank>;

inline Index unflatten(const TensorType& t, int64_t flat) {
  Index idx{};
  for (int d = t.rank - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % t.dim(d);
    flat /= t.dim(d);
  }
  return idx;
}

inline int64_t flatten(const TensorType& t, const Index& idx) {
  int64_t f = 0;
  for (int d = 0; d < t.rank; ++d) f = f * t.dim(d) + idx[static_cast<size_t>(d)];
  return f;
}

// Flat index into operand `of` (right-aligned, broadcast) of output index `idx` (rank `rank`).
inline int64_t broadcast_flat(const TensorType& of, const Index& idx, int rank) {
  int64_t f = 0;
  for (int i = 0; i < of.rank; ++i) {
    int64_t c = of.dim(i) == 1 ? 0 : idx[static_cast<size_t>(rank - of.rank + i)];
    f = f * of.dim(i) + c;
  }
  return f;
}

// InputFn: V(size_t input, int64_t flat), element `flat` of input `input`; called often, so it should be an
// array read.
template <class D, class InputFn>
class LazyInterpreter {
 public:
  using V = typename D::Value;

  LazyInterpreter(D& domain, const Graph& g, InputFn inputs)
      : d_(domain), g_(g), inputs_(std::move(inputs)), cache_(g.num_tensors()) {
    MG_CHECK(!g.is_block(), "lazy evaluation of a kernel graph");
    for (const Graph& body : g.bodies()) {
      std::vector<ir::NodeId> saves;
      for (ir::NodeId i = 0; i < body.nodes().size(); ++i)
        if (body.node(i).op == OpCode::save) saves.push_back(i);
      saves_.push_back(std::move(saves));
    }
  }

  // Element `flat` of output `i`.
  V output(size_t i, int64_t flat) { return value(g_.outputs()[i], flat); }
  size_t frames() const { return frames_.size(); }
  // Whether the epilogue of block `b` of block op `node` has been evaluated (some output of it was needed).
  bool block_evaluated(ir::NodeId node, const std::array<int64_t, ir::kGridDims>& b) const {
    return frames_.count(frame_key(node, b, -1)) != 0;
  }

 private:
  using NodeIdList = std::vector<ir::NodeId>;
  using Block = std::array<int64_t, ir::kGridDims>;

  // Memo of one tensor: values left uninitialized (malloc: untouched pages cost nothing) and one ready bit per
  // element, so that making a memo for a large tile touches little memory.
  struct Cache {
    std::unique_ptr<V[], decltype(&std::free)> vals{nullptr, &std::free};
    std::unique_ptr<uint64_t[], decltype(&std::free)> bits{nullptr, &std::free};
    void ensure(const TensorType& t) {
      if (vals) return;
      auto n = static_cast<size_t>(t.numel());
      vals.reset(static_cast<V*>(std::malloc(sizeof(V) * n)));
      bits.reset(static_cast<uint64_t*>(std::calloc((n + 63) / 64, sizeof(uint64_t))));
      MG_CHECK(vals && bits, "out of memory in lazy evaluation");
    }
    bool ready(int64_t i) const { return (bits[static_cast<size_t>(i) >> 6] >> (i & 63)) & 1; }
    void set(int64_t i, const V& v) {
      vals[static_cast<size_t>(i)] = v;
      bits[static_cast<size_t>(i) >> 6] |= uint64_t{1} << (i & 63);
    }
  };
  struct Frame {
    std::vector<Cache> tensors;
  };

  V value(TensorId t, int64_t flat) {
    const ir::Tensor& ten = g_.tensor(t);
    const Node& n = g_.node(ten.producer);
    if (n.op == OpCode::input) return inputs_(n.attrs.index, flat);  // the caller's inputs are cheap to read
    Cache& c = cache_[t];
    c.ensure(ten.type);
    if (c.ready(flat)) return c.vals[static_cast<size_t>(flat)];
    V v;
    if (n.op == OpCode::block) {
      v = block_output(n, ten.producer, ten.result_index, flat);
    } else {
      auto ops = g_.operands(n);
      v = compute(g_, n, ten.type, flat, stats_key(0, t),
                  [&](int k, int64_t f) { return value(ops[static_cast<size_t>(k)], f); });
    }
    c.set(flat, v);
    return v;
  }

  V block_output(const Node& n, ir::NodeId node, int result, int64_t flat) {
    const Graph& body = g_.body(n);
    const Node& save = body.node(saves_[n.attrs.index][static_cast<size_t>(result)]);
    TensorId src = body.operands(save)[0];
    const TensorType& tile = body.type(src);
    Index idx = unflatten(g_.type(g_.result(n, result)), flat);
    Block b{0, 0, 0};
    for (int g = 0; g < ir::kGridDims; ++g) {
      int8_t d = save.attrs.map[static_cast<size_t>(g)];
      if (d == ir::kPhi) continue;
      auto ud = static_cast<size_t>(d);
      b[static_cast<size_t>(g)] = idx[ud] / tile.dim(d);
      idx[ud] %= tile.dim(d);
    }
    return block_value(node, b, -1, src, flatten(tile, idx));
  }

  // Frames are keyed by an exact packing (not a hash): node, block and iteration each get their own bit field.
  uint64_t frame_key(ir::NodeId node, const Block& b, int64_t iter) const {
    const ir::BlockParams& p = g_.body(g_.node(node)).block_params();
    auto blin = static_cast<uint64_t>((b[2] * p.grid[1] + b[1]) * p.grid[0] + b[0]);
    MG_CHECK(node < (1u << 16) && blin < (1ull << 32) && iter + 1 < (1 << 16), "lazy frame key out of range");
    return static_cast<uint64_t>(node) << 48 | blin << 16 | static_cast<uint64_t>(iter + 1);
  }

  Frame& frame(ir::NodeId node, const Block& b, int64_t iter) {
    auto [it, fresh] = frames_.try_emplace(frame_key(node, b, iter));
    if (fresh) it->second.tensors.resize(g_.body(g_.node(node)).num_tensors());
    return it->second;
  }

  // Body tensor `t` of block `b` of block op `node`, in for-loop iteration `iter` (-1: the epilogue).
  V block_value(ir::NodeId node, const Block& b, int64_t iter, TensorId t, int64_t flat) {
    return in_frame(frame(node, b, iter), node, b, iter, t, flat);
  }

  // The same, with the frame already found: operands in the same frame are fetched without another lookup.
  V in_frame(Frame& fr, ir::NodeId node, const Block& b, int64_t iter, TensorId t, int64_t flat) {
    const Node& bn_op = g_.node(node);
    const Graph& body = g_.body(bn_op);
    Cache& c = fr.tensors[t];
    const ir::Tensor& ten = body.tensor(t);
    c.ensure(ten.type);
    if (c.ready(flat)) return c.vals[static_cast<size_t>(flat)];
    const Node& n = body.node(ten.producer);
    const ir::OpInfo& info = ir::op_info(n.op);
    auto ops = body.operands(n);
    V v;
    if (info.kind == OpKind::Iter) {
      const ir::BlockParams& p = body.block_params();
      TensorId src = g_.operands(bn_op)[n.attrs.index];
      const TensorType& full = g_.type(src);
      Index idx = unflatten(ten.type, flat);
      bool inside = true;
      for (int d = 0; d < ten.type.rank; ++d) {
        auto ud = static_cast<size_t>(d);
        int64_t loop_parts = n.attrs.fmap == d ? p.loop : 1;
        int64_t origin = n.attrs.fmap == d ? iter * ten.type.dim(d) : 0;
        for (int g = 0; g < ir::kGridDims; ++g)
          if (n.attrs.map[static_cast<size_t>(g)] == d)
            origin += b[static_cast<size_t>(g)] * ten.type.dim(d) * loop_parts;
        idx[ud] += origin;
        if (idx[ud] >= full.dim(d)) inside = false;
      }
      v = inside ? value(src, flatten(full, idx)) : d_.constant(0);
    } else if (info.kind == OpKind::Accum) {
      v = accumulate(node, b, n, body, flat);
    } else {
      v = compute(body, n, ten.type, flat, stats_key(frame_key(node, b, iter) + 1, t),
                  [&](int k, int64_t f) { return in_frame(fr, node, b, iter, ops[static_cast<size_t>(k)], f); });
    }
    // `c` is still valid: unordered_map never moves its elements, and a frame's tensor list never grows.
    c.set(flat, v);
    return v;
  }

  // The eager interpreter's accumulate(), one element at a time, in the same order.
  V accumulate(ir::NodeId node, const Block& b, const Node& n, const Graph& body, int64_t flat) {
    const ir::OpInfo& info = ir::op_info(n.op);
    auto ops = body.operands(n);
    int64_t loop = body.block_params().loop;
    if (info.field != FieldSem::RescaleSum) {
      V acc = block_value(node, b, 0, ops[0], flat);
      for (int64_t t = 1; t < loop; ++t) acc = d_.binary(info.field, acc, block_value(node, b, t, ops[0], flat));
      return acc;
    }
    const TensorType& xt = body.type(ops[0]);
    int64_t mflat = broadcast_flat(body.type(ops[1]), unflatten(xt, flat), xt.rank);
    V acc = block_value(node, b, 0, ops[0], flat);
    V run_max = block_value(node, b, 0, ops[1], mflat);
    for (int64_t t = 1; t < loop; ++t) {
      V m = block_value(node, b, t, ops[1], mflat);
      V x = block_value(node, b, t, ops[0], flat);
      V new_max = d_.binary(FieldSem::Max, run_max, m);
      V keep = d_.unary(OpCode::exp, d_.binary(FieldSem::Sub, run_max, new_max), 0);
      V add = d_.unary(OpCode::exp, d_.binary(FieldSem::Sub, m, new_max), 0);
      acc = d_.binary(FieldSem::Add, d_.binary(FieldSem::Mul, acc, keep), d_.binary(FieldSem::Mul, x, add));
      run_max = new_max;
    }
    return acc;
  }

  // One element of a non-structural op, in the eager interpreter's operation order. fetch(k, f) is element f of
  // operand k.
  // Per-row data computed once and reused by every element of the row: softmax and rms_norm statistics, matmul
  // operand rows and columns. Keys are exact (no hash-only identity): the frame (0 for kernel level), the tensor
  // being computed, what is cached, and the row's offset.
  struct RowKey {
    uint64_t frame;
    TensorId tensor;
    uint32_t what;
    int64_t offset;
    bool operator==(const RowKey&) const = default;
  };
  struct RowKeyHash {
    size_t operator()(const RowKey& k) const {
      return ir::hash_mix(ir::hash_mix(k.frame, (static_cast<uint64_t>(k.tensor) << 8) | k.what),
                          static_cast<uint64_t>(k.offset));
    }
  };
  struct Ctx {
    uint64_t frame;
    TensorId tensor;
  };
  static Ctx stats_key(uint64_t frame, TensorId t) { return {frame, t}; }
  struct RowStats {
    V a{}, b{};
  };
  template <class F>
  const RowStats& row_stats(Ctx ctx, int64_t row, F&& make) {
    RowKey key{ctx.frame, ctx.tensor, 0, row};
    auto it = stats_.find(key);
    if (it == stats_.end()) it = stats_.emplace(key, make()).first;
    return it->second;
  }
  // Elements first, first + step, ... (n of them) of operand k, fetched once.
  template <class Fetch>
  const std::vector<V>& operand_run(Ctx ctx, uint32_t k, int64_t first, int64_t step, int64_t n, Fetch& fetch) {
    RowKey key{ctx.frame, ctx.tensor, 1 + k, first};
    auto it = runs_.find(key);
    if (it != runs_.end()) return it->second;
    std::vector<V> r(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = fetch(static_cast<int>(k), first + i * step);
    return runs_.emplace(key, std::move(r)).first->second;
  }

  template <class Fetch>
  V compute(const Graph& gr, const Node& n, const TensorType& out, int64_t flat, Ctx ctx, Fetch&& fetch) {
    const ir::OpInfo& info = ir::op_info(n.op);
    const Attrs& a = n.attrs;
    auto ops = gr.operands(n);
    auto type = [&](int k) -> const TensorType& { return gr.type(ops[static_cast<size_t>(k)]); };
    switch (info.kind) {
      case OpKind::Unary:
        return d_.unary(n.op, fetch(0, flat), a.s);
      case OpKind::Binary: {
        Index idx = unflatten(out, flat);
        return d_.binary(info.field, fetch(0, broadcast_flat(type(0), idx, out.rank)),
                         fetch(1, broadcast_flat(type(1), idx, out.rank)));
      }
      case OpKind::Matmul: {
        Index idx = unflatten(out, flat);
        const TensorType &ta = type(0), &tb = type(1);
        int r = out.rank;
        int64_t i = idx[static_cast<size_t>(r - 2)], j = idx[static_cast<size_t>(r - 1)];
        int64_t k = ta.dim(ta.rank - 1), m = ta.dim(ta.rank - 2), nn = tb.dim(tb.rank - 1);
        auto batch_flat = [&](const TensorType& t) {
          int64_t f = 0;
          for (int p = 0; p < t.rank - 2; ++p) {
            int64_t c = t.dim(p) == 1 ? 0 : idx[static_cast<size_t>(r - t.rank + p)];
            f = f * t.dim(p) + c;
          }
          return f;
        };
        int64_t a0 = batch_flat(ta) * m * k + i * k, b0 = batch_flat(tb) * k * nn + j;
        const std::vector<V>& arow = operand_run(ctx, 0, a0, 1, k, fetch);
        const std::vector<V>& bcol = operand_run(ctx, 1, b0, nn, k, fetch);
        V acc = d_.binary(FieldSem::Mul, arow[0], bcol[0]);
        for (size_t kk = 1; kk < static_cast<size_t>(k); ++kk)
          acc = d_.binary(FieldSem::Add, acc, d_.binary(FieldSem::Mul, arow[kk], bcol[kk]));
        return acc;
      }
      case OpKind::Reduce: {
        Index idx = unflatten(out, flat);
        auto ud = static_cast<size_t>(a.dim);
        int64_t j = idx[ud], groups = type(0).dim(a.dim) / a.to;
        V acc = fetch(0, flatten(type(0), idx));
        for (int64_t g = 1; g < groups; ++g) {
          idx[ud] = j + g * a.to;
          acc = d_.binary(info.field, acc, fetch(0, flatten(type(0), idx)));
        }
        return acc;
      }
      case OpKind::Norm: {
        Index idx = unflatten(out, flat);
        auto ud = static_cast<size_t>(a.dim);
        int64_t n_dim = out.dim(a.dim);
        Index row = idx;
        row[ud] = 0;
        const RowStats& st = row_stats(ctx, flatten(out, row), [&] {
          V ss{};
          for (int64_t c = 0; c < n_dim; ++c) {
            row[ud] = c;
            V sq = d_.unary(OpCode::square, fetch(0, flatten(out, row)), 0);
            ss = c == 0 ? sq : d_.binary(FieldSem::Add, ss, sq);
          }
          V r = d_.unary(OpCode::rsqrt,
                         d_.unary(OpCode::add_scalar,
                                  d_.unary(OpCode::mul_scalar, ss, 1.0 / static_cast<double>(n_dim)), a.eps),
                         0);
          return RowStats{r, r};
        });
        return d_.binary(FieldSem::Mul, fetch(0, flat), st.a);
      }
      case OpKind::Softmax: {
        Index idx = unflatten(out, flat);
        auto ud = static_cast<size_t>(a.dim);
        int64_t n_dim = out.dim(a.dim);
        Index row = idx;
        auto at = [&](int64_t c) {
          row[ud] = c;
          return fetch(0, flatten(out, row));
        };
        row[ud] = 0;
        const RowStats& st = row_stats(ctx, flatten(out, row), [&] {
          V mx = at(0);
          for (int64_t c = 1; c < n_dim; ++c) mx = d_.binary(FieldSem::Max, mx, at(c));
          V s{};
          for (int64_t c = 0; c < n_dim; ++c) {
            V e = d_.unary(OpCode::exp, d_.binary(FieldSem::Sub, at(c), mx), 0);
            s = c == 0 ? e : d_.binary(FieldSem::Add, s, e);
          }
          return RowStats{mx, s};
        });
        V e = d_.unary(OpCode::exp, d_.binary(FieldSem::Sub, fetch(0, flat), st.a), 0);
        return d_.binary(FieldSem::Div, e, st.b);
      }
      case OpKind::Concat: {
        Index idx = unflatten(out, flat);
        auto ud = static_cast<size_t>(a.dim);
        int64_t n0 = type(0).dim(a.dim);
        if (idx[ud] < n0) return fetch(0, flatten(type(0), idx));
        idx[ud] -= n0;
        return fetch(1, flatten(type(1), idx));
      }
      default:
        break;
    }
    MG_CHECK(false, "lazy compute() on structural op " + std::string(info.name));
    return {};
  }

  D& d_;
  const Graph& g_;
  InputFn inputs_;
  std::vector<Cache> cache_;
  std::vector<NodeIdList> saves_;
  std::unordered_map<uint64_t, Frame> frames_;
  std::unordered_map<RowKey, RowStats, RowKeyHash> stats_;
  std::unordered_map<RowKey, std::vector<V>, RowKeyHash> runs_;
};

}  // namespace morgana::verify
