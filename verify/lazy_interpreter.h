// Demand-driven evaluation for the cheap equivalence mode and the sampled float check: computes only the output
// elements asked for and what they depend on. The unit of demand is a row (a slice along the last dim): each op makes
// rows in tight loops, and every row is memoized (per block and for-loop iteration inside block graphs). A row holds
// the columns of its tensor that the caller said it would ask for (column_use.h), or all of them. The semantics are
// exactly those of the eager Interpreter (interpreter.h), in the same operation order and with the same storage
// rounding, so that results are identical in every domain and precision; tests run both on every example and on
// random graphs and require equality.
#pragma once

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "verify/arena.h"
#include "verify/column_use.h"
#include "verify/exponent_use.h"
#include "verify/interpreter.h"
#include "verify/row_memo.h"

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

// InputFn: const V*(size_t input, int64_t flat), a pointer to element `flat` of input `input` (row-major, so the
// row starting there is contiguous), holding at least the input's columns in the ColumnUse; the data must outlive
// the interpreter.
//
// Rows live in an arena (the caller's, or the interpreter's own) and never move, so a row is a plain pointer and an
// input row is a pointer into the caller's data (no copy). Kernel-level rows are memoized in tables (a pointer per row of a tensor,
// nullptr until made) in the same arena, block-level rows in a RowMemo.
// A callable with the call operators of several lambdas.
template <class... F>
struct Overload : F... {
  using F::operator()...;
};

template <class D, class InputFn>
class LazyInterpreter {
 public:
  using V = typename D::Value;
  using Row = const V*;

  LazyInterpreter(D& domain, const Graph& g, InputFn inputs)
      : LazyInterpreter(domain, g, inputs, exponent_use(g), all_columns(g)) {}
  // `use` is exponent_use(g), for a caller that evaluates `g` in many trials. `cols` says which columns of each
  // tensor are made (column_use.h): output() may ask for those of the outputs only, and the inputs need hold only
  // theirs. Rows go to `arena` when given (it must outlive the interpreter), else to one of the interpreter's own.
  LazyInterpreter(D& domain, const Graph& g, InputFn inputs, ExponentUse use, ColumnUse cols, Arena* arena = nullptr)
      : d_(domain),
        g_(g),
        inputs_(std::move(inputs)),
        rows_(g.num_tensors(), nullptr),
        use_(std::move(use)),
        cols_(std::move(cols)),
        arena_(arena ? *arena : own_arena_) {
    MG_CHECK(!g.is_block(), "lazy evaluation of a kernel graph");
    for (const Graph& body : g.bodies()) {
      std::vector<ir::NodeId> saves;
      for (ir::NodeId i = 0; i < body.nodes().size(); ++i)
        if (body.node(i).op == OpCode::save) saves.push_back(i);
      saves_.push_back(std::move(saves));
      std::vector<int64_t> offsets;  // of each tensor's rows among the body's
      int64_t rows = 0;
      for (TensorId t = 0; t < body.num_tensors(); ++t) {
        offsets.push_back(rows);
        rows += num_rows(body.type(t));
      }
      row_offsets_.push_back(std::move(offsets));
      body_rows_.push_back(rows);
      unrounded_.push_back(ir::matmul_operands_scaled_after(body));
      depends_.push_back(frame_dependence(body));
    }
  }

  // Element `flat` of output `i`.
  V output(size_t i, int64_t flat) {
    TensorId t = g_.outputs()[i];
    int64_t last = last_dim(g_.type(t));
    MG_CHECK(std::binary_search(cols_.kernel[t].begin(), cols_.kernel[t].end(), flat % last),
             "lazy output() outside the columns it was made for");
    return krow(t, flat / last)[flat % last];
  }

  // Whether the epilogue of block `b` of block op `node` has been evaluated (some output of it was needed).
  bool block_evaluated(ir::NodeId node, const std::array<int64_t, ir::kGridDims>& b) const {
    return evaluated_.count(frame_key(node, b, -1)) != 0;
  }

 private:
  using Block = std::array<int64_t, ir::kGridDims>;
  // Block `block` of block op `node` in for-loop iteration `iter` (-1: the epilogue after the loop). Frames sit in a
  // node-based map and never move: a Frame& stays valid while others are added, so evaluation inside a frame passes
  // it along instead of looking it up per row.
  struct Frame {
    ir::NodeId node;
    Block block;
    int64_t iter;
    const Node* block_op;
    const Graph* body;
    const char* need_q;    // per body tensor: its Z_q part is needed (exponent_use.h)
    const Columns* cols;  // per body tensor: the columns made (column_use.h)
    // Row r of body tensor t is memoized under key + row_offset[t] + r: each frame numbers its body's rows from a
    // key of its own.
    uint64_t key;
    const int64_t* row_offset;
    Index* origins;  // per body tensor: for an iterator's tile, its origin in the operand (tile_origin)
    const uint8_t* depends;  // per body tensor: frame_dependence()
    // The frame a tensor of each dependence mask is made in (canonical()), found once per frame and mask.
    std::array<Frame*, 1u << (ir::kGridDims + 1)> canonical{};
  };

