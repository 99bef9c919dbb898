// Pass 4 of the lowering: the shared-memory plan. Each tile is live from the statement that first writes it to
// the statement that last reads it; a tile the loop body reads before writing (an accumulator, or a tile from the
// prologue) is live through the whole body. Tiles whose lifetimes do not overlap share space, and an elementwise op
// writes over an operand of its shape that dies there (same element, same thread: no hazard). Offsets are then
// chosen first-fit, largest tile first. A block op whose plan exceeds the target's limit is the user's error: the
// μGraph is not valid for that target.
#include <algorithm>
#include <limits>
#include <numeric>

#include "targets/lower/lower.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

// Tiles start at multiples of 16 bytes: vector loads and asynchronous copies (cp.async, ldmatrix) move 16 bytes.
constexpr int64_t kTileAlign = 16;

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

struct Interval {
  int64_t start = std::numeric_limits<int64_t>::max();
  int64_t end = -1;
  bool used() const { return end >= 0; }
  bool overlaps(const Interval& o) const { return start <= o.end && o.start <= end; }
};

std::vector<const Stmt*> statements(const Kernel& k) {
  std::vector<const Stmt*> order;
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const Stmt& s : *list) order.push_back(&s);
  return order;
}

// When each tile is live, in positions of statements(k).
std::vector<Interval> lifetimes(const Kernel& k) {
  const size_t n_tiles = k.tiles.size();
  std::vector<const Stmt*> order = statements(k);
  const auto body_begin = static_cast<int64_t>(k.prologue.size());
  const auto body_end = body_begin + static_cast<int64_t>(k.body.size()) - 1;

  std::vector<Interval> live(n_tiles);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    auto touch = [&](int t) {
      live[static_cast<size_t>(t)].start = std::min(live[static_cast<size_t>(t)].start, static_cast<int64_t>(pos));
      live[static_cast<size_t>(t)].end = std::max(live[static_cast<size_t>(t)].end, static_cast<int64_t>(pos));
    };
    for (int t : stmt_reads(*order[pos])) touch(t);
    for (int t : stmt_writes(*order[pos])) touch(t);
  }
  if (k.loop > 1 && !k.body.empty()) {
    // A tile the body reads before it writes it carries a value into the next iteration (or in from the
    // prologue): it must survive the whole body.
    std::vector<int> first(n_tiles, 0);  // 0 unseen, 1 written first, 2 read first
    for (const Stmt& s : k.body) {
      for (int t : stmt_reads(s))
        if (!first[static_cast<size_t>(t)]) first[static_cast<size_t>(t)] = 2;
      for (int t : stmt_writes(s))
        if (!first[static_cast<size_t>(t)]) first[static_cast<size_t>(t)] = 1;
    }
    // So must a tile of several buffers: the next iteration's buffer is filled while this one's is read.
    for (size_t t = 0; t < n_tiles; ++t)
      if (first[t] == 2 || (k.tiles[t].stages > 1 && live[t].used())) {
        live[t].start = std::min(live[t].start, body_begin);
        live[t].end = std::max(live[t].end, body_end);
      }
  }
  return live;
}

}  // namespace

int64_t assign_offsets(Kernel& k, Space space) {
  const size_t n_tiles = k.tiles.size();
  std::vector<const Stmt*> order = statements(k);
  std::vector<Interval> live = lifetimes(k);
  for (size_t t = 0; t < n_tiles; ++t)
    if (k.tiles[t].space != space) live[t] = Interval{};  // planned with its own space

  // Buffers: groups of tiles that share space (a tile and the elementwise results written over it).
  std::vector<size_t> group(n_tiles);
  std::iota(group.begin(), group.end(), 0);
  std::vector<Interval> span = live;
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const Stmt& s = *order[pos];
    if (s.kind != StmtKind::Unary && s.kind != StmtKind::Binary) continue;
    const Tile& d = k.tiles[static_cast<size_t>(s.dst)];
    for (int x : {s.a, s.b}) {
      if (x < 0 || x == s.dst) continue;
      const Tile& t = k.tiles[static_cast<size_t>(x)];
      size_t gx = group[static_cast<size_t>(x)], gd = group[static_cast<size_t>(s.dst)];
      auto p = static_cast<int64_t>(pos);
      // A tile of several buffers (pipelined loads) is never written over: which buffer holds the value changes
      // with the iteration.
      if (t.stages != 1 || d.stages != 1) continue;
      // Nor is a swizzled tile: its elements are not where the operand's are.
      if (t.swizzled || d.swizzled) continue;
      if (t.dtype != d.dtype || t.shape != d.shape || t.space != space || d.space != space || span[gx].end != p ||
          live[static_cast<size_t>(s.dst)].start != p || gd != static_cast<size_t>(s.dst))
        continue;
      group[static_cast<size_t>(s.dst)] = gx;
      span[gx].end = std::max(span[gx].end, live[static_cast<size_t>(s.dst)].end);
      break;
    }
  }

  // First fit, largest buffer first.
  std::vector<size_t> roots;
  std::vector<int64_t> size(n_tiles, 0), align(n_tiles, kTileAlign);
  for (size_t t = 0; t < n_tiles; ++t) {
    size_t g = group[t];
    if (!live[t].used()) continue;
    if (size[g] == 0) roots.push_back(g);
    size[g] = std::max(size[g], align_up(k.tiles[t].bytes(), kTileAlign));
    if (k.tiles[t].copy_engine) align[g] = kCopyEngineAlign;
  }
  std::sort(roots.begin(), roots.end(), [&](size_t a, size_t b) {
    return size[a] != size[b] ? size[a] > size[b] : span[a].start < span[b].start;
  });
  std::vector<int64_t> offset(n_tiles, 0);
  std::vector<size_t> placed;
  int64_t peak = 0;
  for (size_t g : roots) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t o : placed)
      if (span[o].overlaps(span[g])) busy.emplace_back(offset[o], offset[o] + size[o]);
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [b, e] : busy) {
      if (at + size[g] <= b) break;
      at = std::max(at, align_up(e, align[g]));
    }
    offset[g] = at;
    placed.push_back(g);
    peak = std::max(peak, at + size[g]);
  }
  for (size_t t = 0; t < n_tiles; ++t)
    if (k.tiles[t].space == space) k.tiles[t].offset = offset[group[t]];
  if (space == Space::shared && k.barriers > 0) {
    // The copy engine's barriers (8 bytes each) after the tiles: live for the whole kernel.
    k.barrier_offset = align_up(peak, 8);
    peak = k.barrier_offset + 8 * k.barriers;
  }
  return peak;
}

