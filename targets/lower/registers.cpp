// Pass 6 of the lowering: matmul results kept in registers (docs/lowering.md, "The thread level").
//
// A matmul on a matrix instruction computes each warp task's output in the instruction's C fragments, in registers.
// Written to a shared tile after every call, an accumulating matmul in the for-loop reads its accumulators back from
// shared memory and stores them again each iteration, and a warp has at most one task per call, so a matmul of few
// tasks (decode's one-row products: one task of four atoms) leaves the block's other warps idle for the whole K loop.
// Here such a matmul writes a register tile instead (Space::registers): its accumulators live across the loop, the
// idle warps take parts of K (Stmt::k_split), and one Publish statement stores the result to the shared tile where
// it is first needed: at the start of the epilogue for an accumulator of the loop, right after the matmul otherwise.
#include <algorithm>

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

// True when no statement of `list` but `except` reads or writes tile `t`.
bool untouched(const std::vector<Stmt>& list, int t, const Stmt* except) {
  for (const Stmt& s : list) {
    if (&s == except) continue;
    std::vector<int> r = stmt_reads(s), w = stmt_writes(s);
    if (std::count(r.begin(), r.end(), t) || std::count(w.begin(), w.end(), t)) return false;
  }
  return true;
}

}  // namespace

MatmulTiling matmul_tiling(const Stmt& s, const Kernel& k, const targets::Target& target) {
  const Tile& d = k.tiles[static_cast<size_t>(s.dst)];
  const Tile& a = k.tiles[static_cast<size_t>(s.a)];
  const size_t r = d.shape.size();
  int64_t batches = 1;
  for (size_t i = 0; i + 2 < r; ++i) batches *= d.shape[i];
  return targets::matmul_tiling(target, target.matrix[static_cast<size_t>(s.atom)], batches, d.shape[r - 2],
                                d.shape[r - 1], a.shape.back(), k.block[0] / target.execution.warp_size);
}

void keep_matmuls_in_registers(Kernel& k, const targets::Target& target) {
  for (std::vector<Stmt>* list : {&k.prologue, &k.body, &k.epilogue})
    for (size_t i = 0; i < list->size(); ++i) {
      Stmt& s = (*list)[i];
      if (s.kind != StmtKind::Matmul || s.atom < 0) continue;
      if (k.tiles[static_cast<size_t>(s.dst)].space == Space::registers) continue;  // a row-owned tile already
      const MatmulTiling tiling = matmul_tiling(s, k, target);
      if (!targets::accumulators_fit(target, tiling)) continue;
      const bool loop_accumulator = s.accumulate && list == &k.body && k.loop > 1;
      if (loop_accumulator) {
        // Its tile must be the matmul's alone until the loop ends.
        if (!untouched(k.prologue, s.dst, &s) || !untouched(k.body, s.dst, &s)) continue;
      } else if (tiling.k_split == 1) {
        continue;  // the shared-memory routine does the same work with the same warps
      }
      Tile regs = k.tiles[static_cast<size_t>(s.dst)];
      auto taken = [&](const std::string& name) {
        return std::any_of(k.tiles.begin(), k.tiles.end(), [&](const Tile& t) { return t.name == name; });
      };
      do regs.name += "_acc";
      while (taken(regs.name));
      regs.space = Space::registers;
      regs.offset = 0;
      regs.stages = 1;
      regs.dtype = ir::DType::f32;
      regs.layout = {s.atom, tiling.atoms_n, tiling.k_split};
      Stmt publish;
      publish.kind = StmtKind::Publish;
      publish.dst = s.dst;
      publish.a = static_cast<int>(k.tiles.size());
      publish.from = s.from;
      k.tiles.push_back(std::move(regs));
      s.dst = publish.a;
      s.k_split = tiling.k_split;
      if (loop_accumulator) {
        k.epilogue.insert(k.epilogue.begin(), publish);
      } else {
        list->insert(list->begin() + static_cast<std::ptrdiff_t>(i) + 1, publish);
        ++i;
      }
    }
}

void publish_split_parts_at_once(Kernel& k, const targets::Target& target) {
  auto split = [&](const Stmt& s) { return k.tiles[static_cast<size_t>(s.a)].layout.k_split; };
  change_where_free(
      k, target, [&](const Stmt& s) { return s.kind == StmtKind::Publish && s.parts < 0 && split(s) > 1; },
      [&](Kernel& with, Stmt& s) {
        with.tiles.push_back(parts_tile(with, s, {split(s) - 1, with.tiles[static_cast<size_t>(s.dst)].numel()}));
        s.parts = static_cast<int>(with.tiles.size() - 1);
      });
}

}  // namespace morgana::lower
