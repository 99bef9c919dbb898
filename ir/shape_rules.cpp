// Shape rules, one per OpKind. Every op row of the op table names its kind; nothing here is per op.
#include <algorithm>
#include <string>
#include <utility>

#include "ir/diagnostic.h"
#include "ir/graph.h"

namespace morgana::ir {

namespace {

const char* const kGridDimNames[kGridDims] = {"x", "y", "z"};

[[noreturn]] void fail(OpCode op, const std::string& msg) {
  throw UserError("'" + std::string(op_name(op)) + "': " + msg);
}

std::string dims_str(const TensorType& t) { return t.str(); }

void check_dim(OpCode op, const TensorType& t, int d) {
  if (d < 0 || d >= t.rank)
    fail(op, "dim " + std::to_string(d) + " is out of range for rank-" + std::to_string(t.rank) + " operand " +
                 dims_str(t));
}

void check_same_dtype(OpCode op, std::span<const TensorType> in) {
  for (const TensorType& t : in)
    if (t.dtype != in[0].dtype)
      fail(op, "operands have different element types (" + std::string(dtype_name(in[0].dtype)) + " and " +
                   std::string(dtype_name(t.dtype)) + ")");
}

TensorType with_dims(DType dt, const int64_t* dims, int rank) {
  return TensorType::make(dt, std::span<const int64_t>(dims, static_cast<size_t>(rank)));
}

// numpy broadcasting of the trailing `rank` dims of a and b (right-aligned).
TensorType broadcast(OpCode op, const TensorType& a, const TensorType& b, int skip_trailing = 0) {
  int ra = a.rank - skip_trailing, rb = b.rank - skip_trailing;
  int r = std::max(ra, rb);
  std::array<int64_t, kMaxRank> out{};
  for (int i = 0; i < r; ++i) {
    int ia = ra - r + i, ib = rb - r + i;
    int64_t da = ia >= 0 ? a.dim(ia) : 1, db = ib >= 0 ? b.dim(ib) : 1;
    if (da != db && da != 1 && db != 1)
      fail(op, "shapes " + dims_str(a) + " and " + dims_str(b) + " do not broadcast (dim " + std::to_string(i) +
                   ": " + std::to_string(da) + " vs " + std::to_string(db) + ")");
    out[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return with_dims(a.dtype, out.data(), r);
}

TensorType infer_matmul(OpCode op, const TensorType& a, const TensorType& b) {
  if (a.rank < 2 || b.rank < 2) fail(op, "operands need rank >= 2, got " + dims_str(a) + " and " + dims_str(b));
  int64_t k1 = a.dim(a.rank - 1), k2 = b.dim(b.rank - 2);
  if (k1 != k2)
    fail(op, "inner dimensions differ: " + dims_str(a) + " x " + dims_str(b) + " (" + std::to_string(k1) +
                 " vs " + std::to_string(k2) + ")");
  TensorType batch = (a.rank == 2 && b.rank == 2) ? TensorType{} : broadcast(op, a, b, 2);
  std::array<int64_t, kMaxRank> out{};
  int r = batch.rank;
  for (int i = 0; i < r; ++i) out[static_cast<size_t>(i)] = batch.dim(i);
  out[static_cast<size_t>(r)] = a.dim(a.rank - 2);
  out[static_cast<size_t>(r + 1)] = b.dim(b.rank - 1);
  if (r + 2 > kMaxRank) fail(op, "result rank exceeds " + std::to_string(kMaxRank));
  return with_dims(a.dtype, out.data(), r + 2);
}

// An imap or omap: each grid dim names a dim of `t` or φ; no two grid dims name the same dim.
void check_grid_map(OpCode op, const char* which, const std::array<int8_t, kGridDims>& map, const TensorType& t,
                    const char* what) {
  for (int g = 0; g < kGridDims; ++g) {
    int8_t d = map[static_cast<size_t>(g)];
    if (d == kPhi) continue;
    if (d < 0 || d >= t.rank)
      fail(op, std::string(which) + " maps grid dim " + kGridDimNames[g] + " to dim " + std::to_string(d) +
                   ", out of range for " + what + dims_str(t));
    for (int h = 0; h < g; ++h)
      if (map[static_cast<size_t>(h)] == d)
        fail(op, std::string(which) + " maps grid dims " + kGridDimNames[h] + " and " + kGridDimNames[g] +
                     " to the same dim " + std::to_string(d));
  }
}

TensorType infer_iter(OpCode op, const Attrs& a, const Graph* ctx) {
  if (!ctx) fail(op, "only allowed inside a block graph");
  if (a.index >= ctx->operand_types().size())
    fail(op, "reads block operand " + std::to_string(a.index) + " but the block has " +
                 std::to_string(ctx->operand_types().size()));
  const TensorType& in = ctx->operand_types()[a.index];
  const BlockParams& p = ctx->block_params();
  check_grid_map(op, "imap", a.map, in, "");
  if (a.fmap != kPhi && (a.fmap < 0 || a.fmap >= in.rank))
    fail(op, "fmap dim " + std::to_string(a.fmap) + " is out of range for " + dims_str(in));
  if (a.fmap != kPhi && p.loop == 1)
    fail(op, "fmap=" + std::to_string(a.fmap) + " but the block has no for-loop (loop=1); use fmap=-");
  std::array<int64_t, kMaxRank> tile{};
  for (int d = 0; d < in.rank; ++d) {
    int64_t parts = iter_parts(p, a, d);
    int64_t n = in.dim(d);
    if (n % parts != 0 && !a.mask)
      fail(op, "dim " + std::to_string(d) + " of " + dims_str(in) + " (size " + std::to_string(n) +
                   ") does not split into " + std::to_string(parts) + " equal parts; add mask=true for ragged tiles");
    if (parts > n)
      fail(op, "dim " + std::to_string(d) + " of " + dims_str(in) + " is split into " + std::to_string(parts) +
                   " parts, more than its size");
    tile[static_cast<size_t>(d)] = (n + parts - 1) / parts;
  }
  return with_dims(in.dtype, tile.data(), in.rank);
}

TensorType infer_save(OpCode op, const TensorType& tile, const Attrs& a, const Graph* ctx) {
  if (!ctx) fail(op, "only allowed inside a block graph");
  const BlockParams& p = ctx->block_params();
  check_grid_map(op, "omap", a.map, tile, "tile ");
  std::array<int64_t, kMaxRank> out{};
  for (int d = 0; d < tile.rank; ++d) out[static_cast<size_t>(d)] = tile.dim(d);
  for (int g = 0; g < kGridDims; ++g) {
    int8_t d = a.map[static_cast<size_t>(g)];
    int64_t n = p.grid[static_cast<size_t>(g)];
    if (d == kPhi) {
      if (n > 1)
        fail(op, std::string("omap leaves grid dim ") + kGridDimNames[g] + " (size " + std::to_string(n) +
                     ") as φ: blocks along it would write the same tile");
      continue;
    }
    out[static_cast<size_t>(d)] *= n;
  }
  if (a.shape_rank != 0) {
    if (a.shape_rank != tile.rank)
      fail(op, "shape has rank " + std::to_string(a.shape_rank) + " but the tile " + dims_str(tile) + " has rank " +
                   std::to_string(tile.rank));
    for (int d = 0; d < tile.rank; ++d) {
      int64_t full = out[static_cast<size_t>(d)], want = a.shape[static_cast<size_t>(d)];
      if (want > full || want <= full - tile.dim(d))
        fail(op, "shape dim " + std::to_string(d) + " = " + std::to_string(want) + " does not fit " +
                     std::to_string(full / tile.dim(d)) + " tiles of " + std::to_string(tile.dim(d)) +
                     " (must be in " + std::to_string(full - tile.dim(d) + 1) + ".." + std::to_string(full) + ")");
      out[static_cast<size_t>(d)] = want;
    }
  }
  return with_dims(tile.dtype, out.data(), tile.rank);
}

}  // namespace

int64_t iter_parts(const BlockParams& p, const Attrs& a, int d) {
  int64_t parts = 1;
  for (int g = 0; g < kGridDims; ++g)
    if (a.map[static_cast<size_t>(g)] == d) parts *= p.grid[static_cast<size_t>(g)];
  if (a.fmap == d) parts *= p.loop;
  return parts;
}

std::vector<TensorType> infer_types(OpCode op, std::span<const TensorType> in, const Attrs& a, const Graph* ctx,
                                    const Graph* body) {
  const OpInfo& info = op_info(op);
  if (info.arity >= 0 && static_cast<int>(in.size()) != info.arity)
    fail(op, "takes " + std::to_string(info.arity) + " operand" + (info.arity == 1 ? "" : "s") + ", got " +
                 std::to_string(in.size()));
  switch (info.kind) {
    case OpKind::Input:
      fail(op, "inputs are declared in the kernel signature");
    case OpKind::Output:
      return {};
    case OpKind::Unary:
      return {in[0]};
    case OpKind::Binary:
      check_same_dtype(op, in);
      return {broadcast(op, in[0], in[1])};
    case OpKind::Matmul:
      check_same_dtype(op, in);
      return {infer_matmul(op, in[0], in[1])};
    case OpKind::Reduce: {
      check_dim(op, in[0], a.dim);
      int64_t n = in[0].dim(a.dim);
      if (a.to < 1 || n % a.to != 0)
        fail(op, "to=" + std::to_string(a.to) + " does not divide dim " + std::to_string(a.dim) + " of size " +
                     std::to_string(n));
      TensorType t = in[0];
      t.dims[static_cast<size_t>(a.dim)] = a.to;
      t.set_row_major_strides();
      return {t};
    }
    case OpKind::Norm:
      check_dim(op, in[0], a.dim);
      if (!(a.eps >= 0)) fail(op, "eps must be >= 0");
      return {in[0]};
    case OpKind::Softmax:
      check_dim(op, in[0], a.dim);
      return {in[0]};
    case OpKind::Transpose: {
      if (in[0].rank < 2) fail(op, "needs rank >= 2, got " + dims_str(in[0]));
      // A view of the operand's memory: the last two dims and their strides swap.
      TensorType t = in[0];
      const auto r1 = static_cast<size_t>(t.rank - 1), r2 = static_cast<size_t>(t.rank - 2);
      std::swap(t.dims[r1], t.dims[r2]);
      std::swap(t.strides[r1], t.strides[r2]);
      return {t};
    }
    case OpKind::Concat: {
      check_same_dtype(op, in);
      if (in[0].rank != in[1].rank) fail(op, "operands have different ranks: " + dims_str(in[0]) + " and " + dims_str(in[1]));
      check_dim(op, in[0], a.dim);
      TensorType t = in[0];
      for (int d = 0; d < t.rank; ++d)
        if (d != a.dim && in[0].dim(d) != in[1].dim(d))
          fail(op, "operands " + dims_str(in[0]) + " and " + dims_str(in[1]) + " differ in dim " + std::to_string(d) +
                       ", which is not the concat dim");
      t.dims[static_cast<size_t>(a.dim)] += in[1].dim(a.dim);
      t.set_row_major_strides();
      return {t};
    }
    case OpKind::Block: {
      MG_CHECK(body != nullptr, "block op without a body");
      auto want = body->operand_types();
      if (want.size() != in.size())
        fail(op, "has " + std::to_string(in.size()) + " operands but its body iterates over " +
                     std::to_string(want.size()));
      for (size_t i = 0; i < in.size(); ++i)
        if (!(want[i] == in[i]))
          fail(op, "operand " + std::to_string(i) + " has type " + dims_str(in[i]) + " but the body expects " +
                       dims_str(want[i]));
      std::vector<TensorType> out;
      for (TensorId t : body->outputs()) out.push_back(body->type(t));
      if (out.empty()) fail(op, "its block graph saves nothing");
      return out;
    }
    case OpKind::Iter:
      return {infer_iter(op, a, ctx)};
    case OpKind::Save:
      return {infer_save(op, in[0], a, ctx)};
    case OpKind::Accum:
      if (info.arity == 2) {
        check_same_dtype(op, in);
        TensorType b = broadcast(op, in[0], in[1]);
        if (!(b.shape().size() == in[0].shape().size() &&
              std::equal(b.shape().begin(), b.shape().end(), in[0].shape().begin())))
          fail(op, "the scale operand " + dims_str(in[1]) + " must broadcast to the value " + dims_str(in[0]));
      }
      return {in[0]};
  }
  MG_CHECK(false, "unhandled op kind");
}

}  // namespace morgana::ir
