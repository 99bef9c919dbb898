#include "targets/lower/interpret.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace morgana::lower {

namespace {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Multi-index of row-major element `flat` of `s`.
Shape unflatten(int64_t flat, const Shape& s) {
  Shape idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

// Row-major offset in `of` of the element at `idx` of a shape `of` broadcasts to (dims aligned at the end;
// extent-1 dims of `of` read index 0).
int64_t broadcast_offset(const Shape& of, const Shape& idx) {
  int64_t off = 0;
  size_t shift = idx.size() - of.size();
  for (size_t d = 0; d < of.size(); ++d) off = off * of[d] + (of[d] == 1 ? 0 : idx[d + shift]);
  return off;
}

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// f32 arithmetic, with the op table's definition of each function.
float max_of(float a, float b) { return std::isnan(a) || a >= b ? a : b; }
float binary(ir::OpCode op, float a, float b) {
  switch (ir::op_info(op).field) {
    case ir::FieldSem::Add: return a + b;
    case ir::FieldSem::Sub: return a - b;
    case ir::FieldSem::Mul: return a * b;
    case ir::FieldSem::Div: return a / b;
    case ir::FieldSem::Max: return max_of(a, b);
    default: MG_CHECK(false, "not a binary op: " + std::string(ir::op_name(op)));
  }
  return 0;
}

// Memory is kept in 2-byte cells, so tiles and tensors of any element type can share space and a wrong overlap is
// visible: an f32 value is written to both of its cells and must read back equal from both.
struct Cells {
  std::vector<double> v;
};

// Per shared-memory cell: the statement instance that last wrote or read it, and in which barrier epoch; and how
// (a key of the accesses by which each thread touches only its own elements, kernel_ir's PrivateAccess; 0 for any
// other access, or for readers of different keys): accesses of one nonzero key never race.
struct CellState {
  int64_t write_inst = -1, write_epoch = -1, read_inst = -1, read_epoch = -1;
  int write_key = 0, read_key = 0;
};

class Machine {
 public:
  Machine(const LoweredProgram& p, const std::vector<std::vector<double>>& inputs) : p_(p) {
    for (const Param& q : p.params) {
      int64_t bytes = q.role == Role::workspace ? p.workspace_bytes : param_span(q) * ir::dtype_bytes(q.dtype);
      params_.push_back({std::vector<double>(static_cast<size_t>((bytes + 1) / 2), NAN)});
    }
    size_t in = 0;
    for (size_t i = 0; i < p.params.size(); ++i) {
      const Param& q = p.params[i];
      if (q.role != Role::input) continue;
      MG_CHECK(in < inputs.size(), "execute: too few inputs");
      const std::vector<double>& src = inputs[in++];
      MG_CHECK(static_cast<int64_t>(src.size()) == param_span(q), "execute: input '" + q.name + "' has the wrong size");
      for (size_t e = 0; e < src.size(); ++e)
        write(params_[i], static_cast<int64_t>(e) * ir::dtype_bytes(q.dtype), q.dtype, src[e]);
    }
    MG_CHECK(in == inputs.size(), "execute: too many inputs");
  }

  std::vector<std::vector<double>> run() {
    for (const Kernel& k : p_.kernels) kernel(k);
    std::vector<std::vector<double>> out;
    for (size_t i = 0; i < p_.params.size(); ++i) {
      const Param& q = p_.params[i];
      if (q.role != Role::output) continue;
      std::vector<double> o(static_cast<size_t>(param_span(q)));
      for (size_t e = 0; e < o.size(); ++e) o[e] = read(params_[i], static_cast<int64_t>(e) * ir::dtype_bytes(q.dtype), q.dtype);
      out.push_back(std::move(o));
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const Stmt& s, const std::string& what) const {
    throw InternalError("kernel " + k_->entry + ", block (" + std::to_string(b_[0]) + "," + std::to_string(b_[1]) +
                        "," + std::to_string(b_[2]) + "), iteration " + std::to_string(it_) + ", " +
                        std::string(stmt_name(s.kind)) + " for " + s.from.str() + " `" + s.from.text + "`: " + what);
  }

  static void write(Cells& c, int64_t byte, ir::DType t, double v) {
    auto i = static_cast<size_t>(byte / 2);
    MG_CHECK(byte >= 0 && i + (t == ir::DType::f32 ? 1 : 0) < c.v.size(), "execute: write outside a buffer");
    v = ir::round_to_dtype(v, t);
    c.v[i] = v;
    if (t == ir::DType::f32) c.v[i + 1] = v;
  }

  static double read(const Cells& c, int64_t byte, ir::DType t) {
    auto i = static_cast<size_t>(byte / 2);
    MG_CHECK(byte >= 0 && i + (t == ir::DType::f32 ? 1 : 0) < c.v.size(), "execute: read outside a buffer");
    return c.v[i];
  }

  void kernel(const Kernel& k) {
    k_ = &k;
    keys_.clear();
    for (b_[2] = 0; b_[2] < k.grid[2]; ++b_[2])
      for (b_[1] = 0; b_[1] < k.grid[1]; ++b_[1])
        for (b_[0] = 0; b_[0] < k.grid[0]; ++b_[0]) {
          smem_.v.assign(static_cast<size_t>((k.smem_bytes + 1) / 2), NAN);
          // Register tiles: one private array each, after one another (threads read back only what they wrote).
          register_base_.assign(k.tiles.size(), 0);
          int64_t register_bytes = 0;
          for (size_t t = 0; t < k.tiles.size(); ++t)
            if (k.tiles[t].space == Space::registers) {
              register_base_[t] = register_bytes;
              register_bytes += k.tiles[t].bytes();
            }
          registers_.v.assign(static_cast<size_t>(register_bytes / 2), NAN);
          state_.assign(smem_.v.size() + static_cast<size_t>((k.scratch_bytes + 1) / 2), CellState{});
          scratch_base_ = k.scratch_offset + ((b_[2] * k.grid[1] + b_[1]) * k.grid[0] + b_[0]) * k.scratch_bytes;
          it_ = 0;
          for (const Stmt& s : k.prologue) stmt(s);
          for (it_ = 0; it_ < k.loop; ++it_)
            for (const Stmt& s : k.body) stmt(s);
          it_ = k.loop - 1;
          for (const Stmt& s : k.epilogue) stmt(s);
        }
  }

  // A whole tile, read as a statement reads it: every cell is checked for a race and for damage.
  // Where a tile's bytes live: the block's shared memory, or its slice of the workspace's scratch region. Cell
  // states of both are kept in state_, shared memory first.
  struct Place {
    Cells* cells;
    int64_t base;        // byte of the tile's first element in `cells`
    int64_t state_base;  // cell index of that byte in state_
    int64_t limit;       // bytes of the space the block owns
    bool checked = true;  // races and damage are checked (not for registers)
  };
  // A tile of several buffers is in buffer (iteration % stages), the iteration being the one a Load ahead fills.
  Place place(const Tile& t) {
    const int64_t offset = t.offset + (iteration() % t.stages) * t.stage_bytes();
    if (t.space == Space::registers) {
      const int64_t base = register_base_[static_cast<size_t>(&t - k_->tiles.data())];
      return {&registers_, base, 0, base + t.bytes(), false};
    }
    if (t.space == Space::shared) return {&smem_, offset, offset / 2, k_->smem_bytes};
    for (size_t i = 0; i < p_.params.size(); ++i)
      if (p_.params[i].role == Role::workspace)
        return {&params_[i], scratch_base_ + offset, static_cast<int64_t>(smem_.v.size()) + offset / 2,
                k_->scratch_bytes};
    MG_CHECK(false, "a spilled tile but no workspace");
    return {};
  }

  // The key of statement s's access to `tile` (CellState).
  int access_key(const Stmt& s, int tile) {
    const std::optional<PrivateAccess> a = private_access(*k_, s, tile);
    if (!a) return 0;
    const auto at = std::find(keys_.begin(), keys_.end(), *a);
    if (at != keys_.end()) return static_cast<int>(at - keys_.begin()) + 1;
    keys_.push_back(*a);
    return static_cast<int>(keys_.size());
  }

  std::vector<float> get(int tile, const Stmt& s) {
    const Tile& t = k_->tiles[static_cast<size_t>(tile)];
    const int key = access_key(s, tile);
    const int64_t es = ir::dtype_bytes(t.dtype), n = t.numel();
    const Place at = place(t);
    if (t.offset + t.bytes() > at.limit) fail(s, "tile '" + t.name + "' lies outside the block's tile memory");
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      int64_t byte = at.base + e * es;
      for (int64_t c = at.state_base + e * es / 2; at.checked && c < at.state_base + (e + 1) * es / 2; ++c) {
        CellState& st = state_[static_cast<size_t>(c)];
        if (st.write_epoch < 0) fail(s, "reads tile '" + t.name + "' element " + std::to_string(e) + ", which nothing wrote");
        if (st.write_epoch == epoch_ && st.write_inst != inst_ && !(key && st.write_key == key))
          fail(s, "reads tile '" + t.name + "', written since the last barrier by another statement (missing barrier)");
        const bool others = st.read_epoch == epoch_ && st.read_inst != inst_;
        st.read_key = others && st.read_key != key ? 0 : key;
        st.read_inst = others ? -2 : inst_;
        st.read_epoch = epoch_;
      }
      double x = read(*at.cells, byte, t.dtype);
      if (t.dtype == ir::DType::f32 && !same(x, at.cells->v[static_cast<size_t>(byte / 2 + 1)]))
        fail(s, "tile '" + t.name + "' was overwritten by another tile (overlapping shared-memory plan)");
      v[static_cast<size_t>(e)] = static_cast<float>(x);
    }
    return v;
  }

  void put(int tile, const std::vector<float>& v, const Stmt& s) {
    const Tile& t = k_->tiles[static_cast<size_t>(tile)];
    const int key = access_key(s, tile);
    const int64_t es = ir::dtype_bytes(t.dtype);
    MG_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "execute: tile size mismatch");
    const Place at = place(t);
    if (t.offset + t.bytes() > at.limit) fail(s, "tile '" + t.name + "' lies outside the block's tile memory");
    for (size_t e = 0; e < v.size(); ++e) {
      auto ei = static_cast<int64_t>(e);
      int64_t byte = at.base + ei * es;
      for (int64_t c = at.state_base + ei * es / 2; at.checked && c < at.state_base + (ei + 1) * es / 2; ++c) {
        CellState& st = state_[static_cast<size_t>(c)];
        if (st.write_epoch == epoch_ && st.write_inst != inst_ && !(key && st.write_key == key))
          fail(s, "writes tile '" + t.name + "', written since the last barrier by another statement (missing barrier)");
        if (st.read_epoch == epoch_ && st.read_inst != inst_ && !(key && st.read_key == key))
          fail(s, "writes tile '" + t.name + "', read since the last barrier by another statement (missing barrier)");
        st.write_inst = inst_;
        st.write_epoch = epoch_;
        st.write_key = key;
      }
      write(*at.cells, byte, t.dtype, v[e]);
    }
  }

  const Shape& shape(int tile) const { return k_->tiles[static_cast<size_t>(tile)].shape; }

  // The byte of the element at `origin + idx` of a tensor, or -1 where a masked dim leaves the tensor.
  int64_t global_byte(const Stmt& s, const Shape& idx) {
    const GlobalTensor& g = p_.tensors[static_cast<size_t>(s.tensor)];
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      const Affine& a = s.origin[d];
      int64_t x = a.block[0] * b_[0] + a.block[1] * b_[1] + a.block[2] * b_[2] + a.loop * iteration() + idx[d];
      if (x >= g.shape[d]) {
        if (s.mask & (1u << d)) return -1;
        fail(s, "index " + std::to_string(x) + " of dim " + std::to_string(d) + " is outside tensor '" + g.name +
                    "' (extent " + std::to_string(g.shape[d]) + ") and the dim has no bounds check");
      }
      off += x * g.strides[d];
    }
    return g.offset + off * ir::dtype_bytes(g.dtype);
  }