  // Which coordinates of a frame each body tensor's value depends on: bit g for grid dim g, bit kGridDims for the
  // for-loop iteration. An iterator depends on the grid dims its imap maps and on the iteration if it has an fmap;
  // an accumulator on its operand's grid dims (it folds the iterations); any other op on its operands'.
  static constexpr uint8_t kIterationBit = 1u << ir::kGridDims;
  static std::vector<uint8_t> frame_dependence(const Graph& body) {
    std::vector<uint8_t> dep(body.num_tensors(), 0);
    for (const Node& n : body.nodes()) {
      if (n.op == OpCode::save) continue;
      uint8_t m = 0;
      if (n.op == OpCode::iter) {
        for (int g = 0; g < ir::kGridDims; ++g)
          if (n.attrs.map[static_cast<size_t>(g)] != ir::kPhi) m |= static_cast<uint8_t>(1u << g);
        if (n.attrs.fmap != ir::kPhi) m |= kIterationBit;
      } else {
        for (TensorId o : body.operands(n)) m |= dep[o];
        if (ir::op_info(n.op).kind == OpKind::Accum) m &= static_cast<uint8_t>(~kIterationBit);
      }
      for (uint16_t i = 0; i < n.num_results; ++i) dep[body.result(n, i)] = m;
    }
    return dep;
  }

  // The frame in which a tensor with dependence `mask` is made when `fr` asks for it: the same block and iteration
  // with the coordinates it does not depend on set to 0 (an iteration only inside the loop; the epilogue stays the
  // epilogue). Its value there is the same, so the blocks of a query tile's grid dim share the K tiles they all read
  // instead of each making its own.
  Frame& canonical(Frame& fr, uint8_t mask) {
    Frame*& slot = fr.canonical[mask];
    if (slot) return *slot;
    Block b = fr.block;
    for (int g = 0; g < ir::kGridDims; ++g)
      if (!(mask & (1u << g))) b[static_cast<size_t>(g)] = 0;
    int64_t iter = fr.iter >= 0 && !(mask & kIterationBit) ? 0 : fr.iter;
    slot = b == fr.block && iter == fr.iter ? &fr : &frame(fr.node, b, iter);
    return *slot;
  }

  static int64_t last_dim(const TensorType& t) { return t.dim(t.rank - 1); }
  static int64_t num_rows(const TensorType& t) { return t.numel() / last_dim(t); }
  // Leading index (all dims but the last) of row `r`, and back.
  static Index row_index(const TensorType& t, int64_t r) { return unflatten(t, r * last_dim(t)); }
  static int64_t row_of(const TensorType& t, Index idx) {
    idx[static_cast<size_t>(t.rank - 1)] = 0;
    return flatten(t, idx) / last_dim(t);
  }
  // Row of operand `of` (right-aligned, broadcast) feeding output row `idx` of rank `rank`.
  static int64_t broadcast_row(const TensorType& of, const Index& idx, int rank) {
    int64_t r = 0;
    for (int i = 0; i < of.rank - 1; ++i) {
      int64_t c = of.dim(i) == 1 ? 0 : idx[static_cast<size_t>(rank - of.rank + i)];
      r = r * of.dim(i) + c;
    }
    return r;
  }

  // The memo table of a tensor of type `t`, made on first use.
  Row* table(Row*& slot, const TensorType& t) {
    if (!slot) {
      slot = alloc<Row>(num_rows(t));
      std::fill_n(slot, num_rows(t), nullptr);
    }
    return slot;
  }

  // `n` uninitialized objects of a trivially copyable type that stay put while the arena is not reset.
  template <class T = V>
  T* alloc(int64_t n) {
    return arena_.template alloc<T>(n);
  }
  // A row of `width` holding columns `cols` of `src`.
  V* alloc_copy(Row src, int64_t width, const Columns& cols) {
    V* out = alloc(width);
    for (int32_t c : cols) out[c] = src[c];
    return out;
  }

