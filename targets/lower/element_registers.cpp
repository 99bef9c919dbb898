// Pass 6d of the lowering (docs/lowering.md, "The thread level"): tiles held in registers by the threads that
// compute their elements.
//
// An elementwise statement over shared memory deals its result's elements to threads in runs along the last dim
// (mg::unary, mg::binary): run i of V neighbours to thread i % threads. A chain of such statements over one shape
// (nTrans: rms_norm(H), sub, mul, add, rms_norm) needs no shared memory at all when every tile of the chain stays
// with the threads that compute it: loads go from global memory straight to each thread's runs, elementwise
// statements read registers (or a broadcast operand from shared memory), stores write each thread's runs, and a
// reduction of whole rows exchanges one value per warp and row through a small shared tile (mg::regs_reduce_rows).
//
// The pass starts from every shared tile such statements could hold, drops until nothing changes each tile with a
// writer or reader that cannot work in the layout, then, while the live tiles pass targets::register_tiles_fit, the
// largest one live at the peak. What stays becomes Space::registers with RegisterLayout::elements.
#include <algorithm>
#include <map>
#include <set>

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

class ElementTiles {
 public:
  ElementTiles(Kernel& k, const targets::Target& t) : k_(k), t_(t) {
    for (auto* list : {&k_.prologue, &k_.body, &k_.epilogue})
      for (Stmt& s : *list) order_.push_back(&s);
  }

  void run() {
    if (k_.block[0] % t_.execution.warp_size != 0) return;
    for (size_t i = 0; i < k_.tiles.size(); ++i) {
      const Tile& x = k_.tiles[i];
      if (x.space == Space::shared && !x.swizzled && !x.copy_engine && x.stages == 1 && !x.shape.empty())
        candidates_.insert(static_cast<int>(i));
    }
    while (drop_unfit()) {
    }
    for (int t = largest_at_register_peak(); t >= 0; t = largest_at_register_peak()) {
      candidates_.erase(t);
      while (drop_unfit()) {
      }
    }
    apply();
  }

 private:
  const Tile& tile(int t) const { return k_.tiles[static_cast<size_t>(t)]; }
  bool in(int t) const { return candidates_.count(t) > 0; }

  static int64_t run_length(const Tile& x) { return targets::elementwise_run(x.shape.back()); }
  int64_t registers(const Tile& x) const { return targets::element_registers(x.numel(), x.shape.back(), k_.block[0]); }

  // Whether statement s can take candidate t (which it reads or writes) in the layout, the other candidates as
  // they stand (a tile that cannot be one drops out by its own accesses, and its readers and writers are judged
  // again).
  bool fits(const Stmt& s, int t) const {
    const Tile& x = tile(t);
    switch (s.kind) {
      case StmtKind::Load:  // from global memory straight into the runs, not pipelined
        return s.dst == t && s.ahead == 0 && x.stages == 1 && s.tensor_map < 0;
      case StmtKind::Store: return true;
      case StmtKind::Unary:
      case StmtKind::Binary:
        // The result in the layout, its operands from registers of its shape or from shared memory (read at each
        // element, broadcast along their 1-dims; unswizzled). An operand in the layout needs its reader's.
        if (s.dst == t) {
          for (int o : {s.a, s.b})
            if (o >= 0 && !in(o) && (tile(o).space != Space::shared || tile(o).swizzled)) return false;
          return true;
        }
        return in(s.dst) && tile(s.dst).shape == x.shape;
      case StmtKind::Reduce:  // whole rows into a shared result, each warp's runs inside one row
        return s.a == t && !s.accumulate && reduces_whole_rows(k_, s) && tile(s.dst).space == Space::shared &&
               x.shape.back() % (run_length(x) * t_.execution.warp_size) == 0;
      default: return false;
    }
  }

  bool drop_unfit() {
    std::set<int> drop;
    for (const Stmt* s : order_) {
      for (int t : stmt_tiles(*s))
        if (in(t) && !fits(*s, t)) drop.insert(t);
    }
    for (int t : drop) candidates_.erase(t);
    return !drop.empty();
  }

  // Liveness over the statements in order, from a tile's first access to its last; a tile the body touches lives
  // through the whole body. Returns the largest candidate live where the sum or the tile does not fit, or -1.
  int largest_at_register_peak() const {
    const auto n = static_cast<int64_t>(order_.size());
    const auto body_begin = static_cast<int64_t>(k_.prologue.size()),
               body_end = body_begin + static_cast<int64_t>(k_.body.size());
    auto span = access_spans({order_.begin(), order_.end()}, [&](int t) { return in(t); });
    for (auto& [t, sp] : span)
      if (sp.first < body_end && sp.second >= body_begin)
        sp = {std::min(sp.first, body_begin), std::max(sp.second, body_end - 1)};
    return lower::largest_at_register_peak(
        n, span, [](int64_t i, int, const AccessSpan& sp) { return sp.first <= i && sp.second >= i; },
        [&](int t) { return registers(tile(t)); }, t_);
  }

  void apply() {
    if (candidates_.empty()) return;
    for (int t : candidates_) {
      Tile& x = k_.tiles[static_cast<size_t>(t)];
      x.space = Space::registers;
      x.offset = 0;
      x.dtype = ir::DType::f32;
      x.layout = RegisterLayout{};
      x.layout.elements = true;
    }
    const int64_t warp = t_.execution.warp_size;
    for (Stmt* s : order_) {
      if (s->kind == StmtKind::Load && in(s->dst)) {
        s->async = false;
        s->batch = false;
      }
      if (s->kind == StmtKind::Reduce && in(s->a)) {
        // One f32 per warp and run position: W per row, rows in order (mg::regs_reduce_rows).
        const Tile& x = tile(s->a);
        Tile parts = parts_tile(k_, *s, {x.numel() / x.shape.back(), x.shape.back() / (run_length(x) * warp)});
        s->by_warps = false;
        s->parts = static_cast<int>(k_.tiles.size());
        k_.tiles.push_back(std::move(parts));
      }
    }
    // Waits for asynchronous copies that no longer exist.
    bool async = false;
    for (const Stmt* s : order_) async = async || (s->kind == StmtKind::Load && (s->async || s->tensor_map >= 0));
    if (!async)
      for (auto* list : {&k_.prologue, &k_.body, &k_.epilogue})
        std::erase_if(*list, [](const Stmt& s) { return s.kind == StmtKind::AsyncWait; });
  }

  Kernel& k_;
  const targets::Target& t_;
  std::vector<Stmt*> order_;
  std::set<int> candidates_;
};

}  // namespace

void keep_elements_in_registers(Kernel& k, const targets::Target& target) { ElementTiles(k, target).run(); }

}  // namespace morgana::lower
