// The reference interpreter: executes kernel graphs and block graphs with their real tiling semantics
// (docs/spec-language.md, "Meaning"). It is a template over a value domain so that the float reference (below) and
// the finite-field interpreter of verify/ share one implementation of imap/fmap/omap, for-loops, accumulators and
// epilogues: a wrong mapping gives a wrong answer in both.
//
// A domain D provides:
//   using Value;
//   Value constant(double c);                          exact for the field domain (a double is a dyadic rational)
//   Value unary(OpCode op, Value x, double s);         elementwise ops of kind Unary (s: the op's scalar)
//   Value binary(FieldSem f, Value a, Value b);        Add, Sub, Mul, Div, Max
//   void dot_rows(Value* out, const Value* a, const Value* const* b, int64_t k, int64_t n,
//                 const int32_t* cols = nullptr);
//                                                      out[j] = sum over kk < k of a[kk] * b[kk][j], j < n: the
//                                                      inner loop of every matmul (the float domain must add in
//                                                      kk order, starting from the kk = 0 product); with `cols`,
//                                                      only the columns j = cols[i], i < n (the lazy interpreter)
// and optionally, for device storage rounding (both interpreters apply it to every kernel-level tensor: a
// predefined op's result, what a block op saves; and to a matmul's operands, which a matrix instruction takes in
// their element type; other block-level tiles stay unrounded, as the lowering computes them in f32):
//   bool rounds_stores();                              whether stored values are rounded at all
//   Value stored(Value v, DType t);                    v as a tensor of element type t holds it
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "ir/diagnostic.h"
#include "ir/block_rules.h"
#include "ir/graph.h"

namespace morgana::verify {

using ir::Attrs;
using ir::FieldSem;
using ir::Graph;
using ir::Node;
using ir::OpCode;
using ir::OpKind;
using ir::TensorId;
using ir::TensorType;

// A tensor's values in logical row-major order (strides describe device memory, not this).
template <class V>
struct Array {
  TensorType type;
  std::vector<V> data;
};

template <class V>
Array<V> make_array(const TensorType& t, V fill) {
  TensorType r = t;
  r.set_row_major_strides();
  return {r, std::vector<V>(static_cast<size_t>(t.numel()), fill)};
}

namespace detail {

// Row-major strides of a shape, with 0 for dims where `of` has extent 1 but `shape` does not (broadcasting),
// right-aligned to `rank`.
inline std::array<int64_t, ir::kMaxRank> broadcast_strides(const TensorType& of, int rank,
                                                           const TensorType& shape) {
  std::array<int64_t, ir::kMaxRank> s{};
  int64_t stride = 1;
  for (int i = of.rank - 1; i >= 0; --i) {
    int j = rank - of.rank + i;
    s[static_cast<size_t>(j)] = (of.dim(i) == 1 && shape.dim(j) != 1) ? 0 : stride;
    stride *= of.dim(i);
  }
  return s;
}

// Calls f(out_index, a_index, b_index) for every element of `out` (which a and b broadcast to).
template <class F>
void for_each_broadcast(const TensorType& out, const TensorType& a, const TensorType& b, F&& f) {
  auto sa = broadcast_strides(a, out.rank, out), sb = broadcast_strides(b, out.rank, out);
  std::array<int64_t, ir::kMaxRank> idx{};
  int64_t n = out.numel(), ia = 0, ib = 0;
  for (int64_t o = 0; o < n; ++o) {
    f(o, ia, ib);
    for (int d = out.rank - 1; d >= 0; --d) {
      auto ud = static_cast<size_t>(d);
      ++idx[ud];
      ia += sa[ud];
      ib += sb[ud];
      if (idx[ud] < out.dim(d)) break;
      ia -= sa[ud] * idx[ud];
      ib -= sb[ud] * idx[ud];
      idx[ud] = 0;
    }
  }
}

// Splits a shape around `dim`: outer (product of dims before), n (dim extent), inner (product after).
struct Around {
  int64_t outer, n, inner;
};
inline Around around(const TensorType& t, int dim) {
  Around a{1, t.dim(dim), 1};
  for (int i = 0; i < dim; ++i) a.outer *= t.dim(i);
  for (int i = dim + 1; i < t.rank; ++i) a.inner *= t.dim(i);
  return a;
}

// Whether domain d rounds stored values (the optional rounds_stores() of the contract above; false without it).
template <class D>
bool rounds_stores(const D& d) {
  if constexpr (requires { d.rounds_stores(); })
    return d.rounds_stores();
  else
    return false;
}

// v as the running max of an acc_rescale_sum over maxima of element type t holds it: rounded to t where d rounds
// stores (Interpreter::accumulate says why), else v.
template <class D, class V>
V held_max(const D& d, const V& v, ir::DType t) {
  if constexpr (requires { d.rounds_stores(); })
    if (d.rounds_stores()) return d.stored(v, t);
  return v;
}

}  // namespace detail

// Origin of block `b`'s tile along each dim of a tensor split by `a.map` (and, for iterators, the for-loop in
// iteration `it`): grid parts outside, loop parts inside. The one statement of this rule, shared by the eager and
// the on-demand interpreters.
inline std::array<int64_t, ir::kMaxRank> tile_origin(const ir::BlockParams& p, const Attrs& a, const TensorType& tile,
                                                     const std::array<int64_t, ir::kGridDims>& b, int64_t it,
                                                     bool with_loop) {
  std::array<int64_t, ir::kMaxRank> o{};
  for (int d = 0; d < tile.rank; ++d) {
    int64_t loop_parts = with_loop && a.fmap == d ? p.loop : 1;
    int64_t origin = with_loop && a.fmap == d ? it * tile.dim(d) : 0;
    for (int g = 0; g < ir::kGridDims; ++g)
      if (a.map[static_cast<size_t>(g)] == d) origin += b[static_cast<size_t>(g)] * tile.dim(d) * loop_parts;
    o[static_cast<size_t>(d)] = origin;
  }
  return o;
}

template <class D>
class Interpreter {
 public:
  using V = typename D::Value;
  using Arr = Array<V>;

