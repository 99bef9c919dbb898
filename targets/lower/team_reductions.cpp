// Pass 6e of the lowering (docs/lowering.md, "The thread level"): reductions of fewer outputs than the block has
// warps fold each output by a team of warps. A warp per output (choose_instructions' by_warps) leaves the other
// warps idle while it walks the whole group: nTrans's row norms, one [1, 4096] row per block of sixteen warps, ran
// on one warp. A team of up to warps / outputs warps strides the group together, each warp folds its lanes by
// shuffles, and one barrier later a warp per output combines the team's folds from a small shared tile by shuffles
// (mg::team_reduce). Runs after the passes that keep reductions in registers (they fold by single warps, threads or
// runs), and only where the extra tile costs no block on an SM.
#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

// The power of two of warps per output that folds fastest by the target's cost constants: a lane folds
// groups / (warp x team) elements (pass_element_ns each) and a team pays one barrier (barrier_ns) more; every
// output must have its team, every lane of a team an element of the group to start from, and a warp's lanes must
// be able to combine the team's folds. 1 when no team beats a warp (attention_decode's rows of 256 scores: a team of
// four warps made each of its 16 iterations wait at one more barrier, 58.7 -> 62.0 us on the H100; nTrans's rows
// of 4096 gain from sixteen).
int64_t team_size(const Kernel& k, const Stmt& s, const targets::Target& target) {
  const int64_t warp = target.execution.warp_size;
  const Tile& x = k.tiles[static_cast<size_t>(s.a)];
  const int64_t outputs = k.tiles[static_cast<size_t>(s.dst)].numel();
  const int64_t groups = x.shape[static_cast<size_t>(s.dim)] / s.to, warps = k.block[0] / warp;
  auto time_ns = [&](int64_t team) {
    return static_cast<double>(groups) / static_cast<double>(warp * team) * target.cost.pass_element_ns +
           (team > 1 ? target.cost.barrier_ns : 0.0);
  };
  int64_t best = 1;
  for (int64_t team = 2; outputs * team <= warps && groups >= team * warp && team <= warp; team *= 2)
    if (time_ns(team) < time_ns(best)) best = team;
  return best;
}

}  // namespace

void fold_by_teams(Kernel& k, const targets::Target& target) {
  const int64_t warp = target.execution.warp_size;
  if (k.block[0] % warp != 0) return;
  change_where_free(
      k, target,
      [&](const Stmt& s) {
        if (s.kind != StmtKind::Reduce || !s.by_warps || s.accumulate || s.parts >= 0) return false;
        if (k.tiles[static_cast<size_t>(s.dst)].space != Space::shared ||
            k.tiles[static_cast<size_t>(s.a)].space != Space::shared)
          return false;
        return team_size(k, s, target) >= 2;
      },
      [&](Kernel& with, Stmt& s) {
        const int64_t team = team_size(with, s, target);  // `with` is still k's copy here
        with.tiles.push_back(parts_tile(with, s, {with.tiles[static_cast<size_t>(s.dst)].numel(), team}));
        s.team = team;
        s.parts = static_cast<int>(with.tiles.size() - 1);
      });
}

}  // namespace morgana::lower