  // --- kernel level ---
  Row krow(TensorId t, int64_t r) {
    const ir::Tensor& ten = g_.tensor(t);
    Row* memo = table(rows_[t], ten.type);
    if (Row hit = memo[r]) return hit;
    const Node& n = g_.node(ten.producer);
    Row row;
    if (n.op == OpCode::input) {
      row = inputs_(n.attrs.index, r * last_dim(ten.type));
    } else if (n.op == OpCode::block) {
      row = store(block_output_row(n, ten.producer, ten.result_index, r), ten.type, cols_.kernel[t]);
    } else {
      auto ops = g_.operands(n);
      row = store(compute(g_, n, ten.type, r, use_.kernel[t], cols_.kernel[t],
                          Overload{[&](int k, int64_t rr) -> Row { return krow(ops[static_cast<size_t>(k)], rr); },
                                   [&](int k, int64_t r0, int64_t count, Row* out) {
                                     for (int64_t i = 0; i < count; ++i)
                                       out[i] = krow(ops[static_cast<size_t>(k)], r0 + i);
                                   }}),
                  ten.type, cols_.kernel[t]);
    }
    return memo[r] = row;
  }

  Row block_output_row(const Node& n, ir::NodeId node, int result, int64_t r) {
    const Graph& body = g_.body(n);
    const Node& save = body.node(saves_[n.attrs.index][static_cast<size_t>(result)]);
    TensorId src = body.operands(save)[0];
    const TensorType& tile = body.type(src);
    const TensorType& out = g_.type(g_.result(n, result));
    Index idx = row_index(out, r);
    Block b{0, 0, 0};
    int last = out.rank - 1, along_last = -1;
    for (int g = 0; g < ir::kGridDims; ++g) {
      int8_t d = save.attrs.map[static_cast<size_t>(g)];
      if (d == ir::kPhi) continue;
      if (d == last) {
        along_last = g;
        continue;
      }
      auto ud = static_cast<size_t>(d);
      b[static_cast<size_t>(g)] = idx[ud] / tile.dim(d);
      idx[ud] %= tile.dim(d);
    }
    int64_t tile_row = row_of(tile, idx), tile_last = last_dim(tile);
    V* row = alloc(last_dim(out));
    // Column c comes from part c / tile_last of a row split along the grid, else from the one block's tile.
    int64_t parts = along_last < 0 ? 1 : g_.body(n).block_params().grid[static_cast<size_t>(along_last)];
    int64_t part = -1;
    Row t = nullptr;
    for (int32_t c : cols_.kernel[g_.result(n, result)]) {
      int64_t p = along_last < 0 ? 0 : c / tile_last;
      if (p >= parts || c - p * tile_last >= tile_last) continue;  // beyond the saved tiles
      if (p != part) {
        if (along_last >= 0) b[static_cast<size_t>(along_last)] = p;
        evaluated_.insert(frame_key(node, b, -1));
        t = brow(frame(node, b, -1), src, tile_row);
        part = p;
      }
      row[c] = t[c - p * tile_last];
    }
    return row;
  }

  // --- block level ---
  // Frames are keyed by an exact packing (not a hash): node, block and iteration each get their own bit field.
  uint64_t frame_key(ir::NodeId node, const Block& b, int64_t iter) const {
    const ir::BlockParams& p = g_.body(g_.node(node)).block_params();
    auto blin = static_cast<uint64_t>((b[2] * p.grid[1] + b[1]) * p.grid[0] + b[0]);
    MG_CHECK(node < (1u << 16) && blin < (1ull << 32) && iter + 1 < (1 << 16), "lazy frame key out of range");
    return static_cast<uint64_t>(node) << 48 | blin << 16 | static_cast<uint64_t>(iter + 1);
  }

  Frame& frame(ir::NodeId node, const Block& b, int64_t iter) {
    auto [it, fresh] = frames_.try_emplace(frame_key(node, b, iter));
    Frame& fr = it->second;
    if (fresh) {
      const Node& block_op = g_.node(node);
      const Graph& body = g_.body(block_op);
      auto n = static_cast<int64_t>(body.num_tensors());
      uint32_t index = block_op.attrs.index;
      fr = {node,
            b,
            iter,
            &block_op,
            &body,
            use_.body[index].data(),
            cols_.body[index].data(),
            next_key_,
            row_offsets_[index].data(),
            alloc<Index>(n),
            depends_[index].data()};
      next_key_ += static_cast<uint64_t>(body_rows_[index]);
      for (const Node& it_node : body.nodes())
        if (it_node.op == OpCode::iter) {
          TensorId t = body.result(it_node);
          fr.origins[t] = tile_origin(body.block_params(), it_node.attrs, body.type(t), b, iter, true);
        }
    }
    return fr;
  }

