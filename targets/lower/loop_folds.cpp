// Pass 6c of the lowering: reductions folded across the for-loop in registers (docs/lowering.md, "The thread
// level").
//
// A fused RMSNorm + matmul sums the squares of X's row alongside the product, one K tile per iteration:
// t4 = reduce_sum(square(x), dim=1), t6 = acc_sum(t4). As written, every iteration folds its tile to one value per
// row (lanes, shuffles, a shared result), publishes it behind a barrier, and adds it to the accumulator behind
// another. But a sum of sums is one sum: each thread can keep the part of every row it reads in a register across
// the iterations, and combine the parts once, after the loop. The same holds for acc_max of reduce_max. Here such a
// pair becomes one Reduce into a fold tile (RegisterLayout::fold, Stmt::accumulate) and a Publish that writes the
// accumulator at the start of the epilogue: the loop body keeps only the reads of its tile.
#include <algorithm>

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

// The accumulator that folds a reduction's results the same way.
ir::OpCode accumulator_of(ir::OpCode reduce) {
  switch (reduce) {
    case ir::OpCode::reduce_sum: return ir::OpCode::acc_sum;
    case ir::OpCode::reduce_max: return ir::OpCode::acc_max;
    default: return ir::OpCode::input;
  }
}

}  // namespace

void fold_across_loop(Kernel& k, const targets::Target& target) {
  if (k.loop < 2) return;
  const int64_t threads = k.block[0], warp = target.execution.warp_size;
  for (size_t i = 0; i < k.body.size(); ++i) {
    Stmt& r = k.body[i];
    if (r.kind != StmtKind::Reduce || r.accumulate || !r.post.empty()) continue;
    const ir::OpCode acc_op = accumulator_of(r.op);
    Tile& result = k.tiles[static_cast<size_t>(r.dst)];
    if (acc_op == ir::OpCode::input || result.space != Space::shared || result.stages != 1 ||
        k.tiles[static_cast<size_t>(r.a)].space == Space::registers)
      continue;
    if (r.by_warps && threads % warp != 0) continue;
    // Its one reader: an accumulator of the same fold later in the body, whose tile nothing else in the prologue or
    // the body touches (the epilogue reads it once the Publish has written it).
    const TileUses of_result = tile_uses(k, r.dst);
    if (of_result.readers.size() != 1 || of_result.writers.size() != 1) continue;
    const Stmt* acc = of_result.readers[0];
    const auto at = std::find_if(k.body.begin(), k.body.end(), [&](const Stmt& s) { return &s == acc; });
    if (at == k.body.end() || at - k.body.begin() <= static_cast<std::ptrdiff_t>(i) ||
        acc->kind != StmtKind::Accumulate || acc->op != acc_op || acc->a != r.dst || acc->state >= 0)
      continue;
    const Tile& acc_tile = k.tiles[static_cast<size_t>(acc->dst)];
    if (acc_tile.shape != result.shape || acc_tile.space != Space::shared) continue;
    const TileUses of_acc = tile_uses(k, acc->dst);
    const auto outside_epilogue = [&](const Stmt* s) {
      return s != acc && !(s >= k.epilogue.data() && s < k.epilogue.data() + k.epilogue.size());
    };
    if (std::any_of(of_acc.readers.begin(), of_acc.readers.end(), outside_epilogue) ||
        std::any_of(of_acc.writers.begin(), of_acc.writers.end(), outside_epilogue))
      continue;
    // Each thread keeps one f32 per result element it (or its warp) folds.
    const int64_t owners = r.by_warps ? threads / warp : threads;
    if (!targets::accumulator_registers_fit(target, (result.numel() + owners - 1) / owners)) continue;

    Stmt publish;
    publish.kind = StmtKind::Publish;
    publish.dst = acc->dst;
    publish.a = r.dst;
    publish.from = acc->from;
    result.space = Space::registers;
    result.dtype = ir::DType::f32;
    result.offset = 0;
    result.layout = RegisterLayout{};
    result.layout.fold = true;
    r.accumulate = true;
    k.body.erase(at);
    k.epilogue.insert(k.epilogue.begin(), publish);
  }
}

}  // namespace morgana::lower
