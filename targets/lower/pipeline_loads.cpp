// Pass 3b of the lowering: software pipelining of a block's for-loop (docs/lowering.md, "The thread level").
//
// Without it every iteration loads its tiles, waits for them, then computes: the copies of a block never overlap its
// math, and the DRAM sits idle while it computes. With it, loads that can use 16-byte asynchronous copies get
// targets::pipeline_stages buffers (Tile::stages): the prologue issues the copies of iterations 0 .. stages-2, each
// batch closed by an AsyncWait that waits for nothing yet; each iteration first issues the copies of iteration
// it+stages-1 into the buffer iteration it-1 used (Load::ahead), closes that batch and waits for all but the stages-1
// newest (AsyncWait::pending), so its own batch has landed; the barrier that insert_barriers places before the first
// reader publishes it. The closing barrier of the body keeps a prefetch off a buffer still being read. The most
// stages that fit without costing the SM a block it would run (busy_blocks_per_sm), up to the target's cap and its
// bytes in flight, are taken.
//
// Where not even two buffers are free (and in the prologue), a section's asynchronous loads are at least batched:
// moved to its start and closed by one AsyncWait, so that a block waits for one DRAM round trip per iteration instead
// of one per load, behind one barrier. Also only when it costs no block (a load moved up is live longer).
#include <algorithm>

#include "targets/lower/lower.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

bool asynchronous(const Stmt& s, const Kernel& k, const LoweredProgram& p) {
  return s.kind == StmtKind::Load &&
         global_access_bytes(s, p.tensors[static_cast<size_t>(s.tensor)], k.tiles[static_cast<size_t>(s.dst)]) ==
             targets::kAsyncCopyBytes;
}

// Moves the loads of `list` that can use asynchronous copies to its start, as one batch closed by one AsyncWait: all
// of a section's copies are then in flight together, and one barrier (insert_barriers) publishes them all.
bool batch_loads(std::vector<Stmt>& list, const Kernel& k, const LoweredProgram& p) {
  std::vector<Stmt> loads, rest;
  for (const Stmt& s : list) (asynchronous(s, k, p) ? loads : rest).push_back(s);
  if (loads.size() < 2) return false;  // a single load gains nothing
  for (Stmt& s : loads) s.batch = true;
  loads.push_back(sync_stmt(StmtKind::AsyncWait, loads.front().from));
  loads.insert(loads.end(), rest.begin(), rest.end());
  list = std::move(loads);
  return true;
}

int64_t threads(const Kernel& k) { return k.block[0] * k.block[1] * k.block[2]; }