  void stmt(const Stmt& s) {
    ++inst_;
    switch (s.kind) {
      case StmtKind::Barrier:
        ++epoch_;
        return;
      case StmtKind::AsyncWait:  // copies are synchronous here
        return;
      case StmtKind::Publish:  // the k_split parts were summed as one matmul here, a fold's parts as one fold
        put(s.dst, get(s.a, s), s);
        return;
      case StmtKind::Load: {
        if (s.iterations > 1) {  // a preload: the same load for each of its iterations
          Stmt one = s;
          one.iterations = 1;
          for (int64_t i = 0; i < s.iterations; ++i, ++one.ahead) stmt(one);
          return;
        }
        if (it_ + s.ahead >= k_->loop) return;  // no iteration to prefetch
        Ahead ahead(*this, s.ahead);
        const GlobalTensor& g = p_.tensors[static_cast<size_t>(s.tensor)];
        const Shape& ts = shape(s.dst);
        std::vector<float> v(static_cast<size_t>(numel(ts)));
        for (size_t e = 0; e < v.size(); ++e) {
          int64_t byte = global_byte(s, unflatten(static_cast<int64_t>(e), ts));
          v[e] = byte < 0 ? static_cast<float>(s.pad) : static_cast<float>(read(params_[static_cast<size_t>(g.param)], byte, g.dtype));
        }
        put(s.dst, v, s);
        return;
      }
      case StmtKind::Store: {
        const GlobalTensor& g = p_.tensors[static_cast<size_t>(s.tensor)];
        std::vector<float> v = get(s.a, s);
        const Shape& ts = shape(s.a);
        for (size_t e = 0; e < v.size(); ++e) {
          int64_t byte = global_byte(s, unflatten(static_cast<int64_t>(e), ts));
          if (byte >= 0) write(params_[static_cast<size_t>(g.param)], byte, g.dtype, v[e]);
        }
        return;
      }
      case StmtKind::Unary: {
        std::vector<float> a = operand_a(s);
        const ir::OpInfo& info = ir::op_info(s.op);
        for (float& x : a) x = apply_maps(s.post, static_cast<float>(info.unary(x, s.scalar)));
        put(s.dst, a, s);
        return;
      }
      case StmtKind::Binary: {
        std::vector<float> a = operand_a(s), b = get(s.b, s);
        const Shape& out = shape(s.dst);
        std::vector<float> r(static_cast<size_t>(numel(out)));
        for (size_t e = 0; e < r.size(); ++e) {
          Shape idx = unflatten(static_cast<int64_t>(e), out);
          r[e] = apply_maps(s.post, binary(s.op, a[static_cast<size_t>(broadcast_offset(shape(s.a), idx))],
                                           b[static_cast<size_t>(broadcast_offset(shape(s.b), idx))]));
        }
        put(s.dst, r, s);
        return;
      }
      case StmtKind::Matmul: matmul(s); return;
      case StmtKind::Reduce: reduce(s); return;
      case StmtKind::Concat: concat(s); return;
      case StmtKind::Accumulate: accumulate(s); return;
    }
  }