  explicit Interpreter(D& domain) : d_(domain) {}

  // Runs a kernel graph on its inputs (in parameter order); returns its outputs in order.
  std::vector<Arr> run(const Graph& g, std::span<const Arr> inputs) {
    MG_CHECK(!g.is_block(), "run a kernel graph");
    if (inputs.size() != g.inputs().size())
      throw UserError("the program takes " + std::to_string(g.inputs().size()) + " inputs, got " +
                      std::to_string(inputs.size()));
    // Inputs are read in place; every other tensor is owned here.
    std::vector<Arr> owned(g.num_tensors());
    std::vector<const Arr*> vals(g.num_tensors(), nullptr);
    for (size_t i = 0; i < inputs.size(); ++i) {
      TensorId t = g.inputs()[i];
      if (!(inputs[i].type.shape().size() == g.type(t).shape().size() &&
            std::equal(inputs[i].type.shape().begin(), inputs[i].type.shape().end(), g.type(t).shape().begin())))
        throw UserError("input " + std::to_string(i) + " has shape " + inputs[i].type.str() + ", expected " +
                        g.type(t).str());
      vals[t] = &inputs[i];
    }
    for (const Node& n : g.nodes()) {
      if (n.op == OpCode::input || n.op == OpCode::output) continue;
      std::vector<const Arr*> ins;
      for (TensorId t : g.operands(n)) ins.push_back(vals[t]);
      if (n.op == OpCode::block) {
        std::vector<Arr> outs = run_block(g.body(n), ins);
        for (size_t i = 0; i < outs.size(); ++i) {
          TensorId r = g.result(n, static_cast<int>(i));
          owned[r] = std::move(outs[i]);
          store(owned[r]);  // what a block op saves lands in global memory in the result's element type
          vals[r] = &owned[r];
        }
      } else {
        TensorId r = g.result(n);
        owned[r] = apply(n, ins, g.type(r));
        store(owned[r]);
        vals[r] = &owned[r];
      }
    }
    std::vector<Arr> out;
    for (TensorId t : g.outputs()) {
      bool last_use = std::count(g.outputs().begin(), g.outputs().end(), t) == 1 && vals[t] == &owned[t];
      out.push_back(last_use ? std::move(owned[t]) : *vals[t]);
    }
    return out;
  }