// `stages` buffers per asynchronous body load: the prologue issues iterations 0 .. stages-2, each iteration the one
// stages-1 ahead, each as a batch closed by an AsyncWait that waits for all but the stages-1 newest batches.
//
// `early`: the prologue's own asynchronous loads (tiles the loop does not walk: a flash kernel's Q) go out first,
// as one batch, and the stages' batches right behind them, before the prologue computes on its tiles (QK-norm's
// rms_norm of Q): the block then waits for one DRAM round trip before its loop instead of two (H100, ncu: a d=128
// QK-norm flash kernel issued its first K and V tiles only after Q had landed and been normalised). The last stage
// batch's AsyncWait also completes the prologue's batch, which is the oldest (cp.async groups complete in order;
// the earlier stage batches wait for nothing). The stages' buffers then live beside the prologue's tiles instead of
// reusing their space: pipeline() takes this form only where that costs no block.
Kernel staged_copy(const Kernel& k, const LoweredProgram& p, int64_t stages, bool early) {
  Kernel staged = k;
  std::vector<Stmt> loads, rest;
  for (const Stmt& s : staged.body) {
    if (!asynchronous(s, staged, p)) {
      rest.push_back(s);
      continue;
    }
    staged.tiles[static_cast<size_t>(s.dst)].stages = stages;
    loads.push_back(s);
    loads.back().batch = true;
  }
  const Origin& from = loads.front().from;
  std::vector<Stmt> own, prologue;
  if (early) {
    // The prologue's asynchronous loads (batch_loads may have batched them already: its AsyncWait goes too).
    for (const Stmt& s : staged.prologue) {
      if (asynchronous(s, staged, p)) {
        own.push_back(s);
        own.back().batch = true;
      } else if (s.kind != StmtKind::AsyncWait) {
        prologue.push_back(s);
      }
    }
    if (!own.empty()) own.push_back(sync_stmt(StmtKind::AsyncWait, from, 1));  // closes the batch, waits for nothing
  }
  if (own.empty()) prologue = staged.prologue;
  staged.prologue = std::move(own);
  const bool own_batch = !staged.prologue.empty();
  for (int64_t ahead = 0; ahead + 1 < stages; ++ahead) {
    for (Stmt s : loads) {
      s.ahead = ahead;
      staged.prologue.push_back(s);
    }
    // Closes the batch; nothing to wait for yet, except the prologue's own batch after the last one.
    const bool last = ahead + 2 == stages;
    staged.prologue.push_back(
        sync_stmt(StmtKind::AsyncWait, from, static_cast<int>(own_batch && !last ? ahead + 2 : ahead + 1)));
  }
  staged.prologue.insert(staged.prologue.end(), prologue.begin(), prologue.end());
  // A barrier closing the prologue: otherwise insert_barriers, which judges the body against what the prologue left
  // pending, would put one at the top of every iteration (the first buffer's writes look like the second's).
  staged.prologue.push_back(sync_stmt(StmtKind::Barrier, from));
  staged.body.clear();
  for (Stmt s : loads) {
    s.ahead = stages - 1;
    staged.body.push_back(s);
  }
  // This iteration's batch is complete after the wait.
  staged.body.push_back(sync_stmt(StmtKind::AsyncWait, from, static_cast<int>(stages - 1)));
  staged.body.insert(staged.body.end(), rest.begin(), rest.end());
  return staged;
}

// Blocks of the grid that load the same tile as `s`: those along the grid dims its origin does not move with.
int64_t replicas(const Stmt& s, const Kernel& k) {
  int64_t n = 1;
  for (size_t gd = 0; gd < k.grid.size(); ++gd)
    if (std::none_of(s.origin.begin(), s.origin.end(), [&](const Affine& a) { return a.block[gd] != 0; }))
      n *= k.grid[gd];
  return n;
}

// The buffers targets::pipeline_stages gives (the rule the cost model prices), fewer if the exact plan of the staged
// kernel needs more shared memory than its estimate; false when not even two buffers are free.
bool pipeline(Kernel& k, const LoweredProgram& p, const targets::Target& target) {
  const int64_t blocks = k.grid[0] * k.grid[1] * k.grid[2];
  int64_t stage_bytes = 0, stream_bytes = 0;
  for (const Stmt& s : k.body)
    if (asynchronous(s, k, p)) {
      const int64_t bytes = k.tiles[static_cast<size_t>(s.dst)].bytes();
      stage_bytes += bytes;
      stream_bytes += targets::stream_share(bytes, replicas(s, k), blocks);
    }
  const bool prologue_loads =
      std::any_of(k.prologue.begin(), k.prologue.end(), [&](const Stmt& s) { return asynchronous(s, k, p); });
  for (int64_t stages = targets::pipeline_stages(target, blocks, threads(k), assign_offsets(k), stage_bytes, k.loop,
                                                 stream_bytes);
       stages >= 2; --stages) {
    for (const bool early : {true, false}) {
      if (early && !prologue_loads) continue;  // the same kernel as the plain order
      Kernel staged = staged_copy(k, p, stages, early);
      if (costs_nothing(k, staged, target)) {
        k = std::move(staged);
        return true;
      }
    }
  }
  return false;
}

