// Pass 3b of the lowering: software pipelining of a block's for-loop (docs/lowering.md, "The thread level").
//
// Without it every iteration loads its tiles, waits for them, then computes: the copies of a block never overlap its
// math, and the DRAM sits idle while it computes. With it, loads that can use 16-byte asynchronous copies get two
// buffers (Tile::stages): the prologue issues iteration 0's copies into buffer 0 and closes them as one batch
// (AsyncWait); each iteration first issues the next iteration's copies into the other buffer (Load::ahead = 1),
// closes that batch and waits for all but it (AsyncWait with one batch pending), and the barrier that
// insert_barriers places before the first reader publishes them. The closing barrier of the body keeps the next
// iteration's copies from overwriting a buffer this one still reads.
//
// Where the second buffers would cost resident blocks (and in the prologue), the section's asynchronous loads are at
// least batched: moved to its start and closed by one AsyncWait, so that a block waits for one DRAM round trip per
// iteration instead of one per load, behind one barrier. Also only when it costs no resident block (a load moved up
// is live longer).
#include "targets/lower/lower.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

bool asynchronous(const Stmt& s, const Kernel& k, const LoweredProgram& p) {
  return s.kind == StmtKind::Load &&
         global_access_bytes(s, p.tensors[static_cast<size_t>(s.tensor)], k.tiles[static_cast<size_t>(s.dst)]) == 16;
}

// Moves the loads of `list` that can use asynchronous copies to its start, as one batch closed by one AsyncWait: all
// of a section's copies are then in flight together, and one barrier (insert_barriers) publishes them all.
bool batch_loads(std::vector<Stmt>& list, const Kernel& k, const LoweredProgram& p) {
  std::vector<Stmt> loads, rest;
  for (const Stmt& s : list) (asynchronous(s, k, p) ? loads : rest).push_back(s);
  if (loads.size() < 2) return false;  // a single load gains nothing
  for (Stmt& s : loads) s.batch = true;
  Stmt wait;
  wait.kind = StmtKind::AsyncWait;
  wait.from = loads.front().from;
  loads.push_back(wait);
  loads.insert(loads.end(), rest.begin(), rest.end());
  list = std::move(loads);
  return true;
}

int64_t threads(const Kernel& k) { return k.block[0] * k.block[1] * k.block[2]; }

// Shared memory after the change must fit, and must not cost resident blocks: a second block on the SM overlaps its
// loads with this one's math as well as a second buffer or an earlier load does, and also its math with this one's
// barriers (measured on the H100: doubling 64 KiB tiles took rmsnorm_linear_b8 from 87 to 161 us, gated_mlp from 76
// to 127, at one block per SM instead of three). Registers are not known yet; both counts ignore them.
bool costs_nothing(Kernel& before, Kernel& after, const targets::Target& target) {
  const int64_t one = assign_offsets(before), two = assign_offsets(after);
  auto resident = [&](int64_t smem) { return targets::resident_blocks_per_sm(target, threads(before), smem, 0); };
  return two <= shared_memory_limit(target) && resident(two) >= resident(one);
}

bool pipeline(Kernel& k, const LoweredProgram& p, const targets::Target& target) {
  Kernel staged = k;
  std::vector<Stmt> prefetch, rest;
  for (const Stmt& s : staged.body) {
    if (asynchronous(s, staged, p)) {
      staged.tiles[static_cast<size_t>(s.dst)].stages = 2;
      staged.prologue.push_back(s);  // iteration 0, buffer 0
      staged.prologue.back().batch = true;
      prefetch.push_back(s);
      prefetch.back().ahead = 1;
      prefetch.back().batch = true;
    } else {
      rest.push_back(s);
    }
  }
  if (prefetch.empty()) return false;
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
  if (!costs_nothing(k, staged, target)) return false;
  k = std::move(staged);
  return true;
}

}  // namespace

void pipeline_loads(Kernel& k, const LoweredProgram& p, const targets::Target& target) {
  if (!target.async.cp_async) return;
  auto batch = [&](std::vector<Stmt> Kernel::*section) {
    Kernel batched = k;
    if (batch_loads(batched.*section, batched, p) && costs_nothing(k, batched, target)) k = std::move(batched);
  };
  batch(&Kernel::prologue);
  // Not pipelined, the body's loads at least go out together.
  if (k.loop < 2 || !pipeline(k, p, target)) batch(&Kernel::body);
}

}  // namespace morgana::lower