  // Runs one block graph over its whole grid. `operands` are the block op's kernel-level operands.
  std::vector<Arr> run_block(const Graph& body, const std::vector<const Arr*>& operands) {
    const ir::BlockParams& p = body.block_params();
    std::vector<Arr> outs;
    for (TensorId t : body.outputs()) outs.push_back(make_array(body.type(t), d_.constant(0)));
    std::vector<bool> epilogue = epilogue_tensors(body);
    const std::vector<uint8_t> unrounded = ir::matmul_operands_scaled_after(body);
    std::array<int64_t, ir::kGridDims> b{};
    for (b[2] = 0; b[2] < p.grid[2]; ++b[2])
      for (b[1] = 0; b[1] < p.grid[1]; ++b[1])
        for (b[0] = 0; b[0] < p.grid[0]; ++b[0]) one_block(body, operands, epilogue, unrounded, b, outs);
    return outs;
  }

 private:
  // Tensors computed once after the for-loop: accumulator results and everything downstream of them.
  static std::vector<bool> epilogue_tensors(const Graph& body) {
    std::vector<bool> post(body.num_tensors(), false);
    for (const Node& n : body.nodes()) {
      bool p = ir::op_info(n.op).kind == OpKind::Accum;
      for (TensorId t : body.operands(n)) p = p || post[t];
      for (int i = 0; i < n.num_results; ++i) post[body.result(n, i)] = p;
    }
    return post;
  }

  // `unrounded`: per node, the matmul operands the device-precision reference takes unrounded
  // (ir::matmul_operands_scaled_after).
  void one_block(const Graph& body, const std::vector<const Arr*>& operands, const std::vector<bool>& epilogue,
                 const std::vector<uint8_t>& unrounded, const std::array<int64_t, ir::kGridDims>& b,
                 std::vector<Arr>& outs) {
    const ir::BlockParams& p = body.block_params();
    std::vector<Arr> vals(body.num_tensors());
    std::vector<Arr> scale(body.num_tensors());  // acc_rescale_sum: running max of its scale operand
    for (int64_t it = 0; it < p.loop; ++it) {
      for (const Node& n : body.nodes()) {
        TensorId r = body.result(n);
        if (n.op == OpCode::save || (epilogue[r] && ir::op_info(n.op).kind != OpKind::Accum)) continue;
        std::vector<const Arr*> ins;
        for (TensorId t : body.operands(n)) ins.push_back(&vals[t]);
        switch (ir::op_info(n.op).kind) {
          case OpKind::Iter:
            vals[r] = load_tile(body, n, *operands[n.attrs.index], b, it);
            break;
          case OpKind::Accum:
            accumulate(n, ins, it == 0, vals[r], scale[r]);
            break;
          default:
            // Block-level tiles stay in f32 (the lowering computes every tile in f32, targets/lower/lower_block.cpp):
            // no storage rounding inside a block.
            vals[r] = apply(n, ins, body.type(r), unrounded[static_cast<size_t>(&n - body.nodes().data())]);
        }
      }
    }
    size_t out_index = 0;
    for (const Node& n : body.nodes()) {
      TensorId r = body.result(n);
      if (n.op == OpCode::save) {
        store_tile(body, n, vals[body.operands(n)[0]], b, outs[out_index++]);
        continue;
      }
      if (!epilogue[r] || ir::op_info(n.op).kind == OpKind::Accum) continue;
      std::vector<const Arr*> ins;
      for (TensorId t : body.operands(n)) ins.push_back(&vals[t]);
      vals[r] = apply(n, ins, body.type(r), unrounded[static_cast<size_t>(&n - body.nodes().data())]);
    }
  }

  void store(Arr& a) {
    if constexpr (requires { d_.rounds_stores(); })
      if (d_.rounds_stores())
        for (V& v : a.data) v = d_.stored(v, a.type.dtype);
  }

