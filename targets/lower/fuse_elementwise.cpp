// Pass 3a of the lowering: elementwise unary ops folded into the statement next to them. A statement over shared
// memory is a pass over its tile ended by a barrier, so a chain like rms_norm's (square, sum, scale, add eps, rsqrt,
// multiply: six passes) costs six barriers and five round trips through shared memory where two passes do the same
// work. Two rules, applied until neither applies (docs/lowering.md "Elementwise maps"):
//   - into the writer: a unary whose operand was last written by an elementwise statement or a reduction of the same
//     section, and is read by nothing else (or is overwritten in place), becomes a post map of that writer, which
//     then writes the unary's result;
//   - into the reader: a unary whose result has one reader, a later elementwise statement or reduction of the same
//     section taking it as operand a, becomes a pre map of that reader, which reads the unary's operand instead.
// Values are the same, rounded the same (each map is one f32 step, as the separate statements were).
#include <algorithm>
#include <optional>

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

bool maps_fold(const Stmt& s) {
  return s.kind == StmtKind::Unary || s.kind == StmtKind::Binary || s.kind == StmtKind::Reduce;
}

// u's op with its own maps, in the order they apply.
std::vector<ElementMap> as_maps(const Stmt& u) {
  std::vector<ElementMap> m = u.pre;
  m.push_back({u.op, u.scalar});
  m.insert(m.end(), u.post.begin(), u.post.end());
  return m;
}

// The origin of a statement that does the work of two: the first's node, both statements' text.
Origin joined(const Origin& first, const Origin& second) {
  Origin o = first;
  if (second.text != first.text) o.text += "; " + second.text;
  return o;
}

class Fuser {
 public:
  explicit Fuser(Kernel& k) : k_(k) {}

  void run() {
    for (bool changed = true; changed;) {
      changed = false;
      for (auto* section : {&k_.prologue, &k_.body, &k_.epilogue})
        for (size_t u = 0; u < section->size() && !changed; ++u)
          changed = into_writer(*section, u) || into_reader(*section, u);
    }
    drop_unused_tiles(k_);
  }

 private:
  // Statements of the whole kernel that read tile t (each counted once, however often it runs), and that write it.
  int readers(int t) const { return static_cast<int>(tile_uses(k_, t).readers.size()); }
  int writers(int t) const { return static_cast<int>(tile_uses(k_, t).writers.size()); }

  bool into_writer(std::vector<Stmt>& sec, size_t u) {
    const Stmt& U = sec[u];
    if (U.kind != StmtKind::Unary) return false;
    const int src = U.a, dst = U.dst;
    std::optional<size_t> w;
    for (size_t i = u; i-- > 0;)
      if (stmt_touches(sec[i], src)) {
        w = i;
        break;
      }
    if (!w) return false;
    Stmt& W = sec[*w];
    if (!maps_fold(W) || W.dst != src) return false;
    // The writer's value must not be needed as it was: read only here, or overwritten in place by the unary.
    if (dst != src && readers(src) != 1) return false;
    // The writer now writes dst earlier: nothing in between may touch dst, and the writer must not read it.
    for (size_t i = *w + 1; i < u; ++i)
      if (stmt_touches(sec[i], dst)) return false;
    if (dst != src && std::ranges::count(stmt_reads(W), dst) > 0) return false;
    const std::vector<ElementMap> maps = as_maps(U);
    W.post.insert(W.post.end(), maps.begin(), maps.end());
    W.dst = dst;
    W.from = joined(W.from, U.from);
    sec.erase(sec.begin() + static_cast<std::ptrdiff_t>(u));
    return true;
  }

  bool into_reader(std::vector<Stmt>& sec, size_t u) {
    const Stmt& U = sec[u];
    if (U.kind != StmtKind::Unary || U.a == U.dst || readers(U.dst) != 1 || writers(U.dst) != 1) return false;
    const int src = U.a, mid = U.dst;
    for (size_t r = u + 1; r < sec.size(); ++r) {
      Stmt& R = sec[r];
      if (!stmt_touches(R, mid)) {
        if (stmt_writes_tile(R, src)) return false;  // the reader would see a later value of the unary's operand
        continue;
      }
      if (!maps_fold(R) || R.a != mid || (R.kind == StmtKind::Binary && R.b == mid) || R.dst == mid) return false;
      std::vector<ElementMap> maps = as_maps(U);
      maps.insert(maps.end(), R.pre.begin(), R.pre.end());
      R.pre = std::move(maps);
      R.a = src;
      R.from = joined(U.from, R.from);
      sec.erase(sec.begin() + static_cast<std::ptrdiff_t>(u));
      return true;
    }
    return false;
  }

  Kernel& k_;
};

}  // namespace

void fuse_elementwise(Kernel& k) { Fuser(k).run(); }

}  // namespace morgana::lower
