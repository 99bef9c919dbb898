// What each kernel of a μGraph does: launch shape, bytes per memory level, FLOPs per unit, barriers. The
// rules (and why they are what they are) are in docs/cost-model.md; this file only applies them.
#include "search/kernel_work.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <string>

#include "ir/block_rules.h"

namespace morgana::search::detail {

namespace {

using ir::DType;
using ir::Graph;
using ir::kPhi;
using ir::Node;
using ir::OpKind;
using ir::TensorType;

// The plain tilings targets/lower/tile_kernel_ops.cpp gives predefined ops (kept in step with it by hand; the
// search may not include lowering code): matmul tiles of 64 x 64 with K steps of 32, elementwise tiles of
// eight elements per thread, reductions one row per block.
constexpr int64_t kMatmulTile[3] = {64, 64, 32};
constexpr int64_t kElemsPerThread = 8;
// Registers a thread needs besides the accumulators it holds (addresses, loop counters, operand fragments):
// a typical floor for compiled tile code, not a hardware number. See docs/cost-model.md, "Occupancy".
constexpr int64_t kBaseRegsPerThread = 32;
// Block tiles other than loaded ones are planned in f32 (the lowering computes in f32).
constexpr ir::DType kComputeType = ir::DType::f32;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t pad_to(int64_t x, int64_t q) {
  return q > 0 ? ceil_div(x, q) * q : x;
}
double bytes_of(const TensorType& t) {
  return static_cast<double>(t.numel()) * ir::dtype_bytes(t.dtype);
}

// The bytes a block's tile of `whole` costs in DRAM and L2 traffic (docs/cost-model.md, "Sector rule"). Its rows are
// runs along the operand's last dim. Whole rows are one contiguous run and cost their bytes. A slice of each row
// moves in whole sectors, and short runs lose more: measured on the H200, runs of one, two and four 32-byte sectors
// ran at 0.73, 0.94 and 1.0 of the whole-row bandwidth, which 1 - (1 - e1) / k^2 fits for k sectors, e1 from the
// target. Neighbouring blocks may use the rest of a sector through L2; the measurement says they mostly do not.
// `adjacent`: how many of a block's iterations whose runs continue one another along the row are in flight together
// (a pipelined loop walking the last dim): the DRAM then sees their runs as one (attention_decode's split-KV flash
// kernel on the H100, K in runs of 64 bytes, two or more iterations in flight: 56.5 us, at the rate of whole rows).
double moved_bytes(const TensorType& tile, const TensorType& whole, const targets::Target& t, int64_t adjacent = 1) {
  const int64_t width = tile.dim(tile.rank - 1);
  if (width >= whole.dim(whole.rank - 1)) return bytes_of(tile);
  const double run = static_cast<double>(width) * ir::dtype_bytes(tile.dtype);
  const auto sector = static_cast<double>(t.memory.dram_sector_bytes);
  const double k = std::ceil(run / sector), seen = std::ceil(run * static_cast<double>(adjacent) / sector);
  const double efficiency = 1 - (1 - t.cost.dram_short_run_efficiency) / (seen * seen);
  return static_cast<double>(tile.numel() / width) * k * sector / efficiency;
}

// The bytes of whole lines of `line` bytes that a tile's rows touch: a row of R bytes at a multiple of R from a
// line-aligned start touches, on average over its offsets, more lines than R / line when R is not a multiple of
// the line (96-byte rows: one and a half lines each). Whole rows of the tensor are one contiguous run. `adjacent`
// iterations whose runs continue one another (moved_bytes) request their lines together: the run is theirs.
double line_bytes_of(const TensorType& tile, const TensorType& whole, double line, int64_t adjacent = 1) {
  const int64_t width = tile.dim(tile.rank - 1) * adjacent;
  const double bytes = bytes_of(tile);
  if (line <= 0) return bytes;
  if (width >= whole.dim(whole.rank - 1)) return std::ceil(bytes / line) * line;
  const auto run = static_cast<int64_t>(width * ir::dtype_bytes(tile.dtype));
  const auto l = static_cast<int64_t>(line);
  const int64_t period = l / std::gcd(run, l);  // offsets repeat every `period` rows
  int64_t lines = 0;
  for (int64_t o = 0; o < period; ++o) lines += ((o * run) % l + run + l - 1) / l;
  return static_cast<double>(tile.numel() * adjacent / width) * static_cast<double>(lines) /
         static_cast<double>(period) * line / static_cast<double>(adjacent);
}

// Whether a loop tile moves in whole asynchronous copies (targets::kAsyncCopyBytes): its rows and the tensor's are
// whole 16-byte vectors (the lowering's rule for pipelining a load).
bool whole_async_rows(const TensorType& tile, const TensorType& whole) {
  const int64_t es = ir::dtype_bytes(tile.dtype);
  return (tile.dim(tile.rank - 1) * es) % targets::kAsyncCopyBytes == 0 &&
         (whole.dim(whole.rank - 1) * es) % targets::kAsyncCopyBytes == 0;
}

// An iterator's tile and operand as the lowering loads them: a transposed view read only as matmuls' B is loaded as
// the memory holds it (its pass 3c), runs along the dim before the last; priced with both types' last two dims
// swapped back, and the for-loop's dim with them.
struct LoadedAs {
  TensorType tile, whole;
  int fmap = kPhi;
};
LoadedAs loaded_as(const Graph& body, const Node& iter, ir::TensorId tile) {
  LoadedAs as{body.type(tile), body.operand_types()[iter.attrs.index], iter.attrs.fmap};
  const int r = as.whole.rank;
  if (!ir::transposed_layout(as.whole.shape(), {as.whole.strides.data(), as.whole.rank}) ||
      !ir::read_only_as_matmul_b(body, tile))
    return as;
  for (TensorType* t : {&as.tile, &as.whole}) {
    std::swap(t->dims[static_cast<size_t>(r - 1)], t->dims[static_cast<size_t>(r - 2)]);
    std::swap(t->strides[static_cast<size_t>(r - 1)], t->strides[static_cast<size_t>(r - 2)]);
  }
  if (as.fmap == r - 1 || as.fmap == r - 2) as.fmap = 2 * r - 3 - as.fmap;
  return as;
}

int64_t padded_n(const targets::MatrixInstr& mi, int64_t n) {
  if (n <= mi.n) return mi.n;
  return pad_to(n, mi.n_step > 0 ? mi.n_step : mi.n);  // a range instruction (wgmma) steps in n_step
}

int64_t regs_for(int64_t acc_elems, int64_t threads, const targets::Target& t) {
  int64_t r = kBaseRegsPerThread + ceil_div(acc_elems, std::max<int64_t>(threads, 1));
  return std::min(r, t.registers.max_regs_per_thread);
}

std::vector<TensorType> types_of(const Graph& g, std::span<const ir::TensorId> ids) {
  std::vector<TensorType> v;
  for (ir::TensorId id : ids) v.push_back(g.type(id));
  return v;
}

std::vector<TensorType> result_types(const Graph& g, const Node& n) {
  std::vector<TensorType> v;
  for (int i = 0; i < n.num_results; ++i) v.push_back(g.type(g.result(n, i)));
  return v;
}

std::string label_of(const Graph& g, const Node& n) {
  std::string s = std::string(ir::op_name(n.op)) + " ->";
  for (int i = 0; i < n.num_results; ++i) s += (i ? ", " : " ") + g.name(g.result(n, i));
  return s;
}

// `in_registers`: the statement works on rows a warp holds in registers, at the vector peak; anything else is a pass
// over shared memory at the target's vector_efficiency of it.
void add_flops(Work& w, const Flops& f, double times, bool in_registers, const targets::Target& t) {
  w.k.tensor_flops += f.tensor * times;
  w.tensor_s += f.tensor_s * times;
  w.k.vector_flops += f.vector * times;
  w.vector_s += f.vector * times / (in_registers ? t.peak.f32_vector * 1e12 : vector_rate(t));
}

}  // namespace

double tensor_rate(const targets::Target& t, DType dtype) {
  double peak = dtype == DType::f16 ? t.peak.f16_tensor : dtype == DType::bf16 ? t.peak.bf16_tensor : 0;
  return peak * 1e12 * t.cost.tensor_efficiency;
}

double vector_rate(const targets::Target& t) {
  return t.peak.f32_vector * 1e12 * t.cost.vector_efficiency;
}

// The matrix instruction the lowering computes a matmul of `dtype` operands on with per-lane fragments (the first
// warp- or wave-scope one of the target's [[matrix]] table with lane layouts that takes the type), or null.
const targets::MatrixInstr* fragment_instr(const targets::Target& t, ir::DType dtype) {
  for (const auto& mi : t.matrix)
    if ((mi.scope == "warp" || mi.scope == "wave") && mi.has_lane_layouts() &&
        std::find(mi.ab_types.begin(), mi.ab_types.end(), ir::dtype_name(dtype)) != mi.ab_types.end())
      return &mi;
  return nullptr;
}

Flops op_flops(ir::OpCode op, std::span<const TensorType> in, std::span<const TensorType> out,
               const targets::Target& t) {
  const double n_out = out.empty() ? 0 : static_cast<double>(out[0].numel());
  const double n_in = in.empty() ? 0 : static_cast<double>(in[0].numel());
  switch (ir::op_info(op).kind) {
    case OpKind::Matmul: {
      const TensorType &a = in[0], &c = out[0];
      int64_t m = c.rank >= 2 ? c.dim(c.rank - 2) : 1, n = c.dim(c.rank - 1), k = a.dim(a.rank - 1);
      double batch = static_cast<double>(c.numel()) / static_cast<double>(m * n);
      double useful = 2.0 * static_cast<double>(c.numel()) * static_cast<double>(k);
      Flops vec{0, 0, useful};
      double rate = tensor_rate(t, a.dtype);
      if (a.dtype != in[1].dtype || rate <= 0) return vec;
      // Padded work of the best fitting instruction: a 1-row decode matmul still occupies whole m-tiles.
      double best = std::numeric_limits<double>::infinity();
      for (const auto& mi : t.matrix) {
        if (std::find(mi.ab_types.begin(), mi.ab_types.end(), ir::dtype_name(a.dtype)) == mi.ab_types.end())
          continue;
        double padded = 2.0 * batch * static_cast<double>(pad_to(m, mi.m)) *
                        static_cast<double>(padded_n(mi, n)) * static_cast<double>(pad_to(k, mi.k));
        best = std::min(best, padded);
      }
      // Tensor cores only where they beat the vector units, so padding waste cannot make a matmul slower.
      if (best / rate < useful / vector_rate(t)) return {best, best / rate, 0};
      return vec;
    }
    case OpKind::Unary:
    case OpKind::Binary:
      return {0, 0, n_out};
    case OpKind::Reduce:
      return {0, 0, n_in};
    case OpKind::Norm:  // square, sum, scale; the per-row rsqrt is noise
      return {0, 0, 3 * n_in};
    case OpKind::Softmax:  // max, subtract, exp, sum, divide
      return {0, 0, 5 * n_in};
    case OpKind::Accum:  // acc_rescale_sum also rescales the running value: exp factor, multiply, add
      return {0, 0, (op == ir::OpCode::acc_rescale_sum ? 3 : 1) * n_out};
    default:
      return {};
  }
}

namespace {

// Whether the lowering folds unary node nd into a neighbouring statement (fuse_elementwise: the same rules on the
// block graph): into the statement that computes its operand, when nothing else reads that; else into its one
// reader, an elementwise op or reduction taking it as first operand.
enum class Folding { none, into_writer, into_reader };
Folding folding(const Graph& body, const Node& nd, OpKind kind,
                const std::vector<std::vector<const Node*>>& readers) {
  if (kind != OpKind::Unary) return Folding::none;
  auto folds = [](OpKind k) { return k == OpKind::Unary || k == OpKind::Binary || k == OpKind::Reduce; };
  const ir::TensorId src = body.operands(nd)[0], dst = body.result(nd);
  const Node& writer = body.node(body.tensor(src).producer);
  const OpKind wk = ir::op_info(writer.op).kind;
  if (readers[src].size() == 1 && (folds(wk) || wk == OpKind::Norm)) return Folding::into_writer;
  if (readers[dst].size() != 1) return Folding::none;
  const Node& reader = *readers[dst][0];
  const auto rops = body.operands(reader);
  const bool first_only = rops[0] == dst && (rops.size() < 2 || rops[1] != dst);
  return folds(ir::op_info(reader.op).kind) && first_only ? Folding::into_reader : Folding::none;
}

// The warp tasks of a matmul result `out` on an instruction of `m_atom` rows: one per block of m_atom rows of each
// batch (targets::matmul_tiling's tasks before the split along N).
int64_t row_block_tasks(const TensorType& out, int64_t m_atom) {
  const int64_t m = out.dim(out.rank - 2), n = out.dim(out.rank - 1);
  return out.numel() / (m * n) * ((m + m_atom - 1) / m_atom);
}

// Whether the lowering keeps a block op's result in registers, each warp holding whole rows of it (pass
// keep_rows_in_registers, restated in its essentials since search/ may not depend on lowering code): a matmul on
// tensor cores whose row blocks of the warp-scope instruction give every warp rows of its own, or an elementwise
// op, a last-dim reduction or an accumulator of such a tensor with the same rows; and a thread's share of the
// tensor at most a third of its registers (the lowering's limit for one tile).
bool held_in_rows(const Node& nd, OpKind kind, std::span<const ir::TensorId> ops, std::span<const TensorType> in,
                  const TensorType& out, const Flops& f, const std::vector<char>& in_rows, int64_t warps,
                  int64_t threads, const targets::Target& t) {
  if (warps < 1 || out.rank < 2) return false;
  if (out.numel() / threads > t.registers.max_regs_per_thread / 3) return false;
  auto rows_of = [](const TensorType& x) {
    return std::vector<int64_t>(x.dims.begin(), x.dims.begin() + x.rank - 1);
  };
  switch (kind) {
    case OpKind::Matmul: {
      if (f.tensor <= 0) return false;
      const targets::MatrixInstr* mi = fragment_instr(t, in[1].dtype);
      if (!mi) return false;
      const int64_t n = out.dim(out.rank - 1), tasks = row_block_tasks(out, mi->m);
      // The lowering's limit on one tile of a row chain (row_registers.cpp: a third of a thread's registers),
      // counted on the fragments as the warps hold them: whole rows of atoms padded to the instruction's m.
      const int64_t registers = (tasks + warps - 1) / warps * ((n + mi->n - 1) / mi->n) *
                                targets::MatrixInstr::lane_values(mi->c_rows, t.execution.warp_size);
      return tasks >= warps && registers <= t.registers.max_regs_per_thread / 3 && !in_rows[ops[1]];
    }
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Accum: {
      bool any = false;
      for (size_t i = 0; i < ops.size(); ++i)
        if (in_rows[ops[i]]) {
          if (rows_of(in[i]) != rows_of(out)) return false;
          any = true;
        }
      return any && (kind != OpKind::Accum || in_rows[ops[0]]);
    }
    case OpKind::Reduce:
      return in_rows[ops[0]] && nd.attrs.dim == in[0].rank - 1 && rows_of(in[0]) == rows_of(out);
    default:
      return false;
  }
}

// Whether rms_norm `norm`, whose matmul `matmul` scales its product instead (ir::norm_scaled_after), has its sums of
// squares taken from the A fragments the matmul is fed (the lowering's pass norms_from_fragments): it is the matmul's
// A, over a 16-bit tile, and the product is held in rows on the matrix instruction.
bool norm_from_fragments(const ir::Graph& body, const Node& norm, ir::NodeId matmul, const std::vector<char>& in_rows,
                         int64_t warps, int64_t threads, const targets::Target& t) {
  const Node& m = body.node(matmul);
  const auto ops = body.operands(m);
  if (ops[0] != body.result(norm) || ir::dtype_bytes(body.type(body.operands(norm)[0]).dtype) != 2) return false;
  const auto in = types_of(body, ops);
  const auto out = result_types(body, m);
  return held_in_rows(m, OpKind::Matmul, ops, in, out[0], op_flops(m.op, in, out, t), in_rows, warps, threads, t);
}

// How the block's warps share a matmul of operands `in` and result `out` on matrix instruction mi
// (targets::matmul_tiling, the lowering's rule).
targets::MatmulTiling tiling_of(const targets::MatrixInstr& mi, std::span<const TensorType> in, const TensorType& out,
                                int64_t warps, const targets::Target& t) {
  const int64_t m = out.dim(out.rank - 2), n = out.dim(out.rank - 1), k = in[0].dim(in[0].rank - 1);
  return targets::matmul_tiling(t, mi, out.numel() / (m * n), m, n, k, warps);
}

// The matrix instruction of a matmul on one that accumulates across the loop (its one reader an acc_sum), or null.
const targets::MatrixInstr* loop_matmul_instr(const Graph& body, const Node& nd, OpKind kind,
                                              std::span<const TensorType> in, const TensorType& out, const Flops& f,
                                              const std::vector<std::vector<const Node*>>& readers, int64_t loop,
                                              const targets::Target& t) {
  if (kind != OpKind::Matmul || f.tensor <= 0 || loop < 2 || out.rank < 2) return nullptr;
  const auto& users = readers[body.result(nd)];
  if (users.size() != 1 || users[0]->op != ir::OpCode::acc_sum) return nullptr;
  return fragment_instr(t, in[1].dtype);
}

// A matmul on a matrix instruction that accumulates across the loop (its one reader an acc_sum) keeps its
// accumulators in registers when they fit (targets::accumulators_fit, the lowering's rule: pass keep_matmuls_in_
// registers); else every iteration reads and writes its C fragments, padded to the instruction's shape, in a shared
// tile (mg::matmul_atom). Those elements, a pass of their own on top of the operands': measured on the H100,
// attention_decode's decode Q·K with 64 tasks per block (256 accumulator registers a thread) ran 10.4 M warp
// instructions against 3.5 M for the same work in 512 blocks of 16 tasks (ncu).
double shared_accumulator_elements(const Graph& body, const Node& nd, OpKind kind, std::span<const TensorType> in,
                                   const TensorType& out, const Flops& f,
                                   const std::vector<std::vector<const Node*>>& readers, int64_t loop, int64_t warps,
                                   const targets::Target& t) {
  const targets::MatrixInstr* mi = loop_matmul_instr(body, nd, kind, in, out, f, readers, loop, t);
  if (!mi || targets::accumulators_fit(t, tiling_of(*mi, in, out, warps, t))) return 0;
  const int64_t m = out.dim(out.rank - 2), n = out.dim(out.rank - 1);
  const int64_t batches = out.numel() / (m * n);
  return static_cast<double>(batches * pad_to(m, mi->m) * pad_to(n, mi->n));
}

// The barrier a matmul's K split adds where the lowering computes it in registers with warps sharing each task
// (pass keep_matmuls_in_registers: tasks that leave warps idle): its Publish meets the k_split parts in a small
// shared tile behind one barrier (pass publish_split_parts_at_once). The lowering adds them in turns instead, a
// barrier between turns, where that tile would cost a busy block; at (k_split - 1) x the result's f32 elements it
// is small beside the operand tiles, and the model does not restate that case.
int64_t split_k_barriers(OpKind kind, std::span<const TensorType> in, const TensorType& out, const Flops& f,
                         int64_t warps, const targets::Target& t) {
  if (kind != OpKind::Matmul || f.tensor <= 0 || out.rank < 2) return 0;
  const targets::MatrixInstr* mi = fragment_instr(t, in[1].dtype);
  if (!mi) return 0;
  const targets::MatmulTiling tiling = tiling_of(*mi, in, out, warps, t);
  return targets::accumulators_fit(t, tiling) && tiling.k_split > 1 ? 1 : 0;
}

// Whether the lowering keeps an elementwise op's or rms_norm's result in registers, each thread the runs of the
// last dim it computes (pass keep_elements_in_registers, restated in its essentials): every reader an elementwise
// op of the same shape, a reduction or rms_norm of whole rows whose runs a warp holds within one row, a save, or the
// accumulator of a loop of one (the same tile); and a thread's share within the registers' rule for one tile. Its
// statements then make no pass over shared memory and need no barrier of their own.
bool held_in_elements(const Graph& body, const Node& nd, OpKind kind, const TensorType& out,
                      const std::vector<std::vector<const Node*>>& readers, int64_t loop, int64_t threads,
                      const targets::Target& t) {
  if ((kind != OpKind::Unary && kind != OpKind::Binary && kind != OpKind::Norm) || nd.num_results != 1) return false;
  const int64_t last = out.dim(out.rank - 1), run = targets::element_run(out.numel(), last, threads);
  const int64_t regs = targets::element_registers(out.numel(), last, threads);
  if (!targets::register_tiles_fit(t, regs, regs) || threads % t.execution.warp_size != 0) return false;
  for (const Node* r : readers[body.result(nd)]) {
    const OpKind rk = ir::op_info(r->op).kind;
    const auto rout = result_types(body, *r);
    const bool whole_rows = r->attrs.dim == out.rank - 1 && std::max<int64_t>(r->attrs.to, 1) == 1 &&
                            last % (run * t.execution.warp_size) == 0;
    const bool ok = ((rk == OpKind::Unary || rk == OpKind::Binary) && std::ranges::equal(rout[0].shape(), out.shape())) ||
                    ((rk == OpKind::Reduce || rk == OpKind::Norm) && whole_rows) || rk == OpKind::Save ||
                    (rk == OpKind::Accum && loop == 1);
    if (!ok) return false;
  }
  return true;
}

// Whether the lowering keeps node nd's result in registers across the for-loop, so that neither it nor the
// accumulator reading it needs a barrier of its own: a matmul whose accumulators fit (pass keep_matmuls_in_
// registers), or a reduction whose one reader is an accumulator of the same fold, with each thread's parts fitting
// the same register budget (pass fold_across_loop; a warp folds each group of a warp's worth or more).
bool kept_across_loop(const Graph& body, const Node& nd, OpKind kind, std::span<const TensorType> in, const TensorType& out,
                      const Flops& f, const std::vector<std::vector<const Node*>>& readers, int64_t loop, int64_t warps,
                      int64_t threads, const targets::Target& t) {
  if (kind == OpKind::Matmul) {
    const targets::MatrixInstr* mi = loop_matmul_instr(body, nd, kind, in, out, f, readers, loop, t);
    return mi && targets::accumulators_fit(t, tiling_of(*mi, in, out, warps, t));
  }
  if (kind != OpKind::Reduce || loop < 2) return false;
  const auto& users = readers[body.result(nd)];
  const ir::OpCode same = nd.op == ir::OpCode::reduce_sum   ? ir::OpCode::acc_sum
                          : nd.op == ir::OpCode::reduce_max ? ir::OpCode::acc_max
                                                            : ir::OpCode::input;
  if (users.size() != 1 || users[0]->op != same) return false;
  const int64_t to = std::max<int64_t>(nd.attrs.to, 1);
  const int64_t group = in[0].dim(static_cast<int>(nd.attrs.dim)) / to;
  const int64_t owners = group >= t.execution.warp_size ? warps : threads;
  return owners > 0 && targets::accumulator_registers_fit(t, (out.numel() + owners - 1) / owners);
}

// Whether the lowering holds a loop's loaded tiles and its accumulators in the registers of the threads that compute
// on them (pass keep_elements_in_registers, restated in its essentials): a split-KV or split-K combine, a body of
// loads, accumulators, elementwise ops and saves whose statements read tiles of their result's shape or of one
// element (which every thread holds); every loop tile's iterations fit registers (targets::loop_loads_fit_registers),
// none is moved by the copy engine (which takes the pipelined loads, of whole 16-byte rows, of the program's own
// inputs where the target has one), and the tiles fit the registers' rule together. Such a loop loads all its
// iterations' tiles at once and folds them with no shared memory and no barrier (H100, ncu: a one-row combine costs
// ~0.06 us an iteration, bench/notes-fast-kernels-2.md, session 20).
bool folds_in_elements(const Graph& g, const Node& n, const Graph& body, int64_t threads, const targets::Target& t) {
  const ir::BlockParams& p = body.block_params();
  if (p.loop < 2 || threads % t.execution.warp_size != 0) return false;
  const auto outer = g.operands(n);
  int64_t live = 0, largest = 0;
  bool loads = false;
  for (const Node& nd : body.nodes()) {
    const OpKind kind = ir::op_info(nd.op).kind;
    if (kind == OpKind::Save) continue;
    if (kind != OpKind::Iter && kind != OpKind::Accum && kind != OpKind::Unary && kind != OpKind::Binary) return false;
    const TensorType& out = body.type(body.result(nd));
    const int64_t regs = targets::element_registers(out.numel(), out.dim(out.rank - 1), threads);
    live += regs;
    largest = std::max(largest, regs);
    if (kind == OpKind::Iter) {
      if (nd.attrs.fmap == kPhi) continue;
      const ir::TensorId source = outer[nd.attrs.index];
      if (t.async.tma && g.node(g.tensor(source).producer).op == ir::OpCode::input &&
          whole_async_rows(out, body.operand_types()[nd.attrs.index]))
        return false;
      if (!targets::loop_loads_fit_registers(t, p.loop, regs, ir::dtype_bytes(out.dtype))) return false;
      loads = true;
      continue;
    }
    for (ir::TensorId o : body.operands(nd)) {
      const TensorType& x = body.type(o);
      if (x.numel() != 1 && !std::ranges::equal(x.shape(), out.shape())) return false;
    }
  }
  return loads && targets::register_tiles_fit(t, live, largest);
}

// Registers a thread holds of the tiles kept in rows at the busiest statement of the block graph (the lowering's
// liveness in keep_rows_in_registers, restated in its essentials): at each statement computing one, its result, every
// row tile written before and read after it, and the accumulators, which live across the loop. A thread holds
// ceil(elements / threads) of each.
int64_t row_register_peak(const Graph& body, const std::vector<char>& in_rows, int64_t threads) {
  const auto nodes = body.nodes();
  std::vector<int64_t> last_read(body.num_tensors(), -1);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ir::TensorId o : body.operands(nodes[i])) last_read[o] = static_cast<int64_t>(i);
  int64_t peak = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].num_results != 1 || !in_rows[body.result(nodes[i])]) continue;
    int64_t live = 0;
    for (size_t j = 0; j < nodes.size(); ++j) {
      if (nodes[j].num_results != 1) continue;
      const ir::TensorId x = body.result(nodes[j]);
      const bool carried = ir::op_info(nodes[j].op).kind == OpKind::Accum;
      if (in_rows[x] && (j == i || carried || (j < i && last_read[x] > static_cast<int64_t>(i))))
        live += (body.type(x).numel() + threads - 1) / threads;
    }
    peak = std::max(peak, live);
  }
  return peak;
}

