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
// Accumulators over elements (acc_sum, acc_max, acc_rescale_sum with a running max per element) fold each
// thread's runs into its registers across the loop, and a loop's own loads may go straight into the runs too: a
// split-KV or split-K combine then loads every iteration's partial results at once (the loop is unrolled, so the
// compiler issues all of its loads before the first is used) and folds them without shared memory or barriers,
// instead of a pipeline of asynchronous copies with a barrier every iteration. Loop loads are taken only where no
// asynchronous copy is left in the kernel (the pipeline's waits count batches) and every iteration's values fit
// half a thread's registers together. Runs are shortened where the block has more threads than runs
// (targets::element_run): a combine's fold is its whole work, and in runs of eight a few threads did all of it.
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
  ElementTiles(Kernel& k, const LoweredProgram& p, const targets::Target& t) : k_(k), p_(p), t_(t) {
    index_statements();
  }

  void run() {
    if (k_.block[0] % t_.execution.warp_size != 0) return;
    for (size_t i = 0; i < k_.tiles.size(); ++i) {
      const Tile& x = k_.tiles[i];
      if (x.space == Space::shared && !x.swizzled && !x.copy_engine && !x.shape.empty() &&
          (x.stages == 1 || loop_load_fits(static_cast<int>(i))))
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

  int64_t run_length(const Tile& x) const { return targets::element_run(x.numel(), x.shape.back(), k_.block[0]); }
  int64_t registers(const Tile& x) const { return targets::element_registers(x.numel(), x.shape.back(), k_.block[0]); }

  // Whether statement s can take candidate t (which it reads or writes) in the layout, the other candidates as
  // they stand (a tile that cannot be one drops out by its own accesses, and its readers and writers are judged
  // again).
  bool fits(const Stmt& s, int t) const {
    const Tile& x = tile(t);
    switch (s.kind) {
      case StmtKind::Load:  // from global memory straight into the runs (a loop's pipelined or preloaded loads:
                            // loop_load_fits vetted them, and unpipeline makes them one per iteration)
        return s.dst == t && s.tensor_map < 0 && (x.stages > 1 || (s.iterations == 1 && s.ahead == 0));
      case StmtKind::Accumulate:
        // Each thread folds its runs: the accumulator (and an acc_rescale_sum's running max, one per element) in
        // the layout, the folded tile from registers of its shape or read from shared memory at each element, an
        // acc_rescale_sum's maxima too (broadcast along their 1-dims).
        if (s.dst == t || s.state == t)
          return in(s.dst) && (s.state < 0 || in(s.state)) && operand_fits(s.a) &&
                 (s.b < 0 || operand_fits(s.b));
        return in(s.dst) && reads_in_layout(s.dst, x);
      case StmtKind::Store: return true;
      case StmtKind::Unary:
      case StmtKind::Binary:
        // The result in the layout, its operands from registers of its shape or from shared memory (read at each
        // element, broadcast along their 1-dims; unswizzled). An operand in the layout needs its reader's.
        if (s.dst == t) return operand_fits(s.a) && (s.b < 0 || operand_fits(s.b));
        return in(s.dst) && reads_in_layout(s.dst, x);
      case StmtKind::Reduce:  // whole rows into a shared result, each warp's runs inside one row
        return s.a == t && !s.accumulate && reduces_whole_rows(k_, s) && tile(s.dst).space == Space::shared &&
               x.shape.back() % (run_length(x) * t_.execution.warp_size) == 0;
      default: return false;
    }
  }

  // An operand of a statement whose result is in the layout: registers (as reads_in_layout says, which the operand's
  // own check asks), or a shared unswizzled tile read at each element (mg::smem).
  bool operand_fits(int o) const { return in(o) || (tile(o).space == Space::shared && !tile(o).swizzled); }

  // Whether a statement whose result `dst` is in the layout can read register tile x where each thread computes:
  // x of the result's shape (each thread reads its own runs), or x of one element, which every thread holds (a
  // thread without a run of its own computes on a copy of the last: Elements::computed_run), read broadcast. A
  // split-KV combine of one row per block folds its row's running sums and maxima so, every thread the same
  // scalars, instead of one thread through shared memory behind a barrier (H100: gqa_h8_d128_k2048_scaled's
  // combine 4.2 -> 3.6 us, ncu; bench/notes-fast-kernels-2.md, session 19).
  bool reads_in_layout(int dst, const Tile& x) const { return tile(dst).shape == x.shape || x.numel() == 1; }

  // Whether tile t, which the loop's loads fill in buffers (pipelined or preloaded: asynchronous copies, or one
  // synchronous load of every iteration's tile, mg::load_iterations), could take its iterations' loads straight
  // into registers (targets::loop_loads_fit_registers).
  bool loop_load_fits(int t) const {
    const Tile& x = tile(t);
    if (!targets::loop_loads_fit_registers(t_, k_.loop, registers(x), ir::dtype_bytes(x.dtype))) return false;
    bool loaded = false;
    for (const Stmt* s : order_) {
      if (s->kind != StmtKind::Load || s->dst != t) continue;
      const bool copied = (s->async || s->batch) && s->iterations == 1, preloaded = s->iterations == k_.loop;
      if (!(copied || preloaded) || s->tensor_map >= 0) return false;
      loaded = true;
    }
    return loaded;
  }

  bool drop_unfit() {
    std::set<int> drop;
    for (const Stmt* s : order_) {
      for (int t : stmt_tiles(*s))
        if (in(t) && !fits(*s, t)) drop.insert(t);
    }
    // Loop loads leave the pipeline only where no asynchronous copy stays: its waits count the batches.
    bool async_stays = false;
    for (const Stmt* s : order_)
      async_stays = async_stays || (s->kind == StmtKind::Load && (s->async || s->batch || s->tensor_map >= 0) &&
                                    !(in(s->dst) && drop.count(s->dst) == 0));
    if (async_stays)
      for (int t : candidates_)
        if (tile(t).stages > 1) drop.insert(t);
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
    unpipeline();
    for (Stmt* s : order_)
      if (s->kind == StmtKind::Accumulate && s->state >= 0 && in(s->dst))
        k_.tiles[static_cast<size_t>(s->state)].shape = tile(s->dst).shape;  // a running max per element
    for (Stmt* s : order_) {
      // A thread's global accesses move whole parts of its runs.
      const int tile_of = s->kind == StmtKind::Load ? s->dst : s->kind == StmtKind::Store ? s->a : -1;
      if (tile_of >= 0 && in(tile_of))
        s->vector_bytes = std::min(s->vector_bytes, run_length(tile(tile_of)) *
                                                        ir::dtype_bytes(p_.tensors[static_cast<size_t>(s->tensor)].dtype));
    }
    for (int t : candidates_) {
      Tile& x = k_.tiles[static_cast<size_t>(t)];
      const int64_t run = run_length(x);
      x.space = Space::registers;
      x.offset = 0;
      x.dtype = ir::DType::f32;
      x.layout = RegisterLayout{};
      x.layout.elements = true;
      x.layout.run = run;
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

  // The loop loads of the tiles taken from a pipeline (or a preload) become one plain load per iteration at the
  // body's start, and the loop is unrolled so that all of them go out before the first is used.
  void unpipeline() {
    std::set<int> looped;
    for (int t : candidates_)
      if (tile(t).stages > 1) looped.insert(t);
    if (looped.empty()) return;
    std::vector<Stmt> loads;
    for (int t : looped) {
      const auto first = std::find_if(order_.begin(), order_.end(),
                                      [&](const Stmt* s) { return s->kind == StmtKind::Load && s->dst == t; });
      Stmt load = **first;
      load.ahead = 0;
      load.iterations = 1;
      loads.push_back(std::move(load));
      k_.tiles[static_cast<size_t>(t)].stages = 1;
    }
    for (auto* list : {&k_.prologue, &k_.body})
      std::erase_if(*list, [&](const Stmt& s) { return s.kind == StmtKind::Load && looped.count(s.dst) > 0; });
    k_.body.insert(k_.body.begin(), loads.begin(), loads.end());
    k_.unroll = true;
    // The barrier that closed the pipeline's prologue has nothing left to close when no load stays there.
    if (std::none_of(k_.prologue.begin(), k_.prologue.end(), [](const Stmt& s) { return s.kind == StmtKind::Load; }))
      std::erase_if(k_.prologue, [](const Stmt& s) { return s.kind == StmtKind::Barrier; });
    index_statements();  // the sections changed under the pointers
  }

  // order_: every statement of the kernel in execution order (prologue, body, epilogue).
  void index_statements() {
    order_.clear();
    for (auto* list : {&k_.prologue, &k_.body, &k_.epilogue})
      for (Stmt& s : *list) order_.push_back(&s);
  }

  Kernel& k_;
  const LoweredProgram& p_;
  const targets::Target& t_;
  std::vector<Stmt*> order_;
  std::set<int> candidates_;
};

}  // namespace

void keep_elements_in_registers(Kernel& k, const LoweredProgram& p, const targets::Target& target) {
  ElementTiles(k, p, target).run();
}

}  // namespace morgana::lower
