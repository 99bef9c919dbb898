// Pass 6h of the lowering: a section's batch of asynchronous copies waited for in parts (docs/lowering.md).
//
// pipeline_loads (pass 3b) sends a section's 16-byte asynchronous copies out together at its start and waits for all
// of them there. Where the tiles are first read by different statements, each thread now closes one batch per first
// reader, in their order, and waits for each batch just before its first reader: a split-KV flash block of one
// iteration normalises Q and K and computes Q·Kᵀ and the softmax while V is still landing (H100, hand-edited
// qknorm_h8_d128_k1024 pick: 9.47 us with one wait, 9.06 with Q, K and V waited for where they are read).
//
// cp.async groups complete in order, and a wait leaves the `pending` newest groups in flight. With n batches every
// AsyncWait of the section leaves n pending: the n that close the batches wait for nothing, and each later one closes
// an empty batch and so completes the oldest real one still in flight. A Barrier follows each of the later waits:
// only then are the other threads' copies of that batch visible (insert_barriers judges hazards from where a load is
// issued, and a barrier between the issue and the wait may have cleared it).
//
// Sections whose loads fill pipeline buffers (Tile::stages > 1: pipelined, preloaded or moved by the copy engine)
// keep their own accounting of batches and are left alone.
#include <algorithm>
#include <map>

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

bool plain_batched_load(const Stmt& s, const Kernel& k) {
  if (s.kind != StmtKind::Load || !s.batch || s.tensor_map >= 0 || s.ahead != 0 || s.iterations != 1) return false;
  const Tile& t = k.tiles[static_cast<size_t>(s.dst)];
  return t.space == Space::shared && t.stages <= 1;
}

void wait_in_parts(std::vector<Stmt>& list, const Kernel& k) {
  // The batch pipeline_loads placed first: its loads, then one AsyncWait for all of them.
  size_t n_loads = 0;
  while (n_loads < list.size() && plain_batched_load(list[n_loads], k)) ++n_loads;
  if (n_loads == 0 || n_loads == list.size() || list[n_loads].kind != StmtKind::AsyncWait ||
      list[n_loads].pending != 0)
    return;
  std::vector<Stmt> rest(list.begin() + static_cast<std::ptrdiff_t>(n_loads) + 1, list.end());
  // Each load's first reader in the rest of the section (the end of the section when it has none there).
  std::map<size_t, std::vector<Stmt>> by_reader;
  for (size_t i = 0; i < n_loads; ++i) {
    size_t at = 0;
    while (at < rest.size() && !std::ranges::count(stmt_reads(rest[at]), list[i].dst)) ++at;
    by_reader[at].push_back(list[i]);
  }
  if (by_reader.size() < 2 && by_reader.begin()->first == 0) return;  // one wait, where it already is
  const Origin from = list[n_loads].from;
  const int pending = static_cast<int>(by_reader.size());
  std::vector<Stmt> out;
  for (const auto& [at, loads] : by_reader) {
    out.insert(out.end(), loads.begin(), loads.end());
    out.push_back(sync_stmt(StmtKind::AsyncWait, from, pending));  // closes the batch, waits for nothing
  }
  auto wait = by_reader.begin();
  for (size_t i = 0; i <= rest.size(); ++i) {
    if (wait != by_reader.end() && wait->first == i) {
      out.push_back(sync_stmt(StmtKind::AsyncWait, from, pending));  // the batch first read here has landed
      out.push_back(sync_stmt(StmtKind::Barrier, from));
      ++wait;
    }
    if (i < rest.size()) out.push_back(std::move(rest[i]));
  }
  list = std::move(out);
}

}  // namespace

void wait_by_first_use(Kernel& k) {
  wait_in_parts(k.prologue, k);
  wait_in_parts(k.body, k);
  wait_in_parts(k.epilogue, k);
}

}  // namespace morgana::lower