bool costs_nothing(Kernel& before, Kernel& after, const targets::Target& target) {
  const int64_t one = assign_offsets(before), two = assign_offsets(after);
  const int64_t blocks = before.grid[0] * before.grid[1] * before.grid[2];
  auto threads = [](const Kernel& k) { return k.block[0] * k.block[1] * k.block[2]; };
  return two <= shared_memory_limit(target) && targets::busy_blocks_per_sm(target, blocks, threads(after), two) >=
                                                   targets::busy_blocks_per_sm(target, blocks, threads(before), one);
}

void change_where_free(Kernel& k, const targets::Target& target, const std::function<bool(const Stmt& s)>& applies,
                       const std::function<void(Kernel& with, Stmt& s)>& change) {
  for (std::vector<Stmt> Kernel::*section : {&Kernel::prologue, &Kernel::body, &Kernel::epilogue})
    for (size_t i = 0; i < (k.*section).size(); ++i) {
      if (!applies((k.*section)[i])) continue;
      Kernel with = k;
      change(with, (with.*section)[i]);
      if (costs_nothing(k, with, target)) k = std::move(with);
    }
}

namespace {

// The shared tiles live together where most shared bytes are live (tiles sharing space counted once), largest
// first.
std::vector<Tile*> live_at_peak(Kernel& k) {
  std::vector<Interval> live = lifetimes(k);
  auto live_at = [&](int64_t pos) {
    std::vector<Tile*> tiles;
    for (size_t t = 0; t < k.tiles.size(); ++t) {
      if (k.tiles[t].space != Space::shared || live[t].start > pos || pos > live[t].end) continue;
      auto same = std::find_if(tiles.begin(), tiles.end(), [&](const Tile* o) { return o->offset == k.tiles[t].offset; });
      if (same == tiles.end()) tiles.push_back(&k.tiles[t]);
    }
    std::stable_sort(tiles.begin(), tiles.end(), [](const Tile* a, const Tile* b) { return a->bytes() > b->bytes(); });
    return tiles;
  };
  std::vector<Tile*> big;
  int64_t best = -1;
  for (int64_t pos = 0; pos < static_cast<int64_t>(statements(k).size()); ++pos) {
    std::vector<Tile*> tiles = live_at(pos);
    int64_t sum = 0;
    for (const Tile* t : tiles) sum += t->bytes();
    if (sum > best) {
      best = sum;
      big = std::move(tiles);
    }
  }
  return big;
}

}  // namespace

void plan_shared_memory(Kernel& k, const targets::Target& target, bool spill) {
  k.smem_bytes = assign_offsets(k, Space::shared);
  int64_t limit = shared_memory_limit(target);
  if (spill) {
    // Spill the largest tile of the peak until the rest fits (an elementwise op whose operand went to the other
    // space simply stops working in place: offsets are planned per space).
    while (k.smem_bytes > limit) {
      std::vector<Tile*> peak = live_at_peak(k);
      MG_CHECK(!peak.empty(), "shared memory over its limit with no shared tile");
      peak.front()->space = Space::global;
      k.smem_bytes = assign_offsets(k, Space::shared);
    }
    k.scratch_bytes = assign_offsets(k, Space::global);
    return;
  }
  if (k.smem_bytes <= limit) return;
  std::vector<Tile*> big = live_at_peak(k);
  std::string largest;
  for (size_t i = 0; i < big.size() && i < 3; ++i) {
    std::string shape;
    for (int64_t d : big[i]->shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    largest += std::string(i ? ", " : "") + big[i]->name + " " + std::string(ir::dtype_name(big[i]->dtype)) + "[" +
               shape + "] (" + std::to_string(big[i]->bytes()) + " B)";
  }
  throw UserError("block op '" + k.from.node + "': its tiles need " + std::to_string(k.smem_bytes) +
                      " bytes of shared memory, but a block may use " + std::to_string(limit) + " on target '" +
                      target.identity.name + "' (smem_per_block_optin); live together: " + largest +
                      (big.size() > 3 ? ", ..." : "") +
                      "; use smaller tiles (a larger grid or more loop iterations)",
                  k.from.loc);
}

}  // namespace morgana::lower