// A loop with loads its threads copy synchronously (rows not of whole 16-byte vectors: a split-KV combine's running
// sums and maxima) cannot be pipelined, and each iteration would wait a round trip for them. Where every
// iteration's tiles fit together (targets::preload_fits), the prologue loads them all, one buffer per iteration
// (Tile::stages = loop, Load::ahead = the iteration), as one batch closed by one AsyncWait and a barrier; the body
// loads nothing and reads buffer `it`.
bool preload(Kernel& k, const LoweredProgram& p, const targets::Target& target) {
  if (k.loop < 2) return false;
  bool synchronous = false;
  int64_t loop_bytes = 0;
  for (const Stmt& s : k.body) {
    if (s.kind != StmtKind::Load) continue;
    synchronous = synchronous || !asynchronous(s, k, p);
    loop_bytes += k.tiles[static_cast<size_t>(s.dst)].bytes();
  }
  const int64_t blocks = k.grid[0] * k.grid[1] * k.grid[2];
  if (!synchronous || !targets::preload_fits(target, blocks, threads(k), assign_offsets(k), loop_bytes, k.loop))
    return false;
  Kernel staged = k;
  std::vector<Stmt> loads, rest;
  for (const Stmt& s : staged.body) (s.kind == StmtKind::Load ? loads : rest).push_back(s);
  bool any_async = false;
  for (Stmt& s : loads) {
    staged.tiles[static_cast<size_t>(s.dst)].stages = k.loop;
    s.batch = asynchronous(s, k, p);
    any_async = any_async || s.batch;
  }
  // Asynchronous copies: a Load per iteration, all in one batch, issued first so that they fly while the threads
  // wait for their own; copies the threads make synchronously: one Load of every iteration's tile, whose loads all
  // go out before any is stored (mg::load_iterations).
  for (int64_t ahead = 0; ahead < k.loop; ++ahead)
    for (Stmt s : loads)
      if (s.batch) {
        s.ahead = ahead;
        staged.prologue.push_back(s);
      }
  for (Stmt s : loads)
    if (!s.batch) {
      s.iterations = k.loop;
      staged.prologue.push_back(s);
    }
  if (any_async) staged.prologue.push_back(sync_stmt(StmtKind::AsyncWait, loads.front().from));
  staged.prologue.push_back(sync_stmt(StmtKind::Barrier, loads.front().from));
  staged.body = std::move(rest);
  if (!costs_nothing(k, staged, target)) return false;
  k = std::move(staged);
  return true;
}

}  // namespace

void pipeline_loads(Kernel& k, const LoweredProgram& p, const targets::Target& target) {
  if (preload(k, p, target)) return;
  if (!target.async.cp_async) return;
  auto batch = [&](std::vector<Stmt> Kernel::*section) {
    Kernel batched = k;
    if (batch_loads(batched.*section, batched, p) && costs_nothing(k, batched, target)) k = std::move(batched);
  };
  batch(&Kernel::prologue);
  // Not pipelined, the body's loads at least go out together.
  if (k.loop < 2 || !pipeline(k, p, target)) batch(&Kernel::body);
}

void pipeline_loads_again(Kernel& k, const LoweredProgram& p, const targets::Target& target) {
  if (k.loop < 2 || !target.async.cp_async) return;
  for (const Tile& t : k.tiles)
    if (t.stages > 1) return;  // pipelined or preloaded at pass 3b
  // The body as pass 3b left it, its loads batched: the batch's wait goes (staged_copy places its own).
  Kernel plain = k;
  std::vector<Stmt> body;
  for (Stmt& s : plain.body) {
    if (s.kind == StmtKind::AsyncWait) continue;
    s.batch = false;
    body.push_back(std::move(s));
  }
  plain.body = std::move(body);
  if (pipeline(plain, p, target)) k = std::move(plain);
}

}  // namespace morgana::lower