  // Row `r` of body tensor `t` in frame `fr`.
  Row brow(Frame& in, TensorId t, int64_t r) {
    Frame& fr = canonical(in, in.depends[t]);
    const ir::Tensor& ten = fr.body->tensor(t);
    const uint64_t key = fr.key + static_cast<uint64_t>(fr.row_offset[t] + r);
    if (Row hit = memo_.find(key)) return hit;
    const Node& n = fr.body->node(ten.producer);
    const ir::OpInfo& info = ir::op_info(n.op);
    auto ops = fr.body->operands(n);
    Row row;
    if (info.kind == OpKind::Iter) {
      row = load_row(fr, n, t, r);
    } else if (info.kind == OpKind::Accum) {
      row = accumulate(fr, n, *fr.body, r, fr.need_q[t], fr.cols[t]);
    } else {
      row = compute(*fr.body, n, ten.type, r, fr.need_q[t], fr.cols[t],
                    Overload{[&](int k, int64_t rr) -> Row { return brow(fr, ops[static_cast<size_t>(k)], rr); },
                             [&](int k, int64_t r0, int64_t count, Row* out) {
                               brows(fr, ops[static_cast<size_t>(k)], r0, count, out);
                             }});
    }
    memo_.insert(key, row);
    return row;
  }

  // Rows r0 .. r0 + count - 1 of body tensor `t` in frame `fr`, consecutive along the second-to-last dim (a matmul's
  // B). An iterator's rows are then consecutive rows of its operand, found without a row-by-row index computation
  // and, when they are windows into the operand, without a memo entry of their own.
  void brows(Frame& fr, TensorId t, int64_t r0, int64_t count, Row* out) {
    const Node& n = fr.body->node(fr.body->tensor(t).producer);
    const TensorType& tile = fr.body->type(t);
    Index idx = row_index(tile, r0);
    const auto y = static_cast<size_t>(tile.rank - 2);
    if (n.op != OpCode::iter || idx[y] + count > tile.dim(tile.rank - 2)) {
      for (int64_t i = 0; i < count; ++i) out[i] = brow(fr, t, r0 + i);
      return;
    }
    TensorId src = g_.operands(*fr.block_op)[n.attrs.index];
    const TensorType& full = g_.type(src);
    const Index& origin = fr.origins[t];
    for (int d = 0; d < tile.rank; ++d) idx[static_cast<size_t>(d)] += origin[static_cast<size_t>(d)];
    int64_t start = idx[static_cast<size_t>(tile.rank - 1)];
    bool inside = start + last_dim(tile) <= last_dim(full);
    for (int d = 0; d < tile.rank - 2; ++d) inside = inside && idx[static_cast<size_t>(d)] < full.dim(d);
    int64_t src_row0 = inside ? row_of(full, idx) : 0;
    for (int64_t i = 0; i < count; ++i)
      out[i] = inside && idx[y] + i < full.dim(tile.rank - 2) ? krow(src, src_row0 + i) + start
                                                            : brow(fr, t, r0 + i);  // masked: a copy
  }

  // Row `r` of iterator `n`'s tile (tensor `t`) in frame `fr`.
  Row load_row(const Frame& fr, const Node& n, TensorId t, int64_t r) {
    const TensorType& tile = fr.body->type(t);
    TensorId src = g_.operands(*fr.block_op)[n.attrs.index];
    const TensorType& full = g_.type(src);
    Index idx = row_index(tile, r);  // its last coordinate is 0
    const Index& origin = fr.origins[t];
    for (int d = 0; d < tile.rank; ++d) idx[static_cast<size_t>(d)] += origin[static_cast<size_t>(d)];
    int64_t tile_last = last_dim(tile), start = idx[static_cast<size_t>(tile.rank - 1)];
    bool inside = true;
    for (int d = 0; d < tile.rank - 1; ++d) inside = inside && idx[static_cast<size_t>(d)] < full.dim(d);
    Row s = inside ? krow(src, row_of(full, idx)) : nullptr;
    if (inside && start + tile_last <= last_dim(full)) return s + start;  // the common case: a window, no copy
    V* row = alloc(tile_last);
    for (int32_t c : fr.cols[t])  // masked: ragged edges read as zero
      row[c] = inside && start + c < last_dim(full) ? s[start + c] : d_.constant(0);
    return row;
  }