Work block_work_rows(const Graph& g, const Node& n, const targets::Target& t, std::span<const ir::InputAlias> aliases,
                     bool rows_allowed);

}  // namespace

// A block graph whose row tiles would not fit the registers together at their busiest statement (what the
// lowering's liveness check finds, targets::register_tiles_fit) has them through shared memory: the lowering then
// drops tiles from registers until they fit (priced as if it dropped them all; H100: qknorm_b8 with two 16-row tasks
// a warp kept its score and probability tiles in shared memory and ran 135 us, where the model that held them in
// registers had it at 61 against 69 for the one-task form, which runs 34).
Work block_work(const Graph& g, const Node& n, const targets::Target& t, std::span<const ir::InputAlias> aliases) {
  Work w = block_work_rows(g, n, t, aliases, true);
  // Each row tile alone is within a third of the registers already (held_in_rows): only their sum is judged here.
  const int64_t peak = w.row_register_peak;
  if (peak > 0 && !targets::register_tiles_fit(t, peak, std::min(peak, t.registers.max_regs_per_thread / 3)))
    return block_work_rows(g, n, t, aliases, false);
  return w;
}

namespace {

Work block_work_rows(const Graph& g, const Node& n, const targets::Target& t, std::span<const ir::InputAlias> aliases,
                     bool rows_allowed) {
  // Priced as the lowering holds it: concats read only by products over their dim split into the pieces' products
  // (ir::with_contracted_concats_split), batch elements of one row each as the rows of one product
  // (ir::unit_row_fold).
  const std::optional<Graph> split = ir::with_contracted_concats_split(g.body(n));
  const Graph& built = split ? *split : g.body(n);
  const std::optional<ir::UnitRowFold> row_fold = ir::unit_row_fold(built);
  const Graph folded = row_fold ? ir::with_rows_folded(built, *row_fold) : Graph(ir::kBlockLevel);
  const Graph& body = row_fold ? folded : built;
  const ir::BlockParams& p = body.block_params();
  Work w;
  KernelCost& k = w.k;
  k.label = label_of(g, n);
  k.blocks = p.grid[0] * p.grid[1] * p.grid[2];
  k.loop = p.loop;
  k.threads = targets::block_threads(t, body);
  const double blocks = static_cast<double>(k.blocks);
  const double l2_share = static_cast<double>(t.memory.l2_bytes) / static_cast<double>(t.memory.l2_domains);
  // The tensors the block op's tiles replicate over grid dims share the L2 while their re-reads come: a re-read is
  // served by L2 only when all of them fit together (gated_mlp's W1 and W2, 32 MiB each, do not fit a 50 MiB L2
  // together, though each alone would).
  // An iterator reading the elements an earlier one reads (ir::equal_iters: the cache of multi-head latent attention
  // as Cᵀ and as C) shares its tile: it costs nothing of its own.
  const std::vector<int> same_as = ir::equal_iters(body, ir::operand_views(g, n, aliases));
  double replicated_bytes = 0;
  for (const Node& nd : body.nodes()) {
    if (ir::op_info(nd.op).kind != OpKind::Iter || same_as[static_cast<size_t>(&nd - body.nodes().data())] >= 0)
      continue;
    bool replicated = false;
    for (int gd = 0; gd < ir::kGridDims; ++gd)
      replicated = replicated || (nd.attrs.map[static_cast<size_t>(gd)] == kPhi && p.grid[static_cast<size_t>(gd)] > 1);
    if (replicated) replicated_bytes += bytes_of(body.operand_types()[nd.attrs.index]);
  }

  // after[t]: tensor t is produced after the for-loop (it depends on an accumulator), so it is computed once
  // per block; everything else runs every iteration (also what the lowering computes once before the loop: see
  // docs/cost-model.md, "FLOPs"). depth[t]: the barrier level t is written at (docs: "Barriers").
  std::vector<char> after(body.num_tensors(), 0);
  std::vector<int64_t> depth(body.num_tensors(), 0);
  int64_t loop_depth = 0, epilogue_depth = 0, acc_elems = 0, saves = 0;
  bool synchronous_loads = false;
  // The largest per-thread share of a tile computed at each barrier level of the loop body and of the epilogue.
  std::map<int64_t, double> loop_pass, epilogue_pass;
  // in_rows[t]: tensor t is computed in registers, each warp holding whole rows of it (the lowering's pass
  // keep_rows_in_registers, docs/lowering.md "Chains over rows in registers"), so no barrier precedes its readers.
  std::vector<char> in_rows(body.num_tensors(), 0);
  // row_blocks[t]: of a tensor in rows, the blocks of the matrix instruction's m rows each warp holds (a row
  // reduction shuffles each of them).
  std::vector<int64_t> row_blocks(body.num_tensors(), 1);
  // in_loop_regs[t]: tensor t stays in registers across the for-loop (kept_across_loop).
  std::vector<char> in_loop_regs(body.num_tensors(), 0);
  const int64_t warps = k.threads / t.execution.warp_size;
  // readers[t]: the nodes that read tensor t (the lowering folds a unary into a neighbour only when it or its
  // operand has one reader: fuse_elementwise).
  std::vector<std::vector<const Node*>> readers(body.num_tensors());
  for (const Node& nd : body.nodes())
    for (ir::TensorId o : body.operands(nd)) readers[o].push_back(&nd);
  double smem = 0;
  const std::vector<ir::BlockSection> sections = ir::block_sections(body);
  // A combine folding in registers: its loads fill no shared memory and need no barrier, its statements are each
  // thread's own; a fold step per iteration stays in the chain (a level, as a statement in registers gets).
  k.loads_in_registers = folds_in_elements(g, n, body, k.threads, t);
  for (const Node& nd : body.nodes()) {
    const auto ops = body.operands(nd);
    const OpKind kind = ir::op_info(nd.op).kind;
    // An rms_norm whose matmul scales its product instead (ir::norm_scaled_after) is its sum of squares alone: one
    // pass, no tile of its own; the product's scaling goes with the matmul.
    const std::optional<ir::NodeId> scaling_matmul =
        kind == OpKind::Norm ? ir::norm_scaled_after(body, sections, static_cast<ir::NodeId>(&nd - body.nodes().data()))
                             : std::nullopt;
    const bool scaled_after = scaling_matmul.has_value();
    // A norm of that matmul's A rows whose product is held in rows on the matrix instruction has its sums of
    // squares taken from the fragments the matmul is fed (the lowering's pass norms_from_fragments): no pass, no
    // level of its own.
    const bool from_fragments =
        scaled_after && rows_allowed && norm_from_fragments(body, nd, *scaling_matmul, in_rows, warps, k.threads, t);
    if (kind == OpKind::Save) {
      k.dram_write_bytes += bytes_of(g.type(g.result(n, static_cast<int>(saves++))));
      continue;
    }
    const ir::TensorId r = body.result(nd);
    if (const int same = same_as[static_cast<size_t>(&nd - body.nodes().data())]; same >= 0) {
      depth[r] = depth[body.result(body.node(static_cast<ir::NodeId>(same)))];
      continue;
    }
    if (kind == OpKind::Iter) {
      const LoadedAs as = loaded_as(body, nd, r);
      const TensorType& whole = as.whole;
      const TensorType& tile = as.tile;
      const double loads = static_cast<double>(nd.attrs.fmap != kPhi ? p.loop : 1);
      double per_block = bytes_of(tile) * loads;
      // A pipelined loop (whole 16-byte rows, two or more buffers) walking the tensor's last dim has at least two
      // iterations' adjacent runs in flight.
      const int64_t adjacent = as.fmap == whole.rank - 1 && p.loop > 1 && whole_async_rows(tile, whole) ? 2 : 1;
      double total = moved_bytes(tile, whole, t, adjacent) * loads * blocks;
      int64_t replicas = 1;
      for (int gd = 0; gd < ir::kGridDims; ++gd)
        if (nd.attrs.map[static_cast<size_t>(gd)] == kPhi) replicas *= p.grid[static_cast<size_t>(gd)];
      // A tile replicated over grid dims is read by every block along them. If the block op's replicated tensors
      // fit in (one domain of) L2 together, only the first pass per L2 domain comes from DRAM; otherwise every
      // re-read does.
      double dram = total;
      if (replicas > 1 && replicated_bytes <= l2_share)
        dram =
            std::min(total, bytes_of(whole) * static_cast<double>(std::min(replicas, t.memory.l2_domains)));
      k.dram_read_bytes += dram;
      k.l2_reread_bytes += total - dram;
      const double lines =
          line_bytes_of(tile, whole, static_cast<double>(t.memory.l2_line_bytes), adjacent) * loads * blocks;
      k.line_bytes += std::max(total, lines);
      k.partial_line_bytes += std::max(0.0, lines - bytes_of(tile) * loads * blocks);
      if (k.loads_in_registers) continue;  // straight into registers, no level of their own
      // A loop tile of a program input that the copy engine can write (the lowering's pass 6b, where the loop is
      // pipelined): its requests are the engine's, not the warps'.
      if (nd.attrs.fmap != kPhi && p.loop > 1 && whole_async_rows(tile, whole) &&
          g.node(g.tensor(g.operands(n)[nd.attrs.index]).producer).op == ir::OpCode::input) {
        bool swizzled = false;  // read through ldmatrix: a matmul's operand
        for (const Node* reader : readers[r]) swizzled = swizzled || ir::op_info(reader->op).kind == OpKind::Matmul;
        const int64_t last = tile.dim(tile.rank - 1);
        if (targets::engine_takes_rows(t, last * ir::dtype_bytes(tile.dtype), last,
                                       tile.rank >= 2 ? tile.dim(tile.rank - 2) : 1, swizzled)) {
          k.engine_bytes += total;
          k.engine_line_bytes += std::max(total, lines);
        }
      }
      k.smem_fill_bytes += per_block;
      smem += bytes_of(tile);
      if (nd.attrs.fmap != kPhi) {
        k.stage_bytes += static_cast<int64_t>(bytes_of(tile));
        k.stream_bytes += targets::stream_share(static_cast<int64_t>(bytes_of(tile)), replicas, k.blocks);
        // The lowering copies a tile asynchronously only in whole 16-byte vectors along rows of whole vectors; any
        // other loop-varying tile is loaded and waited for every iteration, and the loop is not pipelined.
        synchronous_loads = synchronous_loads || !whole_async_rows(tile, whole);
      }
      // A preloaded loop's tiles are published before it; its accumulators' chains through shared memory (each
      // iteration's reads wait on the last one's stores) still cost about a level each per iteration (H100, ncu:
      // split-KV combines without barriers, ~0.23 us per iteration of two accumulators): priced as before.
      depth[r] = 1;
      loop_depth = std::max<int64_t>(loop_depth, 1);
      continue;
    }
    bool epi = false;
    for (ir::TensorId o : ops) epi = epi || after[o];
    int64_t d = 0;
    // In the epilogue, levels count from the accumulators' final values (a loop-side operand is long
    // written).
    for (ir::TensorId o : ops) d = std::max(d, (epi && !after[o]) ? 0 : depth[o]);
    const auto in = types_of(body, ops);
    const auto out = result_types(body, nd);
    const Flops f = op_flops(nd.op, in, out, t);
    const bool rows = rows_allowed && nd.num_results == 1 &&
                      held_in_rows(nd, kind, ops, in, out[0], f, in_rows, warps, k.threads, t);
    int64_t blocks_per_warp = 1;
    if (rows && kind == OpKind::Matmul) {
      const int64_t tasks = row_block_tasks(out[0], fragment_instr(t, in[1].dtype)->m);
      blocks_per_warp = (tasks + warps - 1) / warps;
    } else if (rows) {
      for (ir::TensorId o : ops)
        if (in_rows[o]) blocks_per_warp = std::max(blocks_per_warp, row_blocks[o]);
    }
    // A warp reduces each of its row blocks in turn (H200, ncu: gqa_b8's flash kernel with 128 query rows per block,
    // two blocks of 16 per warp, ran 10% longer than with 64 rows and one, for the same products).
    if (rows && kind == OpKind::Reduce) k.row_reductions_per_block += (epi ? 1 : p.loop) * blocks_per_warp;
    // Kept in registers across the loop (a matmul's accumulators, a reduction's folds), or the accumulator of such a
    // result: no barrier level of its own; the reduction still reads its tile each iteration.
    const bool across = !epi && nd.num_results == 1 &&
                        kept_across_loop(body, nd, kind, in, out[0], f, readers, p.loop, warps, k.threads, t);
    const bool across_acc = !epi && kind == OpKind::Accum && !ops.empty() && in_loop_regs[ops[0]];
    const Folding fold = rows || across_acc ? Folding::none : folding(body, nd, kind, readers);
    const bool elements = !rows && !across && !across_acc && fold == Folding::none &&
                          (k.loads_in_registers ||
                           held_in_elements(body, nd, kind, out[0], readers, p.loop, k.threads, t));
    // A fold's arithmetic (with a unary folded into its reads) is a thread's own, at the registers' rate.
    bool feeds_fold = false;
    if (!epi && fold == Folding::into_reader) {
      const Node& reader = *readers[body.result(nd)][0];
      const auto rin = types_of(body, body.operands(reader));
      const auto rout = result_types(body, reader);
      feeds_fold = kept_across_loop(body, reader, ir::op_info(reader.op).kind, rin, rout[0],
                                    op_flops(reader.op, rin, rout, t), readers, p.loop, warps, k.threads, t);
    }
    add_flops(w, f, blocks * static_cast<double>(epi ? 1 : p.loop),
              rows || across || across_acc || feeds_fold || elements || from_fragments, t);
    if (!rows && !across && !across_acc && !elements && fold == Folding::none && !scaled_after)
      for (const auto& o : out) smem += static_cast<double>(o.numel() * ir::dtype_bytes(kComputeType));
    // A statement in registers works on its own rows (or elements): it needs no barrier level of its own; a unary
    // folded into a neighbour's pass neither. rms_norm is two passes (the sum of squares, then the scaling); held in
    // elements only its sum publishes through shared memory.
    const bool own_elements = elements && kind != OpKind::Norm;
    const int64_t level_of = from_fragments                                ? d
                             : rows || across || across_acc || own_elements ? std::max<int64_t>(d, 1)
                             : fold == Folding::into_writer                ? std::max<int64_t>(d, 1)
                             : fold == Folding::into_reader                ? d
                             : kind == OpKind::Norm                        ? d + (elements || scaled_after ? 1 : 2)
                                                             : d + 1 + split_k_barriers(kind, in, out[0], f, warps, t);
    int64_t& level = epi ? epilogue_depth : loop_depth;
    level = std::max(level, level_of);
    if (!rows && !across_acc && !elements && !from_fragments && fold == Folding::none) {
      double share = 0;
      for (const auto& x : in) share = std::max(share, static_cast<double>(x.numel()));
      share = std::max(share, static_cast<double>(out[0].numel())) / static_cast<double>(k.threads);
      // A matmul on a matrix instruction reads its operands a fragment row per lane access, not element by element.
      if (kind == OpKind::Matmul && f.tensor > 0)
        share /= static_cast<double>(targets::kFragmentLoadBytes / ir::dtype_bytes(in[1].dtype));
      share += shared_accumulator_elements(body, nd, kind, in, out[0], f, readers, p.loop, warps, t) /
               static_cast<double>(k.threads);
      auto& passes = epi ? epilogue_pass : loop_pass;
      passes[level_of] = std::max(passes[level_of], share);
      if (kind == OpKind::Norm && !scaled_after) passes[level_of - 1] = std::max(passes[level_of - 1], share);
    }
    for (int i = 0; i < nd.num_results; ++i) {
      ir::TensorId ri = body.result(nd, i);
      in_loop_regs[ri] = across;
      after[ri] = epi || kind == OpKind::Accum;
      depth[ri] = kind == OpKind::Accum ? 0 : level_of;
      in_rows[ri] = rows;
      row_blocks[ri] = blocks_per_warp;
    }
    if (kind == OpKind::Accum) acc_elems += out[0].numel();
  }
  k.smem_bytes = static_cast<int64_t>(smem);
  k.synchronous_loads = synchronous_loads;  // not pipelined, perhaps preloaded (time_kernel)
  w.row_register_peak = row_register_peak(body, in_rows, k.threads);
  k.regs_per_thread = regs_for(std::max(acc_elems, w.row_register_peak * k.threads), k.threads, t);
  k.barriers_per_block = p.loop * loop_depth + epilogue_depth;
  for (const auto& [level, share] : loop_pass) k.pass_elements_per_block += static_cast<double>(p.loop) * share;
  for (const auto& [level, share] : epilogue_pass) k.pass_elements_per_block += share;
  return w;
}

}  // namespace