  // Calls f(tile_flat, full_flat or -1 when outside `full`) for each element of the tile.
  template <class F>
  static void for_each_tile_element(const TensorType& tile, const TensorType& full,
                                    const std::array<int64_t, ir::kMaxRank>& origin, F&& f) {
    std::array<int64_t, ir::kMaxRank> idx{};
    int64_t n = tile.numel();
    for (int64_t e = 0; e < n; ++e) {
      int64_t flat = 0;
      bool inside = true;
      for (int d = 0; d < tile.rank; ++d) {
        int64_t x = origin[static_cast<size_t>(d)] + idx[static_cast<size_t>(d)];
        if (x >= full.dim(d)) inside = false;
        flat = flat * full.dim(d) + x;
      }
      f(e, inside ? flat : -1);
      for (int d = tile.rank - 1; d >= 0; --d) {
        if (++idx[static_cast<size_t>(d)] < tile.dim(d)) break;
        idx[static_cast<size_t>(d)] = 0;
      }
    }
  }

  Arr load_tile(const Graph& body, const Node& n, const Arr& src, const std::array<int64_t, ir::kGridDims>& b,
                int64_t it) {
    const TensorType& tile = body.type(body.result(n));
    Arr out = make_array(tile, d_.constant(0));
    auto origin = tile_origin(body.block_params(), n.attrs, tile, b, it, true);
    for_each_tile_element(tile, src.type, origin, [&](int64_t e, int64_t s) {
      if (s >= 0) out.data[static_cast<size_t>(e)] = src.data[static_cast<size_t>(s)];  // masked: zero
    });
    return out;
  }

  void store_tile(const Graph& body, const Node& n, const Arr& tile, const std::array<int64_t, ir::kGridDims>& b,
                  Arr& dst) {
    auto origin = tile_origin(body.block_params(), n.attrs, tile.type, b, 0, false);
    for_each_tile_element(tile.type, dst.type, origin, [&](int64_t e, int64_t s) {
      if (s >= 0) dst.data[static_cast<size_t>(s)] = tile.data[static_cast<size_t>(e)];
    });
  }

  // Folds one for-loop iteration into an accumulator. The first iteration initialises it, so no identity
  // element (such as -inf) is needed in any domain.
  void accumulate(const Node& n, const std::vector<const Arr*>& ins, bool first, Arr& acc, Arr& run_max) {
    const ir::OpInfo& info = ir::op_info(n.op);
    const Arr& x = *ins[0];
    if (info.field != FieldSem::RescaleSum) {
      if (first) {
        acc = x;
        return;
      }
      for (size_t i = 0; i < acc.data.size(); ++i) acc.data[i] = d_.binary(info.field, acc.data[i], x.data[i]);
      return;
    }
    // acc_rescale_sum(x, m) = sum_t x_t * exp(m_t - M), M = max_t m_t, computed online:
    //   M' = max(M, m_t);  S' = S * exp(M - M') + x_t * exp(m_t - M').
    // Where stores round (device precision), M' is held in m's element type, as the lowering holds it: the first
    // iteration's S = x_0 * exp(m_0 - M'), M' = m_0 so held. The sums are then relative to exactly the max that a
    // block saves beside them (acc_max(m), rounded to the same type when stored), and a split-KV combine's
    // rescaling exp(M_i - M) does not carry the max's rounding: an f16 max of QK-norm logits near 50 is off by up
    // to 2^-6 (1.6% of a partial's weight, which does not cancel between the splits). In exact arithmetic the
    // function is the same (numerator and denominator of a softmax carry the same factor).
    const Arr& m = *ins[1];
    const bool hold = detail::rounds_stores(d_);
    if (first) {
      acc = make_array(x.type, d_.constant(0));
      run_max = m;
      for (V& v : run_max.data) v = detail::held_max(d_, v, m.type.dtype);
      detail::for_each_broadcast(x.type, x.type, m.type, [&](int64_t o, int64_t, int64_t im) {
        auto so = static_cast<size_t>(o), sm = static_cast<size_t>(im);
        acc.data[so] = hold ? d_.binary(FieldSem::Mul, x.data[so],
                                        d_.unary(OpCode::exp, d_.binary(FieldSem::Sub, m.data[sm], run_max.data[sm]), 0))
                            : x.data[so];
      });
      return;
    }
    Arr new_max = run_max;
    for (size_t i = 0; i < new_max.data.size(); ++i)
      new_max.data[i] = detail::held_max(d_, d_.binary(FieldSem::Max, run_max.data[i], m.data[i]), m.type.dtype);
    detail::for_each_broadcast(x.type, x.type, m.type, [&](int64_t o, int64_t, int64_t im) {
      auto so = static_cast<size_t>(o), sm = static_cast<size_t>(im);
      V keep = d_.unary(OpCode::exp, d_.binary(FieldSem::Sub, run_max.data[sm], new_max.data[sm]), 0);
      V add = d_.unary(OpCode::exp, d_.binary(FieldSem::Sub, m.data[sm], new_max.data[sm]), 0);
      acc.data[so] = d_.binary(FieldSem::Add, d_.binary(FieldSem::Mul, acc.data[so], keep),
                               d_.binary(FieldSem::Mul, x.data[so], add));
    });
    run_max = std::move(new_max);
  }