  // The eager interpreter's accumulate(), a row at a time, in the same order, for columns `cols`.
  // `full`: the result's Z_q part is needed (exponent_use.h); otherwise the *_p forms skip it.
  Row accumulate(const Frame& epilogue, const Node& n, const Graph& body, int64_t r, bool full, const Columns& cols) {
    const ir::OpInfo& info = ir::op_info(n.op);
    auto ops = body.operands(n);
    int64_t loop = body.block_params().loop;
    const TensorType& xt = body.type(ops[0]);
    const int64_t width = last_dim(xt);
    auto iteration = [&](int64_t t) -> Frame& { return frame(epilogue.node, epilogue.block, t); };
    V* acc = alloc_copy(brow(iteration(0), ops[0], r), width, cols);
    if (info.field != FieldSem::RescaleSum) {
      for (int64_t t = 1; t < loop; ++t) {
        Row x = brow(iteration(t), ops[0], r);
        for (int32_t c : cols) acc[c] = bin(full, info.field, acc[c], x[c]);
      }
      return acc;
    }
    const TensorType& mt = body.type(ops[1]);
    int64_t mr = broadcast_row(mt, row_index(xt, r), xt.rank);
    const int64_t m_width = last_dim(mt);
    bool m_scalar_row = m_width == 1;
    const Columns& m_cols = epilogue.cols[ops[1]];
    const Row m0 = brow(iteration(0), ops[1], mr);
    V* run_max = alloc_copy(m0, m_width, m_cols);
    V* new_max = alloc(m_width);
    // The two rescaling factors depend on the max column only: computed once per column, not per element (a
    // row max broadcast over a 64-wide output row would otherwise cost 128 exps per row and iteration).
    V* keep_f = alloc(m_width);
    V* add_f = alloc(m_width);
    // Where stores round, the running max is held in m's element type (the eager interpreter's accumulate()).
    if (detail::rounds_stores(d_)) {
      for (int32_t c : m_cols) {
        run_max[c] = detail::held_max(d_, m0[c], mt.dtype);
        add_f[c] = un(full, OpCode::exp, d_.binary(FieldSem::Sub, m0[c], run_max[c]), 0);
      }
      for (int32_t c : cols) acc[c] = bin(full, FieldSem::Mul, acc[c], add_f[m_scalar_row ? 0 : c]);
    }
    for (int64_t t = 1; t < loop; ++t) {
      Frame& it = iteration(t);
      Row m = brow(it, ops[1], mr);
      Row x = brow(it, ops[0], r);
      for (int32_t c : m_cols) {
        new_max[c] = detail::held_max(d_, d_.binary(FieldSem::Max, run_max[c], m[c]), mt.dtype);
        keep_f[c] = un(full, OpCode::exp, d_.binary(FieldSem::Sub, run_max[c], new_max[c]), 0);
        add_f[c] = un(full, OpCode::exp, d_.binary(FieldSem::Sub, m[c], new_max[c]), 0);
      }
      for (int32_t c : cols) {
        int64_t mc = m_scalar_row ? 0 : c;
        acc[c] = bin(full, FieldSem::Add, bin(full, FieldSem::Mul, acc[c], keep_f[mc]),
                     bin(full, FieldSem::Mul, x[c], add_f[mc]));
      }
      std::swap(run_max, new_max);
    }
    return acc;
  }

  // The eager interpreter's store() of a kernel-level row (a predefined op's or what a block op saved): its columns
  // `cols` rounded as the device stores a tensor of type `t`, in a fresh row (never in place: a computed row may be
  // an operand's, as a concat along another dim returns it). Block-level tiles stay in f32, as in the eager
  // interpreter, but for a matmul's operands.
  Row store(Row row, [[maybe_unused]] const TensorType& t, [[maybe_unused]] const Columns& cols) {
    if constexpr (requires { d_.rounds_stores(); }) {
      if (d_.rounds_stores()) {
        V* out = alloc(last_dim(t));
        for (int32_t c : cols) out[c] = d_.stored(row[c], t.dtype);
        return out;
      }
    }
    return row;
  }

  // store() of a matmul's B row, made once per row and column set: every row of A reads all of B's rows (a 16-row
  // A tile would otherwise round its 32 x 64 B tile 16 times, and keep 16 copies).
  Row stored_operand(Row row, const TensorType& t, const Columns& cols) {
    auto [it, fresh] = stored_operands_.try_emplace(StoredKey{row, &cols, t.dtype});
    if (fresh) it->second = store(row, t, cols);
    return it->second;
  }

  V bin(bool full, FieldSem f, const V& a, const V& b) const { return full ? d_.binary(f, a, b) : d_.binary_p(f, a, b); }
  V un(bool full, OpCode op, const V& x, double s) const { return full ? d_.unary(op, x, s) : d_.unary_p(op, x, s); }

