// Pass 5 of the lowering, the first decisions of the thread level (docs/lowering.md, "The thread level"): which
// hardware instruction implements a statement. Everything here is read from the target file and the kernel IR's
// compile-time facts (shapes, strides, origin coefficients); nothing names a GPU.
//   - Matmul: a matrix instruction of the target's [[matrix]] table, run by whole warps on tiles in shared memory,
//     when the back end implements it, the file gives its lane layouts, the operand types are among its types
//     (one operand may be f32, converted to the other's type in registers), and N and K are multiples of its
//     shape (M is free: rows past M are computed from a clamped row and never stored).
//   - Reduce: a whole warp folds each output (lanes stride the group, then a shuffle tree of the target's warp
//     size) when the group has at least a warp's worth of elements.
//   - Load and Store: the widest global access of 16, 8 or 4 bytes whose alignment is proven for every block and
//     iteration; loads of 16 bytes into shared memory go through cp.async where the target has it.
#include <algorithm>

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

// Kernel parameters and workspace regions start at multiples of this (docs/lowering.md, "The parameter contract").
constexpr int64_t kBaseAlign = 16;

bool is_16_bit(ir::DType t) { return t == ir::DType::f16 || t == ir::DType::bf16; }

}  // namespace

int64_t global_access_bytes(const Stmt& s, const GlobalTensor& g, const Tile& tile) {
  const int64_t es = ir::dtype_bytes(g.dtype);
  const size_t last = g.shape.size() - 1;
  if (g.strides[last] != 1) return 0;
  for (int64_t bytes : {int64_t{16}, int64_t{8}, int64_t{4}}) {
    if (bytes <= es || bytes > kBaseAlign) continue;
    const int64_t per = bytes / es;
    bool ok = tile.shape[last] % per == 0 && g.offset % bytes == 0;
    for (size_t d = 0; d < last; ++d) ok = ok && (g.strides[d] * es) % bytes == 0;
    const Affine& o = s.origin[last];
    for (int64_t c : o.block) ok = ok && (c * es) % bytes == 0;
    ok = ok && (o.loop * es) % bytes == 0;
    // A masked last dim: vectors must lie wholly inside or wholly outside the tensor.
    if (s.mask & (1u << last)) ok = ok && g.shape[last] % per == 0;
    if (ok) return bytes;
  }
  return 0;
}

namespace {

int choose_atom(const Stmt& s, const Kernel& k, const targets::Target& t, const std::vector<std::string>& ops) {
  const Tile& a = k.tiles[static_cast<size_t>(s.a)];
  const Tile& b = k.tiles[static_cast<size_t>(s.b)];
  const Tile& d = k.tiles[static_cast<size_t>(s.dst)];
  if (a.space != Space::shared || b.space != Space::shared || d.space != Space::shared) return -1;
  // The instruction's type is the 16-bit operand's; an f32 operand is converted to it in registers.
  const ir::DType type16 = is_16_bit(b.dtype) ? b.dtype : a.dtype;
  if (!is_16_bit(type16)) return -1;
  for (ir::DType x : {a.dtype, b.dtype})
    if (x != type16 && x != ir::DType::f32) return -1;
  if (k.block[0] % t.execution.warp_size != 0) return -1;
  const int64_t n = d.shape.back(), kk = a.shape.back();
  const std::string type(ir::dtype_name(type16));
  for (size_t i = 0; i < t.matrix.size(); ++i) {
    const targets::MatrixInstr& m = t.matrix[i];
    if (std::find(ops.begin(), ops.end(), m.op) == ops.end() || !m.has_lane_layouts()) continue;
    if (m.scope != "warp" && m.scope != "wave") continue;
    if (std::find(m.ab_types.begin(), m.ab_types.end(), type) == m.ab_types.end() || m.acc != "f32") continue;
    if (n % m.n != 0 || kk % m.k != 0) continue;
    return static_cast<int>(i);
  }
  return -1;
}

// Whether tile t is written only by statements `writer` accepts and read, at least once, as an operand of matmuls
// (running on a matrix instruction, with `on_instruction`), and otherwise only by statements `also_reads` accepts.
template <class Writer, class Reader>
bool only_matmul_operand(const Kernel& k, int t, bool on_instruction, Writer writer, Reader also_reads) {
  bool read = false;
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const Stmt& s : *list) {
      for (int w : stmt_writes(s))
        if (w == t && !writer(s)) return false;
      for (int r : stmt_reads(s)) {
        if (r != t) continue;
        if (s.kind == StmtKind::Matmul && r != s.dst && (!on_instruction || s.atom >= 0))
          read = true;
        else if (!also_reads(s))
          return false;
      }
    }
  return read;
}

bool elementwise(const Stmt& s) { return s.kind == StmtKind::Unary || s.kind == StmtKind::Binary; }