  Arr reduce(FieldSem f, const Arr& x, int dim, int64_t to, const TensorType& out_type) {
    Arr out = make_array(out_type, d_.constant(0));
    detail::Around a = detail::around(x.type, dim);
    int64_t groups = a.n / to;  // element j of the result sums x[j], x[j+to], x[j+2to], ...
    for (int64_t o = 0; o < a.outer; ++o)
      for (int64_t j = 0; j < to; ++j)
        for (int64_t i = 0; i < a.inner; ++i) {
          auto at = [&](int64_t k) { return x.data[static_cast<size_t>((o * a.n + j + k * to) * a.inner + i)]; };
          V acc = at(0);
          for (int64_t k = 1; k < groups; ++k) acc = d_.binary(f, acc, at(k));
          out.data[static_cast<size_t>((o * to + j) * a.inner + i)] = acc;
        }
    return out;
  }

  Arr elementwise(FieldSem f, const Arr& a, const Arr& b, const TensorType& out_type) {
    Arr out = make_array(out_type, d_.constant(0));
    detail::for_each_broadcast(out.type, a.type, b.type, [&](int64_t o, int64_t ia, int64_t ib) {
      out.data[static_cast<size_t>(o)] = d_.binary(f, a.data[static_cast<size_t>(ia)], b.data[static_cast<size_t>(ib)]);
    });
    return out;
  }

  Arr matmul(const Arr& a, const Arr& b, const TensorType& out_type) {
    Arr out = make_array(out_type, d_.constant(0));
    int r = out_type.rank;
    int64_t m = out_type.dim(r - 2), n = out_type.dim(r - 1), k = a.type.dim(a.type.rank - 1);
    // Batch broadcasting: walk the output's batch dims and map them onto a's and b's.
    TensorType batch = out_type, ab = a.type, bb = b.type;
    batch.rank = static_cast<uint8_t>(r - 2);
    ab.rank = static_cast<uint8_t>(a.type.rank - 2);
    bb.rank = static_cast<uint8_t>(b.type.rank - 2);
    std::vector<int64_t> a_off, b_off;
    if (batch.rank == 0) {
      a_off = {0};
      b_off = {0};
    } else {
      detail::for_each_broadcast(batch, ab, bb, [&](int64_t, int64_t ia, int64_t ib) {
        a_off.push_back(ia);
        b_off.push_back(ib);
      });
    }
    std::vector<const V*> b_rows(static_cast<size_t>(k));
    for (size_t bi = 0; bi < a_off.size(); ++bi) {
      const V* A = a.data.data() + a_off[bi] * m * k;
      const V* B = b.data.data() + b_off[bi] * k * n;
      V* C = out.data.data() + static_cast<int64_t>(bi) * m * n;
      for (int64_t kk = 0; kk < k; ++kk) b_rows[static_cast<size_t>(kk)] = B + kk * n;
      for (int64_t i = 0; i < m; ++i) d_.dot_rows(C + i * n, A + i * k, b_rows.data(), k, n);
    }
    return out;
  }