  // Row `r` of a non-structural op's result, columns `cols`. fetch(k, row) is row `row` of operand k, and
  // fetch(k, r0, count, out) its rows r0 .. r0 + count - 1 (consecutive along the second-to-last dim). `full` as in
  // accumulate().
  template <class Fetch>
  Row compute(const Graph& gr, const Node& n, const TensorType& out, int64_t r, bool full, const Columns& cols,
              Fetch&& fetch) {
    const ir::OpInfo& info = ir::op_info(n.op);
    const Attrs& a = n.attrs;
    auto ops = gr.operands(n);
    auto type = [&](int k) -> const TensorType& { return gr.type(ops[static_cast<size_t>(k)]); };
    const int last = out.rank - 1;
    const int64_t width = last_dim(out);
    Index idx = row_index(out, r);
    // Rows of operand k along `dim` (< last) at coordinates 0..n-1, with the rest of `idx` fixed.
    auto along = [&](int k, int dim, int64_t c) -> Row {
      Index i = idx;
      i[static_cast<size_t>(dim)] = c;
      return fetch(k, row_of(type(k), i));
    };
    switch (info.kind) {
      case OpKind::Unary: {
        Row x = fetch(0, r);
        V* row = alloc(width);
        for (int32_t c : cols) row[c] = un(full, n.op, x[c], a.s);
        return row;
      }
      case OpKind::Binary: {
        Row x = fetch(0, broadcast_row(type(0), idx, out.rank));
        Row y = fetch(1, broadcast_row(type(1), idx, out.rank));
        bool xs = last_dim(type(0)) == 1 && width > 1, ys = last_dim(type(1)) == 1 && width > 1;
        V* row = alloc(width);
        for (int32_t c : cols) row[c] = bin(full, info.field, x[xs ? 0 : c], y[ys ? 0 : c]);
        return row;
      }
      case OpKind::Matmul: {
        const TensorType &ta = type(0), &tb = type(1);
        int64_t k = ta.dim(ta.rank - 1);
        // A's row: its batch dims broadcast from ours, then m = our second-to-last coordinate.
        Index ai{}, bi{};
        for (int p = 0; p < ta.rank - 2; ++p)
          ai[static_cast<size_t>(p)] = ta.dim(p) == 1 ? 0 : idx[static_cast<size_t>(out.rank - ta.rank + p)];
        ai[static_cast<size_t>(ta.rank - 2)] = idx[static_cast<size_t>(out.rank - 2)];
        for (int p = 0; p < tb.rank - 2; ++p)
          bi[static_cast<size_t>(p)] = tb.dim(p) == 1 ? 0 : idx[static_cast<size_t>(out.rank - tb.rank + p)];
        Row arow = fetch(0, row_of(ta, ai));
        // The rows of B (consecutive rows of its tensor) in a list of its own: fetching one may evaluate another
        // matmul.
        Row* b_rows = alloc<Row>(k);
        fetch(1, row_of(tb, bi), k, b_rows);
        if constexpr (requires { d_.rounds_stores(); }) {
          // Device precision: the operands in their element types, as a matrix instruction takes them (the eager
          // interpreter's rule): A's row whole, B's rows at the columns asked for.
          // A normalized operand whose norm the lowering applies to the product (ir::norm_scaled_after) stays f32.
          if (d_.rounds_stores()) {
            const uint8_t unrounded = unrounded_operands(gr, n);
            if (!(unrounded & 1u)) {
              V* rounded = alloc(k);
              for (int64_t kk = 0; kk < k; ++kk) rounded[kk] = d_.stored(arow[kk], ta.dtype);
              arow = rounded;
            }
            if (!(unrounded & 2u))
              for (int64_t kk = 0; kk < k; ++kk) b_rows[kk] = stored_operand(b_rows[kk], tb, cols);
          }
        }
        V* row = alloc(width);
        auto n_cols = static_cast<int64_t>(cols.size());
        const int32_t* some = n_cols == width ? nullptr : cols.data();  // all columns: the dense loops
        if (full)
          d_.dot_rows(row, arow, b_rows, k, n_cols, some);
        else
          d_.dot_rows_p(row, arow, b_rows, k, n_cols, some);
        return row;
      }
      case OpKind::Reduce: {
        int64_t groups = type(0).dim(a.dim) / a.to;
        V* row = alloc(width);
        if (a.dim == last) {
          Row x = fetch(0, r);
          for (int32_t j : cols) {
            V acc = x[j];
            for (int64_t g = 1; g < groups; ++g) acc = bin(full, info.field, acc, x[j + g * a.to]);
            row[j] = acc;
          }
          return row;
        }
        int64_t j = idx[static_cast<size_t>(a.dim)];
        Row first = along(0, a.dim, j);
        for (int32_t c : cols) row[c] = first[c];
        for (int64_t g = 1; g < groups; ++g) {
          Row x = along(0, a.dim, j + g * a.to);
          for (int32_t c : cols) row[c] = bin(full, info.field, row[c], x[c]);
        }
        return row;
      }
      case OpKind::Norm:
      case OpKind::Softmax:
        return normalize(info.kind, a, out, r, full, cols, fetch, along);
      case OpKind::Concat: {
        int64_t n0 = type(0).dim(a.dim);
        if (a.dim == last) {
          V* row = alloc(width);
          Row x = nullptr, y = nullptr;  // an operand none of `cols` comes from is not made
          for (int32_t c : cols) {
            if (c < n0) {
              if (!x) x = fetch(0, r);
              row[c] = x[c];
            } else {
              if (!y) y = fetch(1, r);
              row[c] = y[c - n0];
            }
          }
          return row;
        }
        int64_t c = idx[static_cast<size_t>(a.dim)];
        if (c < n0) return along(0, a.dim, c);
        Index i = idx;
        i[static_cast<size_t>(a.dim)] = c - n0;
        return fetch(1, row_of(type(1), i));
      }
      case OpKind::Transpose: {
        // Row (.., i) of the result is column i of the operand: element c comes from the operand's row (.., c).
        const int64_t i = idx[static_cast<size_t>(last - 1)];
        V* row = alloc(width);
        for (int32_t c : cols) row[c] = along(0, last - 1, c)[i];
        return row;
      }
      default:
        break;
    }
    MG_CHECK(false, "lazy compute() on structural op " + std::string(info.name));
    return {};
  }

