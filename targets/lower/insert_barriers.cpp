// Pass 7 of the lowering: barriers. Every statement is executed by all threads of the block, each thread taking
// its own elements, so a statement that reads tile memory another statement wrote (or writes memory another one
// read or wrote) since the last barrier must wait for it (a barrier orders the block's shared and global memory). Hazards are judged on the byte ranges the plan gave the
// tiles, so space reuse is covered too. A statement's own reads and writes never conflict: a tile library takes
// each element's inputs and writes it in the same thread (elementwise ops in place), or synchronises inside the
// statement. A loop body that runs more than once ends with a barrier, so that the next iteration's loads cannot
// overwrite tiles the last one still reads. Accesses by which each thread touches only the elements it computes
// (kernel_ir's PrivateAccess: a chain of elementwise statements over one shape) conflict with no equal access.
#include <optional>
#include <utility>

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

// [begin, end) bytes; global scratch tiles are placed after every shared byte, so the two spaces never overlap.
// `by` says which thread touches which of them, where each touches only its own elements.
struct Range {
  int64_t first = 0, second = 0;
  std::optional<PrivateAccess> by;
};
constexpr int64_t kGlobalBase = int64_t{1} << 48;

bool hits(const std::vector<Range>& set, const Range& r) {
  for (const Range& s : set)
    if (s.first < r.second && r.first < s.second && !(s.by && r.by && *s.by == *r.by)) return true;
  return false;
}

class Barriers {
 public:
  explicit Barriers(const Kernel& k) : k_(k) {}

  // `prologue`: the statements run once, before the loop, where a Load ahead fills the buffers of iterations
  // `ahead` .. ahead + iterations - 1 and no others (in the body the buffer depends on the iteration, so a statement
  // is judged on all of a tile's).
  void run(std::vector<Stmt>& stmts, bool prologue = false) {
    prologue_ = prologue;
    std::vector<Stmt> out;
    for (Stmt& s : stmts) {
      if (s.kind == StmtKind::Barrier) {
        clear();
      } else if (s.kind == StmtKind::AsyncWait && !prologue_) {
        // In the loop every thread also waits here for this iteration's copy-engine buffers (mg::tma_wait): the
        // engine's writes are visible to each waiting thread without a barrier.
        engine_written_.clear();
      } else if (!access(s)) {
        out.push_back(sync_stmt(StmtKind::Barrier, s.from));
        clear();
        access(s);
      }
      out.push_back(std::move(s));
    }
    stmts = std::move(out);
  }

  // Whether running `stmts` again now (the next iteration of a loop body, after this one) would meet a hazard
  // before its first barrier: then the body needs a closing barrier. The state is left as it was.
  bool wraps_into_hazard(const std::vector<Stmt>& stmts) const {
    Barriers next = *this;
    next.prologue_ = false;
    for (const Stmt& s : stmts) {
      if (s.kind == StmtKind::Barrier) return false;
      if (!next.access(s)) return true;
    }
    return false;
  }

  void clear() {
    read_.clear();
    written_.clear();
    engine_written_.clear();
  }

 private:
  // Records statement s's accesses since the last barrier; false (recording nothing) when one of them meets an
  // earlier one: s must wait behind a barrier.
  bool access(const Stmt& s) {
    std::vector<Range> reads = ranges(s, stmt_reads(s)), writes = ranges(s, stmt_writes(s));
    for (const Range& r : reads)
      if (hits(written_, r) || hits(engine_written_, r)) return false;
    for (const Range& w : writes)
      if (hits(written_, w) || hits(engine_written_, w) || hits(read_, w)) return false;
    read_.insert(read_.end(), reads.begin(), reads.end());
    // A loop's copy-engine load is waited for by every thread (the AsyncWait after it, in the loop): its reader
    // needs no barrier for it; a read before its write (the buffer the last iteration read) still does.
    const bool engine = s.kind == StmtKind::Load && s.tensor_map >= 0 && !prologue_;
    auto& into = engine ? engine_written_ : written_;
    into.insert(into.end(), writes.begin(), writes.end());
    return true;
  }

  std::vector<Range> ranges(const Stmt& s, const std::vector<int>& tiles) const {
    std::vector<Range> r;
    for (int t : tiles) {
      const Tile& tile = k_.tiles[static_cast<size_t>(t)];
      if (tile.space == Space::registers) continue;  // private to each thread
      int64_t begin = (tile.space == Space::global ? kGlobalBase : 0) + tile.offset, end = begin + tile.bytes();
      if (prologue_ && s.kind == StmtKind::Load && t == s.dst && tile.stages > 1) {
        begin += s.ahead % tile.stages * tile.stage_bytes();
        end = begin + s.iterations * tile.stage_bytes();
      }
      r.push_back({begin, end, private_access(k_, s, t)});
    }
    return r;
  }

  const Kernel& k_;
  bool prologue_ = false;
  std::vector<Range> read_, written_;  // since the last barrier
  std::vector<Range> engine_written_;  // by the loop's copy-engine loads since the last barrier or AsyncWait
};

}  // namespace

void insert_barriers(Kernel& k) {
  Barriers b(k);
  // The body is judged with what the prologue left pending: a superset of what later iterations see (they start
  // after the body's closing barrier), so its barriers serve every iteration.
  b.run(k.prologue, true);
  b.run(k.body);
  // The next iteration's statements against what this one left since its last barrier (a body of private
  // accesses to tiles loaded before the loop needs none: a split-KV combine's accumulators).
  if (k.loop > 1 && !k.body.empty() && b.wraps_into_hazard(k.body)) {
    k.body.push_back(sync_stmt(StmtKind::Barrier, k.body.back().from));
    b.clear();
  }
  b.run(k.epilogue);
}

}  // namespace morgana::lower
