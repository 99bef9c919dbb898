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
// An accumulator over elements (acc_sum, acc_max, acc_rescale_sum with a running max per element) of a tile the
// loop computes (a flash kernel's row sums and P·V) folds each thread's runs into its registers across the loop. An
// accumulator of loaded tiles (a split-KV or split-K combine) stays in shared memory: there the fold is the whole
// work, and the shared deal spreads it over a thread per element where the runs would leave it to a few threads
// (measured on the H100: combines of 4-16 iterations 0.3-3.0 us slower with runs in registers, loads included).
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
      case StmtKind::Accumulate:
        // Each thread folds its runs: the accumulator (and an acc_rescale_sum's running max, one per element) in
        // the layout, the folded tile from registers of its shape or read from shared memory at each element, an
        // acc_rescale_sum's maxima too (broadcast along their 1-dims).
        if (s.dst == t || s.state == t)
          return in(s.dst) && (s.state < 0 || in(s.state)) && !loaded(s.a) && operand_fits(s.a) &&
                 (s.b < 0 || operand_fits(s.b));
        return in(s.dst) && tile(s.dst).shape == x.shape;
      case StmtKind::Store: return true;
      case StmtKind::Unary:
      case StmtKind::Binary:
        // The result in the layout, its operands from registers of its shape or from shared memory (read at each
        // element, broadcast along their 1-dims; unswizzled). An operand in the layout needs its reader's.
        if (s.dst == t) return operand_fits(s.a) && (s.b < 0 || operand_fits(s.b));
        return in(s.dst) && tile(s.dst).shape == x.shape;
      case StmtKind::Reduce:  // whole rows into a shared result, each warp's runs inside one row
        return s.a == t && !s.accumulate && reduces_whole_rows(k_, s) && tile(s.dst).space == Space::shared &&
               x.shape.back() % (run_length(x) * t_.execution.warp_size) == 0;
      default: return false;
    }
  }

  // An operand of a statement whose result is in the layout: registers (of the result's shape, which the operand's
  // own check asks), or a shared unswizzled tile read at each element (mg::smem).
  bool operand_fits(int o) const { return in(o) || (tile(o).space == Space::shared && !tile(o).swizzled); }

  // Whether tile t is written by a Load (a loaded tile, not one the block computes).
  bool loaded(int t) const {
    return std::any_of(order_.begin(), order_.end(),
                       [&](const Stmt* s) { return s->kind == StmtKind::Load && s->dst == t; });
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
      if (s->kind == StmtKind::Accumulate && s->state >= 0 && in(s->dst))
        k_.tiles[static_cast<size_t>(s->state)].shape = tile(s->dst).shape;  // a running max per element
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