  // rms_norm and softmax over `dim`, in the eager interpreter's order: statistics folded from coordinate 0 up.
  // `full` as in accumulate(); columns `cols`.
  template <class Fetch, class Along>
  Row normalize(OpKind kind, const Attrs& a, const TensorType& out, int64_t r, bool full, const Columns& cols,
                Fetch& fetch, Along& along) {
    const int last = out.rank - 1;
    const int64_t width = last_dim(out);
    int64_t n_dim = out.dim(a.dim);
    // Element c of the normalized dim for column j of this row.
    std::vector<Row> src;
    if (a.dim != last)
      for (int64_t c = 0; c < n_dim; ++c) src.push_back(along(0, a.dim, c));
    Row x = fetch(0, r);
    auto at = [&](int64_t c, int64_t j) -> const V& { return a.dim == last ? x[c] : src[static_cast<size_t>(c)][j]; };
    auto stat_column = [&](int64_t j) -> int64_t { return a.dim == last ? 0 : j; };
    // The columns with statistics of their own: one for the whole row along the last dim, else those asked for.
    const Columns one{0};
    const Columns& stat_cols = a.dim == last ? one : cols;
    V* row = alloc(width);
    // Along another dim, the n_dim rows that differ only in that coordinate share their statistics: made once per
    // group (keyed by the operand rows themselves, which are memoized, so equal keys mean equal inputs), not once per
    // row (a K norm over its 64 head dims: 64 times the work otherwise).
    Stats stats;  // factor (norm), or max and sum (softmax), per statistics column
    bool made = false;
    if (a.dim != last) {
      auto [it, fresh] = stats_.try_emplace(StatsKey{src, &cols, kind, a.eps, full});
      if (fresh)
        it->second = {alloc(width), kind == OpKind::Norm ? nullptr : alloc(width)};
      else
        made = true;
      stats = it->second;
    } else {
      stats = {alloc(1), kind == OpKind::Norm ? nullptr : alloc(1)};
    }
    const Columns none;
    const Columns& to_make = made ? none : stat_cols;  // the statistics columns still to compute
    if (kind == OpKind::Norm) {
      V* factor = stats.a;
      for (int32_t j : to_make) {
        V ss = d_.unary(OpCode::square, at(0, j), 0);
        for (int64_t c = 1; c < n_dim; ++c) ss = d_.binary(FieldSem::Add, ss, d_.unary(OpCode::square, at(c, j), 0));
        factor[j] = d_.unary(
            OpCode::rsqrt,
            d_.unary(OpCode::add_scalar, d_.unary(OpCode::mul_scalar, ss, 1.0 / static_cast<double>(n_dim)), a.eps),
            0);
      }
      for (int32_t j : cols) row[j] = d_.binary(FieldSem::Mul, x[j], factor[stat_column(j)]);
      return row;
    }
    // Softmax. The max and the differences keep both parts (exp reads the Z_q part); without `full` the exps skip
    // the oracle that makes theirs, and the sum and quotient follow in the *_p forms.
    V *mx = stats.a, *sum = stats.b;
    V* e = a.dim == last ? alloc(width) : nullptr;  // along the last dim the sum's terms are this row's numerators
    for (int32_t j : to_make) {
      V m = at(0, j);
      for (int64_t c = 1; c < n_dim; ++c) m = d_.binary(FieldSem::Max, m, at(c, j));
      V s = exp_minus(full, at(0, j), m);
      if (e) e[0] = s;
      for (int64_t c = 1; c < n_dim; ++c) {
        V t = exp_minus(full, at(c, j), m);
        if (e) e[c] = t;
        s = bin(full, FieldSem::Add, s, t);
      }
      mx[j] = m;
      sum[j] = s;
    }
    for (int32_t j : cols) {
      int64_t sj = stat_column(j);
      row[j] = bin(full, FieldSem::Div, e ? e[j] : exp_minus(full, x[j], mx[sj]), sum[sj]);
    }
    return row;
  }