Work predefined_work(const Graph& g, const Node& n, const targets::Target& t) {
  Work w;
  KernelCost& k = w.k;
  k.label = label_of(g, n);
  k.threads = ir::BlockParams{}.threads;  // the lowering's default block size
  const auto in = types_of(g, g.operands(n));
  const auto out = result_types(g, n);
  // A predefined op stands for a library-quality kernel: each operand comes from DRAM once and each result
  // goes back once; re-reads between its tiles are assumed absorbed on chip (docs: "Predefined ops").
  k.library = true;
  for (const auto& x : in) k.dram_read_bytes += bytes_of(x);
  for (const auto& y : out) k.dram_write_bytes += bytes_of(y);
  add_flops(w, op_flops(n.op, in, out, t), 1, false, t);
  const TensorType& a = in.empty() ? out[0] : in[0];
  const int64_t elem = ir::dtype_bytes(a.dtype);
  int64_t acc_elems = 0;
  switch (ir::op_info(n.op).kind) {
    case OpKind::Matmul: {
      const TensorType& c = out[0];
      int64_t m = c.rank >= 2 ? c.dim(c.rank - 2) : 1, nn = c.dim(c.rank - 1), kk = a.dim(a.rank - 1);
      int64_t tm = std::min(m, kMatmulTile[0]), tn = std::min(nn, kMatmulTile[1]),
              tk = std::min(kk, kMatmulTile[2]);
      int64_t batch = c.numel() / (m * nn);
      k.blocks = batch * ceil_div(m, tm) * ceil_div(nn, tn);
      k.loop = ceil_div(kk, tk);
      k.smem_bytes = (tm * tk + tk * tn) * elem +
                     2 * tm * tn * ir::dtype_bytes(kComputeType);  // tiles, product, accumulator
      k.smem_fill_bytes = static_cast<double>((tm + tn) * kk * elem);
      k.stage_bytes = (tm * tk + tk * tn) * elem;
      k.barriers_per_block = 2 * k.loop + 1;  // load level, multiply-accumulate level; the epilogue's store
      acc_elems = tm * tn;
      break;
    }
    case OpKind::Reduce:
    case OpKind::Norm:
    case OpKind::Softmax: {
      int dim = n.attrs.dim < 0 ? n.attrs.dim + a.rank : n.attrs.dim;
      int64_t extent = a.dim(dim);
      int64_t chunk = std::min(extent, k.threads * kElemsPerThread);
      k.blocks = a.numel() / extent;
      k.loop = ceil_div(extent, chunk);
      k.smem_bytes = chunk * (elem + ir::dtype_bytes(kComputeType));
      k.smem_fill_bytes = static_cast<double>(extent * elem);
      k.stage_bytes = chunk * elem;
      // Dependent stages per chunk: reduce = load, combine; rms_norm adds the scale; softmax max, exp-sum,
      // divide.
      const OpKind kind = ir::op_info(n.op).kind;
      int64_t stages = kind == OpKind::Reduce ? 2 : kind == OpKind::Norm ? 3 : 4;
      k.barriers_per_block = k.loop * stages;
      break;
    }
    default: {  // elementwise and concat: independent tiles
      int64_t tile = k.threads * kElemsPerThread;
      k.blocks = ceil_div(out[0].numel(), tile);
      int64_t in_elem_bytes = 0;
      for (const auto& x : in) in_elem_bytes += ir::dtype_bytes(x.dtype);
      k.smem_bytes = tile * (in_elem_bytes + ir::dtype_bytes(kComputeType));
      k.smem_fill_bytes = k.dram_read_bytes / static_cast<double>(k.blocks);
      k.barriers_per_block = 1;
      break;
    }
  }
  k.regs_per_thread = regs_for(acc_elems, k.threads, t);
  return w;
}

}  // namespace morgana::search::detail
