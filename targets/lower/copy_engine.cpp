// Pass 6b of the lowering: pipelined loads moved by the copy engine (docs/lowering.md, "The thread level").
//
// A pipelined load issued by the threads (16-byte cp.async per thread) occupies them while it goes out: measured on
// the H100 (bench/probes/stream_overlap.cu), a block that computes on each stage streams its next stages at the pace
// of the copies its threads can keep in flight, so a GEMV-shaped kernel with 0.5 us of math per stage took 23.1 us
// for a 50 MB stream the copy engine moved in 20.6 (18.8 with no math). Where the target has the engine ([async]
// tma), a pipelined load of a box of a kernel parameter is one thread's request instead: the engine moves the tile
// (boxes of up to 256 rows) and counts its bytes on a barrier per pipeline buffer, which the iteration waits on.
//
// A load qualifies when the engine can write the tile exactly as the tile library reads it: the tensor is a whole
// parameter of the program (the runtime builds its tensor map from the caller's pointer), its last dim contiguous
// and its other strides multiples of 16 bytes; the tile is a box of it with rows of a multiple of 16 bytes and at
// most 256 elements, each dim at most 256 long except that a tall tile of one matrix goes as a stack of boxes; a
// swizzled tile has rows of 32, 64 or 128 bytes (the engine's swizzles are mg::Swizzled there) or loses its swizzle
// where that costs 2-way bank conflicts (below), and each buffer starts on a multiple of eight rows' bytes; elements
// read outside the tensor are 0 (the engine's fill).
#include <algorithm>
#include <climits>
#include <numeric>
#include <optional>

#include "targets/lower/lower.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

constexpr int64_t kMaxBoxesPerTile = 16;  // more boxes per tile cost more requests than the engine saves
constexpr int64_t kUnswizzledAlign = 128;  // bytes: the engine's shared-memory alignment without a swizzle

// The copy engine's view of statement s's load, or nothing when the engine cannot write the tile as it is read.
std::optional<std::pair<TensorMapUse, int64_t>> engine_load(const Stmt& s, const Kernel& k, const LoweredProgram& p,
                                                            const targets::Target& target) {
  if (s.kind != StmtKind::Load || !s.async || !s.batch || s.tensor < 0) return std::nullopt;
  const Tile& t = k.tiles[static_cast<size_t>(s.dst)];
  const GlobalTensor& g = p.tensors[static_cast<size_t>(s.tensor)];
  if (t.stages < 2 || t.space != Space::shared || g.param < 0) return std::nullopt;
  const Param& q = p.params[static_cast<size_t>(g.param)];
  const size_t rank = g.shape.size();
  const int64_t es = ir::dtype_bytes(g.dtype);
  if (q.role != Role::input || g.offset != 0 || g.shape != q.shape || g.strides != q.strides || q.dtype != g.dtype ||
      t.dtype != g.dtype || rank < 1 || rank > 4 || t.shape.size() != rank || g.strides.back() != 1)
    return std::nullopt;
  // The engine's limits: strides multiples of 16 bytes below 2^40, coordinates 32-bit.
  for (size_t d = 0; d < rank; ++d)
    if ((d + 1 < rank && (g.strides[d] * es % 16 != 0 || g.strides[d] * es >= (int64_t{1} << 40))) ||
        g.shape[d] > INT32_MAX)
      return std::nullopt;
  if (s.mask != 0 && s.pad != 0) return std::nullopt;  // the engine fills with zeros only
  // Rows the engine can write as the tile library reads them (targets::engine_takes_rows); a swizzled tile whose rows
  // are not one of the engine's swizzles goes unswizzled (rmsnorm_linear's 96-byte rows on the H100: 26.1 -> 23.8 us;
  // 256-byte rows, 8-fold conflicts, made attention_decode 4.4 us slower, so those stay with the threads).
  const int64_t row_bytes = t.shape.back() * es;
  const int64_t rows = rank >= 2 ? t.shape[rank - 2] : 1;
  if (!targets::engine_takes_rows(target, row_bytes, t.shape.back(), rows, t.swizzled)) return std::nullopt;
  const int64_t swizzle = t.swizzled ? targets::engine_swizzle_bytes(row_bytes) : 0;
  // Rows per box: the whole tile when it fits a box, else a stack of boxes of one matrix's rows.
  TensorMapUse use{g.param, t.shape, swizzle};
  int64_t box_rows = rank >= 2 ? t.shape[rank - 2] : 1;
  if (box_rows > targets::kEngineMaxBox) {
    for (size_t d = 0; d + 2 < rank; ++d)
      if (t.shape[d] != 1) return std::nullopt;
    box_rows = std::gcd(box_rows, targets::kEngineMaxBox);
    if (t.shape[rank - 2] / box_rows > kMaxBoxesPerTile) return std::nullopt;
    use.box[rank - 2] = box_rows;
  }
  for (int64_t b : use.box)
    if (b > targets::kEngineMaxBox) return std::nullopt;
  // Every box starts on the engine's alignment, and a swizzled one on its pattern's period (8 rows).
  const int64_t period = swizzle ? 8 * swizzle : kUnswizzledAlign;
  if (t.stage_bytes() % period != 0 || box_rows * row_bytes % period != 0) return std::nullopt;
  return std::make_pair(use, box_rows);
}

}  // namespace

void use_copy_engine(Kernel& before, const LoweredProgram& p, const targets::Target& target) {
  if (!target.async.tma || before.loop < 2) return;
  Kernel k = before;
  int64_t stages = 0, per_iteration = 0;
  for (Stmt& s : k.body) {
    auto use = engine_load(s, k, p, target);
    if (!use) continue;
    auto same = std::find(k.tensor_maps.begin(), k.tensor_maps.end(), use->first);
    s.tensor_map = static_cast<int>(same - k.tensor_maps.begin());
    if (same == k.tensor_maps.end()) k.tensor_maps.push_back(use->first);
    s.box_rows = use->second;
    Tile& t = k.tiles[static_cast<size_t>(s.dst)];
    t.copy_engine = true;
    t.swizzled = use->first.swizzle_bytes != 0;
    stages = std::max(stages, t.stages);
    ++per_iteration;
    // The prologue's loads of the same tile (earlier iterations) go the same way.
    for (Stmt& early : k.prologue)
      if (early.kind == StmtKind::Load && early.dst == s.dst) {
        early.tensor_map = s.tensor_map;
        early.box_rows = s.box_rows;
      }
  }
  // Every pipelined tile of a loop has the same number of buffers (pipeline_loads), so one barrier per buffer
  // serves all of an iteration's engine loads.
  if (per_iteration == 0) return;
  k.barriers = stages;
  k.barrier_arrivals = per_iteration;
  // The engine's alignment and barriers take a little shared memory: never at the cost of the fit or of a block.
  if (costs_nothing(before, k, target)) before = std::move(k);
}

}  // namespace morgana::lower