  void matmul(const Stmt& s) {
    std::vector<float> a = get(s.a, s), b = get(s.b, s);
    const Shape &out = shape(s.dst), &sa = shape(s.a), &sb = shape(s.b);
    const size_t r = out.size();
    const int64_t M = out[r - 2], N = out[r - 1], K = sa[sa.size() - 1];
    if (s.scale >= 0) {  // A's rows times a row vector (pass accumulate_rescaled_products)
      const std::vector<float> rows = get(s.scale, s);
      const Shape& rs = shape(s.scale);
      for (size_t e = 0; e < a.size(); ++e)
        a[e] *= rows[static_cast<size_t>(broadcast_offset(rs, unflatten(static_cast<int64_t>(e), sa)))];
    }
    std::vector<float> c(static_cast<size_t>(numel(out)));
    // Into a rescaled accumulator: every iteration (the rescale before it cleared it on the first).
    bool add = s.scale >= 0 || (s.accumulate && it_ > 0);
    std::vector<float> prev = add ? get(s.dst, s) : std::vector<float>{};
    Shape batch(out.begin(), out.end() - 2), ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    for (int64_t bi = 0; bi < numel(batch); ++bi) {
      Shape idx = unflatten(bi, batch);
      const float* A = a.data() + broadcast_offset(ba, idx) * M * K;
      const float* B = b.data() + broadcast_offset(bb, idx) * K * N;
      float* C = c.data() + bi * M * N;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          // B is [K, N], or held as Bᵀ, [N, K] (Stmt::trans_b).
          auto b_at = [&](int64_t k) { return s.trans_b ? B[j * K + k] : B[k * N + j]; };
          float acc = A[i * K] * b_at(0);
          for (int64_t k = 1; k < K; ++k) acc += A[i * K + k] * b_at(k);
          C[i * N + j] = acc;
        }
    }
    if (s.norm_rows) {  // each row times the rms-norm factor of A's row (norms_from_fragments)
      for (int64_t bi = 0; bi < numel(batch); ++bi) {
        const float* A = a.data() + broadcast_offset(ba, unflatten(bi, batch)) * M * K;
        float* C = c.data() + bi * M * N;
        for (int64_t i = 0; i < M; ++i) {
          float sum = 0;
          for (int64_t k = 0; k < K; ++k) sum += A[i * K + k] * A[i * K + k];
          const float factor = apply_maps(*s.norm_rows, sum);
          for (int64_t j = 0; j < N; ++j) C[i * N + j] *= factor;
        }
      }
    }
    if (add)
      for (size_t e = 0; e < c.size(); ++e) c[e] += prev[e];
    put(s.dst, c, s);
  }


  // Operand a of an elementwise statement or reduction, each element through the statement's pre maps.
  std::vector<float> operand_a(const Stmt& s) {
    std::vector<float> a = get(s.a, s);
    for (float& x : a) x = apply_maps(s.pre, x);
    return a;
  }

  void reduce(const Stmt& s) {
    std::vector<float> x = operand_a(s);
    const Shape& in = shape(s.a);
    int64_t outer = 1, inner = 1, n = in[static_cast<size_t>(s.dim)];
    for (int d = 0; d < s.dim; ++d) outer *= in[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(s.dim) + 1; d < in.size(); ++d) inner *= in[d];
    std::vector<float> r(static_cast<size_t>(outer * s.to * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < s.to; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          auto at = [&](int64_t k) { return x[static_cast<size_t>((o * n + j + k * s.to) * inner + i)]; };
          float acc = at(0);
          for (int64_t k = 1; k < n / s.to; ++k) acc = binary(s.op, acc, at(k));
          r[static_cast<size_t>((o * s.to + j) * inner + i)] = apply_maps(s.post, acc);
        }
    if (s.parts >= 0) {
      // A team reduction's warps leave their folds in `parts` and read them back behind its inner barrier: the
      // executor only touches those cells (their values are partial sums the tile library alone defines), so that
      // the race checks see the statement use them.
      put(s.parts, std::vector<float>(static_cast<size_t>(k_->tiles[static_cast<size_t>(s.parts)].numel())), s);
      get(s.parts, s);
    }
    if (s.accumulate && it_ > 0) {  // a fold tile: this iteration's results folded into the running ones
      std::vector<float> prev = get(s.dst, s);
      for (size_t e = 0; e < r.size(); ++e) r[e] = binary(s.op, prev[e], r[e]);
    }
    put(s.dst, r, s);
  }

  void concat(const Stmt& s) {
    std::vector<float> a = get(s.a, s), b = get(s.b, s);
    const Shape& out = shape(s.dst);
    int64_t outer = 1, inner = 1, n = out[static_cast<size_t>(s.dim)];
    int64_t n0 = shape(s.a)[static_cast<size_t>(s.dim)], n1 = shape(s.b)[static_cast<size_t>(s.dim)];
    for (int d = 0; d < s.dim; ++d) outer *= out[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(s.dim) + 1; d < out.size(); ++d) inner *= out[d];
    std::vector<float> r(static_cast<size_t>(numel(out)));
    for (int64_t i = 0; i < outer; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < inner; ++k)
          r[static_cast<size_t>((i * n + j) * inner + k)] =
              j < n0 ? a[static_cast<size_t>((i * n0 + j) * inner + k)] : b[static_cast<size_t>((i * n1 + j - n0) * inner + k)];
    put(s.dst, r, s);
  }

  void accumulate(const Stmt& s) {
    // Only the rescale (pass accumulate_rescaled_products): x is added by the matmul after it, its rows times the
    // factor this writes into s.scale.
    std::vector<float> x = s.scale >= 0 ? std::vector<float>(static_cast<size_t>(numel(shape(s.dst))))
                                        : get(s.a, s);
    if (s.op != ir::OpCode::acc_rescale_sum) {
      if (it_ > 0) {
        std::vector<float> acc = get(s.dst, s);
        ir::OpCode fold = s.op == ir::OpCode::acc_max ? ir::OpCode::reduce_max : ir::OpCode::add;
        for (size_t e = 0; e < x.size(); ++e) x[e] = binary(fold, acc[e], x[e]);
      }
      put(s.dst, x, s);
      return;
    }
    // acc_rescale_sum(x, m): M' = max(M, m); S' = S*exp(M - M') + x*exp(m - M'), m broadcast to x. The running
    // max M is one per row of m, or one per accumulator element (pass own_accumulator_state: the state tile has
    // the accumulator's shape); the values are the same.
    std::vector<float> m = get(s.b, s);
    const Shape &xs = shape(s.dst), &ms = shape(s.b);
    const bool per_element = shape(s.state) == xs;
    auto row_of = [&](size_t e) {
      return static_cast<size_t>(broadcast_offset(ms, unflatten(static_cast<int64_t>(e), xs)));
    };
    if (per_element) {
      std::vector<float> wide(x.size());
      for (size_t e = 0; e < wide.size(); ++e) wide[e] = m[row_of(e)];
      m = std::move(wide);
    }
    // The running max is held in m's element type (Stmt::held).
    auto held = [&](float v) { return static_cast<float>(ir::round_to_dtype(v, s.held)); };
    const bool first = it_ == 0;
    std::vector<float> acc = first ? std::vector<float>(x.size()) : get(s.dst, s);
    std::vector<float> run = first ? m : get(s.state, s);
    std::vector<float> next(run.size());
    for (size_t j = 0; j < run.size(); ++j) next[j] = held(first ? m[j] : max_of(run[j], m[j]));
    for (size_t e = 0; e < acc.size(); ++e) {
      const size_t j = per_element ? e : row_of(e);
      acc[e] = (first ? 0.0f : acc[e] * std::exp(run[j] - next[j])) + x[e] * std::exp(m[j] - next[j]);
    }
    put(s.dst, acc, s);
    put(s.state, next, s);
    if (s.scale >= 0) {
      std::vector<float> factor(next.size());
      for (size_t j = 0; j < next.size(); ++j) factor[j] = std::exp(m[j] - next[j]);
      put(s.scale, factor, s);
    }
  }

  const LoweredProgram& p_;
  std::vector<Cells> params_;
  const Kernel* k_ = nullptr;
  Cells smem_;
  std::vector<CellState> state_;
  Cells registers_;                    // the register tiles of the block
  std::vector<int64_t> register_base_;  // byte of each register tile in registers_
  std::array<int64_t, 3> b_{};
  int64_t it_ = 0;
  int64_t ahead_ = 0;  // while a Load of a later iteration runs: how many iterations later
  int64_t iteration() const { return it_ + ahead_; }
  // Sets ahead_ for the duration of one Load.
  struct Ahead {
    Ahead(Machine& e, int64_t n) : e_(e) { e_.ahead_ = n; }
    ~Ahead() { e_.ahead_ = 0; }
    Machine& e_;
  };
  int64_t scratch_base_ = 0;  // byte of this block's scratch slice in the workspace
  int64_t epoch_ = 0, inst_ = 0;
  std::vector<PrivateAccess> keys_;  // of the kernel being run (access_key)
};

}  // namespace

int64_t param_span(const Param& p) {
  int64_t last = 0;
  for (size_t d = 0; d < p.shape.size(); ++d) last += (p.shape[d] - 1) * p.strides[d];
  return last + 1;
}

std::vector<std::vector<double>> execute(const LoweredProgram& p, const std::vector<std::vector<double>>& inputs) {
  return Machine(p, inputs).run();
}

}  // namespace morgana::lower
