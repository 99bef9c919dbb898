// Pass 3b of the lowering: software pipelining of a block's for-loop (docs/lowering.md, "The thread level").
//
// Without it every iteration loads its tiles, waits for them, then computes: the copies of a block never overlap its
// math, and the DRAM sits idle while it computes. With it, loads that can use 16-byte asynchronous copies get two
// buffers (Tile::stages): the prologue issues iteration 0's copies into buffer 0 and closes them as one batch
// (AsyncWait); each iteration first issues the next iteration's copies into the other buffer (Load::ahead = 1),
// closes that batch and waits for all but it (AsyncWait with one batch pending), and the barrier that
// insert_barriers places before the first reader publishes them. The closing barrier of the body keeps the next
// iteration's copies from overwriting a buffer this one still reads.
#include "targets/lower/lower.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

void pipeline_loads(Kernel& k, const LoweredProgram& p, const targets::Target& target) {
  if (k.loop < 2 || !target.async.cp_async) return;
  Kernel staged = k;
  std::vector<Stmt> prefetch, rest;
  for (const Stmt& s : staged.body) {
    Tile& tile = staged.tiles[static_cast<size_t>(s.dst)];
    if (s.kind == StmtKind::Load && global_access_bytes(s, p.tensors[static_cast<size_t>(s.tensor)], tile) == 16) {
      tile.stages = 2;
      staged.prologue.push_back(s);  // iteration 0, buffer 0
      prefetch.push_back(s);
      prefetch.back().ahead = 1;
    } else {
      rest.push_back(s);
    }
  }
  if (prefetch.empty()) return;
  // Each AsyncWait closes the batch of copies issued since the last one and waits for all but the newest batch:
  // in the prologue nothing (iteration 0's batch is the newest), in iteration i the batch of iteration i.
  Stmt wait;
  wait.kind = StmtKind::AsyncWait;
  wait.pending = 1;
  wait.from = prefetch.front().from;
  staged.prologue.push_back(wait);
  // A barrier closing the prologue: otherwise insert_barriers, which judges the body against what the prologue left
  // pending, would put one at the top of every iteration (the first buffer's writes look like the second's).
  Stmt barrier;
  barrier.kind = StmtKind::Barrier;
  barrier.from = wait.from;
  staged.prologue.push_back(barrier);
  prefetch.push_back(wait);
  prefetch.insert(prefetch.end(), rest.begin(), rest.end());
  staged.body = std::move(prefetch);
  // The second buffers must fit beside everything else, and must not cost resident blocks: a second block on the SM
  // overlaps its loads with this one's math as well as a second buffer does, and also its math with this one's
  // barriers (measured on the H100: doubling 64 KiB tiles took rmsnorm_linear_b8 from 87 to 161 us, gated_mlp from
  // 76 to 127, at one block per SM instead of three). Registers are not known yet; both counts ignore them.
  const int64_t threads = k.block[0] * k.block[1] * k.block[2];
  const int64_t one = assign_offsets(k), two = assign_offsets(staged);
  auto resident = [&](int64_t smem) { return targets::resident_blocks_per_sm(target, threads, smem, 0); };
  if (two > shared_memory_limit(target) || resident(two) < resident(one)) return;
  k = std::move(staged);
}

}  // namespace morgana::lower