// Whether tile t can be swizzled: 16-bit in shared memory, rows of an even number of 16-byte chunks (an odd number
// puts 8 consecutive rows in 8 distinct bank groups already),
// written only by 16-byte loads and elementwise ops and read as a matrix instruction's operand (ldmatrix) and
// otherwise only by reductions (mg::Fold reads each element where the swizzle put it: the fused RMSNorm's sum of
// squares reads the tile its matmul takes as A, QK-norm's sums over K's columns the tile its matmul takes as B);
// rows per batch a multiple of the swizzle's period of 8 when the tile has batches (each batch is addressed from
// its own start).
bool swizzlable(const Kernel& k, int t) {
  const Tile& tile = k.tiles[static_cast<size_t>(t)];
  if (tile.space != Space::shared || !is_16_bit(tile.dtype) || tile.shape.size() < 2) return false;
  const int64_t chunks = tile.shape.back() * 2 / 16;
  if (tile.shape.back() * 2 % 16 != 0 || chunks % 2 != 0) return false;
  int64_t batches = 1;
  for (size_t d = 0; d + 2 < tile.shape.size(); ++d) batches *= tile.shape[d];
  if (batches > 1 && tile.shape[tile.shape.size() - 2] % 8 != 0) return false;
  return only_matmul_operand(
      k, t, true, [](const Stmt& s) { return (s.kind == StmtKind::Load && s.vector_bytes == 16) || elementwise(s); },
      [](const Stmt& s) { return s.kind == StmtKind::Reduce; });
}

// The 16-bit type a matmul's f32 operands would be rounded to: its other operand's, or else the one 16-bit type the
// kernel loads (f32 when there is none, or more than one).
ir::DType operand_type16(const Stmt& s, const Kernel& k) {
  for (int x : {s.a, s.b})
    if (is_16_bit(k.tiles[static_cast<size_t>(x)].dtype)) return k.tiles[static_cast<size_t>(x)].dtype;
  ir::DType found = ir::DType::f32;
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const Stmt& l : *list) {
      if (l.kind != StmtKind::Load || !is_16_bit(k.tiles[static_cast<size_t>(l.dst)].dtype)) continue;
      const ir::DType t = k.tiles[static_cast<size_t>(l.dst)].dtype;
      if (found != ir::DType::f32 && found != t) return ir::DType::f32;
      found = t;
    }
  return found;
}

// Whether f32 tile t is computed only by elementwise statements (whose tile routines store any type) and read only
// as a matmul operand: then storing it in the matrix instruction's 16-bit type rounds exactly as the fragment
// loads would, once per element instead of once per load.
bool only_feeds_matmuls(const Kernel& k, int t) {
  const Tile& tile = k.tiles[static_cast<size_t>(t)];
  if (tile.dtype != ir::DType::f32 || tile.space != Space::shared || tile.stages != 1) return false;
  return only_matmul_operand(k, t, false, elementwise, [](const Stmt&) { return false; });
}

// A matmul with f32 operands computed for it (Q·Kᵀ of normalized Q and K; P·V) gets them stored in the 16-bit type
// of the matrix instruction it can then run on (the "intermediates stored in the spec's dtype"): a matmul
// with two f32 operands would otherwise run on no instruction, and one f32 operand is otherwise converted at every
// fragment load. Only where an instruction is then chosen.
void narrow_matmul_operands(Kernel& k, const targets::Target& target, const std::vector<std::string>& matrix_ops) {
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const Stmt& s : *list) {
      if (s.kind != StmtKind::Matmul) continue;
      const ir::DType type16 = operand_type16(s, k);
      if (type16 == ir::DType::f32) continue;
      std::vector<int> narrowed;
      for (int x : {s.a, s.b})
        if (x != s.dst && only_feeds_matmuls(k, x) && !std::count(narrowed.begin(), narrowed.end(), x)) {
          k.tiles[static_cast<size_t>(x)].dtype = type16;
          narrowed.push_back(x);
        }
      if (!narrowed.empty() && choose_atom(s, k, target, matrix_ops) < 0)
        for (int x : narrowed) k.tiles[static_cast<size_t>(x)].dtype = ir::DType::f32;
    }
}

}  // namespace

void choose_instructions(Kernel& k, const LoweredProgram& p, const targets::Target& target,
                         const std::vector<std::string>& matrix_ops) {
  narrow_matmul_operands(k, target, matrix_ops);
  for (auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (Stmt& s : *list) {
      if (s.kind == StmtKind::Matmul) {
        s.atom = choose_atom(s, k, target, matrix_ops);
        if (s.atom >= 0) s.atoms_n = matmul_tiling(s, k, target).atoms_n;
      }
      if (s.kind == StmtKind::Reduce) {
        // A warp per output once every lane has an element to fold; shorter groups fold faster in one thread. Only
        // along the innermost dim: the lanes of a warp folding down a column would read one bank (rows of a power
        // of two of words), where threads folding neighbouring columns read neighbouring words.
        const Tile& x = k.tiles[static_cast<size_t>(s.a)];
        const int64_t groups = x.shape[static_cast<size_t>(s.dim)] / s.to;
        int64_t inner = 1;
        for (size_t d = static_cast<size_t>(s.dim) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
        s.by_warps = groups >= target.execution.warp_size && k.block[0] % target.execution.warp_size == 0 &&
                     inner == 1;
      }
      if (s.kind != StmtKind::Load && s.kind != StmtKind::Store) continue;
      const Tile& tile = k.tiles[static_cast<size_t>(s.kind == StmtKind::Load ? s.dst : s.a)];
      s.vector_bytes = global_access_bytes(s, p.tensors[static_cast<size_t>(s.tensor)], tile);
      s.async = s.kind == StmtKind::Load && s.vector_bytes == targets::kAsyncCopyBytes &&
                tile.space == Space::shared &&
                target.async.cp_async;
    }
  for (size_t t = 0; t < k.tiles.size(); ++t) k.tiles[t].swizzled = swizzlable(k, static_cast<int>(t));
}

}  // namespace morgana::lower