  // exp(y - m), as softmax evaluates it.
  V exp_minus(bool full, const V& y, const V& m) const {
    return un(full, OpCode::exp, d_.binary(FieldSem::Sub, y, m), 0);
  }

  // normalize()'s statistics of a row (along the last dim) or of one group of rows (along another): the rms_norm
  // factor (a), or the softmax max (a) and sum (b), per statistics column.
  struct Stats {
    V* a = nullptr;
    V* b = nullptr;
  };
  struct StatsKey {
    std::vector<Row> src;   // the operand's rows of the group, in order
    const Columns* cols;    // the columns made
    OpKind kind;
    double eps;
    bool full;
    bool operator==(const StatsKey&) const = default;
  };
  struct StatsHash {
    size_t operator()(const StatsKey& k) const {
      uint64_t h = ir::hash_mix(reinterpret_cast<uintptr_t>(k.cols), static_cast<uint64_t>(k.kind) * 2 + k.full);
      for (Row r : k.src) h = ir::hash_mix(h, reinterpret_cast<uintptr_t>(r));
      return static_cast<size_t>(h);
    }
  };

  struct StoredKey {
    Row row;
    const Columns* cols;
    ir::DType dtype;
    bool operator==(const StoredKey&) const = default;
  };
  struct StoredHash {
    size_t operator()(const StoredKey& k) const {
      return static_cast<size_t>(ir::hash_mix(ir::hash_mix(reinterpret_cast<uintptr_t>(k.row),
                                                           reinterpret_cast<uintptr_t>(k.cols)),
                                              static_cast<uint64_t>(k.dtype)));
    }
  };

  D& d_;
  const Graph& g_;
  std::unordered_map<StoredKey, Row, StoredHash> stored_operands_;  // stored_operand()'s
  InputFn inputs_;
  std::unordered_map<StatsKey, Stats, StatsHash> stats_;
  std::vector<Row*> rows_;  // per kernel-level tensor: its memo table
  std::vector<std::vector<ir::NodeId>> saves_;
  std::unordered_map<uint64_t, Frame> frames_;
  std::unordered_set<uint64_t> evaluated_;  // frame_key(node, block, -1) of every block whose output was read
  uint64_t next_key_ = 0;  // of the next frame
  // The matmul operands of node n of graph gr that device precision keeps unrounded (ir::matmul_operands_scaled_after;
  // none at kernel level, where operands are stored tensors).
  uint8_t unrounded_operands(const Graph& gr, const Node& n) const {
    std::span<const Graph> bodies = g_.bodies();
    if (&gr < bodies.data() || &gr >= bodies.data() + bodies.size()) return 0;
    return unrounded_[static_cast<size_t>(&gr - bodies.data())][static_cast<size_t>(&n - gr.nodes().data())];
  }

  std::vector<std::vector<uint8_t>> unrounded_;    // per body, per node: matmul_operands_scaled_after
  std::vector<std::vector<int64_t>> row_offsets_;  // per body, per body tensor
  std::vector<std::vector<uint8_t>> depends_;      // per body, per body tensor: frame_dependence()
  std::vector<int64_t> body_rows_;                 // per body
  RowMemo<V> memo_;                                // block-level rows
  ExponentUse use_;
  ColumnUse cols_;
  Arena own_arena_;
  Arena& arena_;
};

}  // namespace morgana::verify
