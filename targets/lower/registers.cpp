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
#include <bit>

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
  const targets::MatrixInstr& m = target.matrix[static_cast<size_t>(s.atom)];
  const Tile& d = k.tiles[static_cast<size_t>(s.dst)];
  const Tile& a = k.tiles[static_cast<size_t>(s.a)];
  const size_t r = d.shape.size();
  int64_t batches = 1;
  for (size_t i = 0; i + 2 < r; ++i) batches *= d.shape[i];
  const int64_t rows = d.shape[r - 2], atoms = d.shape[r - 1] / m.n, steps = a.shape.back() / m.k;
  MatmulTiling t;
  // Up to four atoms per task: an A fragment then serves four products (measured on the H100: fewer atoms per task
  // to occupy more warps was slower, bench/notes-fast-kernels-1.md).
  t.atoms_n = atoms % 4 == 0 ? 4 : atoms % 2 == 0 ? 2 : 1;
  t.tasks = batches * ((rows + m.m - 1) / m.m) * (atoms / t.atoms_n);
  const int64_t warps = k.block[0] / target.execution.warp_size;
  // Warps without a task of their own take parts of K: the largest power of two that gives every warp work and
  // divides the K steps.
  while (t.tasks * t.k_split * 2 <= warps && steps % (t.k_split * 2) == 0) t.k_split *= 2;
  const int64_t teams = warps / t.k_split, per_warp = (t.tasks + teams - 1) / teams;
  t.registers = per_warp * t.atoms_n * targets::MatrixInstr::lane_values(m.c_rows, target.execution.warp_size);
  return t;
}

void keep_matmuls_in_registers(Kernel& k, const targets::Target& target) {
  for (std::vector<Stmt>* list : {&k.prologue, &k.body, &k.epilogue})
    for (size_t i = 0; i < list->size(); ++i) {
      Stmt& s = (*list)[i];
      if (s.kind != StmtKind::Matmul || s.atom < 0) continue;
      if (k.tiles[static_cast<size_t>(s.dst)].space == Space::registers) continue;  // a row-owned tile already
      const MatmulTiling tiling = matmul_tiling(s, k, target);
      // Accumulators take at most a quarter of a thread's registers, leaving the rest to operands and addresses.
      if (tiling.registers * 4 > target.registers.max_regs_per_thread) continue;
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

}  // namespace morgana::lower