  // `unrounded`: bit i keeps a matmul's operand i in f32 in device precision (ir::matmul_operands_scaled_after).
  Arr apply(const Node& n, const std::vector<const Arr*>& ins, const TensorType& out_type, uint8_t unrounded = 0) {
    const ir::OpInfo& info = ir::op_info(n.op);
    const Attrs& a = n.attrs;
    switch (info.kind) {
      case OpKind::Unary: {
        Arr out = *ins[0];
        for (V& v : out.data) v = d_.unary(n.op, v, a.s);
        return out;
      }
      case OpKind::Binary:
        return elementwise(info.field, *ins[0], *ins[1], out_type);
      case OpKind::Matmul:
        if constexpr (requires { d_.rounds_stores(); }) {
          // Device precision: a matrix instruction takes its operands in their element type, so a block's f32
          // tile (a normalized Q, the exp of the scores) is rounded to it first, as the lowering stores it for
          // the instruction. A kernel-level operand is already rounded: no change. A normalized operand whose norm
          // the lowering applies to the product instead (ir::norm_scaled_after) is never rounded.
          if (d_.rounds_stores()) {
            Arr lhs = *ins[0], rhs = *ins[1];
            if (!(unrounded & 1u)) store(lhs);
            if (!(unrounded & 2u)) store(rhs);
            return matmul(lhs, rhs, out_type);
          }
        }
        return matmul(*ins[0], *ins[1], out_type);
      case OpKind::Reduce:
        return reduce(info.field, *ins[0], a.dim, a.to, out_type);
      case OpKind::Norm: {
        // rms_norm(x) = x * rsqrt(sum(x^2) * (1/n) + eps) over `dim`.
        const Arr& x = *ins[0];
        Arr sq = x;
        for (V& v : sq.data) v = d_.unary(OpCode::square, v, 0);
        TensorType rt = x.type;
        rt.dims[static_cast<size_t>(a.dim)] = 1;
        rt.set_row_major_strides();
        Arr ss = reduce(FieldSem::Add, sq, a.dim, 1, rt);
        for (V& v : ss.data)
          v = d_.unary(OpCode::rsqrt,
                       d_.unary(OpCode::add_scalar,
                                d_.unary(OpCode::mul_scalar, v, 1.0 / static_cast<double>(x.type.dim(a.dim))), a.eps),
                       0);
        return elementwise(FieldSem::Mul, x, ss, out_type);
      }
      case OpKind::Softmax: {
        // softmax(x) = exp(x - max) / sum(exp(x - max)) over `dim`; exact in the field domain for any max.
        const Arr& x = *ins[0];
        TensorType rt = x.type;
        rt.dims[static_cast<size_t>(a.dim)] = 1;
        rt.set_row_major_strides();
        Arr mx = reduce(FieldSem::Max, x, a.dim, 1, rt);
        Arr e = elementwise(FieldSem::Sub, x, mx, x.type);
        for (V& v : e.data) v = d_.unary(OpCode::exp, v, 0);
        Arr s = reduce(FieldSem::Add, e, a.dim, 1, rt);
        return elementwise(FieldSem::Div, e, s, out_type);
      }
      case OpKind::Concat: {
        Arr out = make_array(out_type, d_.constant(0));
        detail::Around o = detail::around(out_type, a.dim);
        int64_t n0 = ins[0]->type.dim(a.dim), n1 = ins[1]->type.dim(a.dim);
        for (int64_t i = 0; i < o.outer; ++i)
          for (int64_t j = 0; j < o.n; ++j)
            for (int64_t k = 0; k < o.inner; ++k) {
              const Arr& src = j < n0 ? *ins[0] : *ins[1];
              int64_t sj = j < n0 ? j : j - n0, sn = j < n0 ? n0 : n1;
              out.data[static_cast<size_t>((i * o.n + j) * o.inner + k)] =
                  src.data[static_cast<size_t>((i * sn + sj) * o.inner + k)];
            }
        return out;
      }
      case OpKind::Transpose: {
        const Arr& x = *ins[0];
        Arr out = make_array(out_type, d_.constant(0));
        const int64_t rows = x.type.dim(x.type.rank - 2), cols = x.type.dim(x.type.rank - 1);
        for (int64_t b = 0; b < x.type.numel() / (rows * cols); ++b)
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j)
              out.data[static_cast<size_t>((b * cols + j) * rows + i)] =
                  x.data[static_cast<size_t>((b * rows + i) * cols + j)];
        return out;
      }
      default:
        MG_CHECK(false, "apply() on structural op " + std::string(info.name));
        return {};
    }
  }

  D& d_;
};

}  // namespace morgana::verify
