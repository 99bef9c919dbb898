// Pass 6a of the lowering: chains of statements over rows that warps own, in registers (docs/lowering.md, "The
// thread level").
//
// Attention's inner loop (S = Q·Kᵀ, its row max, exp(S - max), the row sum, P·V, the online-softmax accumulators)
// works on tiles whose rows never meet. When each warp computes whole rows of S on the matrix instruction (a warp
// task of N/n atoms), every later statement of the chain can stay on the rows the warp holds, in its registers:
// elementwise ops, row reductions (the lanes that share a row combine by shuffles), accumulators, and P·V with
// P's C fragments reused as A fragments. No shared memory and no barrier between them.
//
// Such tiles form a family: one instruction's C layout over the same batch and rows, held by the same warps (a
// RegisterLayout of atoms_n = N/n, k_split 1; row vectors [.., M, 1] alongside). The pass starts from every tile a
// statement could compute in registers and drops, until nothing changes, each tile whose writer cannot work in a
// family layout or whose readers cannot take it from registers; then, while the family's live registers exceed
// three quarters of a thread's (or one tile a third), the largest tile live at the peak. What stays becomes
// Space::registers.
#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <set>

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

// Value bit b and lane bit b of a lane layout's weights (lane bits first).
int64_t layout_at(const std::vector<int64_t>& weights, int lane_bits, int64_t lane, int64_t value) {
  const int64_t i = lane | (value << lane_bits);
  int64_t x = 0;
  for (size_t b = 0; b < weights.size(); ++b)
    if ((i >> b) & 1) x += weights[b];
  return x;
}

}  // namespace

bool c_fragments_feed_a(const targets::MatrixInstr& m, int64_t warp_size) {
  if (!m.has_lane_layouts() || m.k % m.n != 0) return false;
  const int lane_bits = std::countr_zero(static_cast<uint64_t>(warp_size));
  const int64_t a_values = targets::MatrixInstr::lane_values(m.a_rows, warp_size);
  const int64_t c_values = targets::MatrixInstr::lane_values(m.c_rows, warp_size);
  // Value v of A must be value w of C atom j of the same lane, with (j, w) the same for every lane: the registers
  // are then a fixed renaming.
  for (int64_t v = 0; v < a_values; ++v) {
    std::optional<std::pair<int64_t, int64_t>> same;
    for (int64_t lane = 0; lane < warp_size; ++lane) {
      const int64_t row = layout_at(m.a_rows, lane_bits, lane, v), col = layout_at(m.a_cols, lane_bits, lane, v);
      std::optional<std::pair<int64_t, int64_t>> found;
      for (int64_t w = 0; w < c_values && !found; ++w)
        if (layout_at(m.c_rows, lane_bits, lane, w) == row && layout_at(m.c_cols, lane_bits, lane, w) == col % m.n)
          found = std::make_pair(col / m.n, w);
      if (!found || (same && *same != *found)) return false;
      same = found;
    }
  }
  return true;
}

namespace {

// A family: the matrix instruction and the tiles' shape without the last dim (batch dims and rows).
struct Family {
  int atom = -1;
  std::vector<int64_t> rows;
  bool operator==(const Family&) const = default;
};

std::vector<int64_t> without_last(const std::vector<int64_t>& shape) {
  return {shape.begin(), shape.end() - 1};
}

class RowRegisters {
 public:
  RowRegisters(Kernel& k, const targets::Target& t) : k_(k), t_(t), warps_(k.block[0] / t.execution.warp_size) {}

  void run() {
    if (warps_ < 1 || k_.block[0] % t_.execution.warp_size != 0) return;
    sections_ = {&k_.prologue, &k_.body, &k_.epilogue};
    for (const auto* list : sections_)
      for (const Stmt& s : *list) order_.push_back(&s);
    for (const Stmt* s : order_)
      if (computable(*s)) candidates_.insert(s->dst);
    // Tiles some other kind of statement writes (loads, concat) stay where they are.
    for (const Stmt* s : order_)
      if (!computable(*s))
        for (int w : stmt_writes(*s)) candidates_.erase(w);
    keep_rooted();
    for (;;) {
      while (drop_unsupported()) {
      }
      const int over = largest_at_register_peak();
      if (over < 0) break;
      candidates_.erase(over);
    }
    apply();
  }

 private:
  const Tile& tile(int i) const { return k_.tiles[static_cast<size_t>(i)]; }
  bool in(int t) const { return t >= 0 && candidates_.count(t) > 0; }
  const targets::MatrixInstr& instr(int atom) const { return t_.matrix[static_cast<size_t>(atom)]; }

  // Only tiles a matmul on a matrix instruction computes, or that are computed from such tiles, can be held in a
  // family's layout; the rest leave the candidates before the sweeps, so that no sweep waits on them.
  void keep_rooted() {
    std::set<int> rooted;
    for (bool grew = true; grew;) {
      grew = false;
      for (const Stmt* s : order_) {
        if (!computable(*s) || !in(s->dst) || rooted.count(s->dst)) continue;
        bool root = s->kind == StmtKind::Matmul;
        for (int t : {s->a, s->b}) root = root || (t >= 0 && t != s->dst && rooted.count(t));
        if (root) grew = rooted.insert(s->dst).second || grew;
      }
    }
    candidates_ = rooted;
  }

  // A statement kind the tile library can run in a register layout, writing a tile that could be a register tile.
  bool computable(const Stmt& s) const {
    switch (s.kind) {
      case StmtKind::Matmul: return s.atom >= 0;
      case StmtKind::Unary:
      case StmtKind::Binary:
      case StmtKind::Reduce:
        break;
      case StmtKind::Accumulate:
        if (s.op != ir::OpCode::acc_sum && s.op != ir::OpCode::acc_max && s.op != ir::OpCode::acc_rescale_sum)
          return false;
        break;
      default: return false;
    }
    // A tile choose_instructions stored in 16 bits for a matmul is computed in f32 like any other in registers (the
    // matmul rounds it to its operand type as it forms the A fragments, as the shared tile's store would have).
    const Tile& d = tile(s.dst);
    return d.space == Space::shared && d.stages == 1 && d.shape.size() >= 2 &&
           (d.dtype == ir::DType::f32 || s.kind == StmtKind::Unary || s.kind == StmtKind::Binary);
  }

  // The f32 registers per thread a tile of `family` holds.
  int64_t registers(const Tile& d, const Family& f) const {
    const targets::MatrixInstr& m = instr(f.atom);
    const int64_t atoms = d.shape.back() == 1 ? 1 : d.shape.back() / m.n;
    return tasks_per_warp(f) * atoms * targets::MatrixInstr::lane_values(m.c_rows, t_.execution.warp_size);
  }
  int64_t tasks(const Family& f) const {
    int64_t n = 1;
    for (size_t i = 0; i + 1 < f.rows.size(); ++i) n *= f.rows[i];
    return n * ((f.rows.back() + instr(f.atom).m - 1) / instr(f.atom).m);
  }
  int64_t tasks_per_warp(const Family& f) const { return (tasks(f) + warps_ - 1) / warps_; }

  // A tile's shape in `family`: whole rows of atoms, or a row vector.
  bool fits(const Tile& d, const Family& f) const {
    const int64_t n = d.shape.back();
    return without_last(d.shape) == f.rows && (n == 1 || n % instr(f.atom).n == 0);
  }

  // The family a statement writing a register tile works in, when it can: its register operands agree on one, its
  // other operands are in shared memory, and the shapes are the family's.
  std::optional<Family> family_of(const Stmt& s, const std::map<int, Family>& known) const {
    const Tile& d = tile(s.dst);
    auto family = [&](int t) -> std::optional<Family> {
      auto it = known.find(t);
      return it == known.end() ? std::nullopt : std::optional<Family>(it->second);
    };
    // A register operand: the same rows, and the dst's shape or the row vector of it (a reduction's whole rows).
    auto operand_fits = [&](int t) {
      const Tile& x = tile(t);
      return without_last(x.shape) == without_last(d.shape) &&
             (x.shape.back() == d.shape.back() || x.shape.back() == 1 || s.kind == StmtKind::Reduce);
    };
    // Operands are read from registers where they are candidates of a known family (the readers' check drops one
    // whose family differs), else from shared memory.
    auto in_registers = [&](int t) { return in(t) && family(t).has_value(); };
    std::optional<Family> f;
    if (s.kind == StmtKind::Matmul) {
      f = Family{s.atom, without_last(d.shape)};  // B always comes from shared memory (the readers' check)
      if (!fits(d, *f) || d.shape.back() == 1) return std::nullopt;
      // Every warp has rows of its own; a matmul of fewer row blocks than warps is better split other ways (pass 6).
      if (tasks(*f) < warps_) return std::nullopt;
      if (in_registers(s.a) && !c_fragments_feed_a(instr(s.atom), t_.execution.warp_size)) return std::nullopt;
      return f;
    }
    std::vector<int> operands = {s.a};
    if (s.b >= 0) operands.push_back(s.b);
    for (int t : operands) {
      if (!in_registers(t)) continue;
      std::optional<Family> ft = family(t);
      if (f && !(*f == *ft)) return std::nullopt;
      f = ft;
    }
    if (!f || !in_registers(s.a)) {
      // Only an elementwise op's second operand may be the one in registers; a reduction or accumulator starts
      // from a register operand.
      if (!f || s.kind == StmtKind::Accumulate || s.kind == StmtKind::Reduce) return std::nullopt;
    }
    if (!fits(d, *f)) return std::nullopt;
    for (int t : operands)
      if (in_registers(t) && !operand_fits(t)) return std::nullopt;
    switch (s.kind) {
      case StmtKind::Reduce: {
        const Tile& x = tile(s.a);
        if (s.dim != static_cast<int>(x.shape.size()) - 1 || s.to != 1 || x.shape.back() == 1) return std::nullopt;
        break;
      }
      case StmtKind::Accumulate:
        if (tile(s.a).shape != d.shape) return std::nullopt;
        if (s.op == ir::OpCode::acc_rescale_sum) {
          // The running max lives beside the accumulator: a row vector of the family.
          const Tile& m = tile(s.b);
          if (without_last(m.shape) != f->rows || m.shape.back() != 1) return std::nullopt;
        }
        break;
      default: break;
    }
    return f;
  }

  // One sweep: families of the candidates in statement order; a candidate whose writer cannot run in registers, or
  // one that a statement reads which cannot take it from registers, is dropped. True when something was dropped.
  bool drop_unsupported() {
    families_.clear();
    std::set<int> drop;
    // Twice over the statements: a loop body's accumulators read tiles written later in the same body.
    for (int round = 0; round < 2; ++round)
      for (const Stmt* s : order_) {
        if (!computable(*s) || !in(s->dst)) continue;
        std::optional<Family> f = family_of(*s, families_);
        if (!f) {
          if (round == 1) drop.insert(s->dst);
          continue;
        }
        auto [it, fresh] = families_.emplace(s->dst, *f);
        if (!fresh && !(it->second == *f)) drop.insert(s->dst);  // two writers disagree
      }
    for (const Stmt* s : order_) {
      for (int t : stmt_reads(*s)) {
        if (!in(t)) continue;
        // A register statement of the same family reads it, or a store.
        const bool same = in(s->dst) && families_.count(t) && families_.count(s->dst) &&
                          families_.at(t) == families_.at(s->dst);
        bool ok = false;
        switch (s->kind) {
          case StmtKind::Store: ok = true; break;
          case StmtKind::Matmul: ok = t == s->a && t != s->b && same; break;
          case StmtKind::Accumulate: ok = same && t != s->state; break;
          case StmtKind::Unary:
          case StmtKind::Binary:
          case StmtKind::Reduce: ok = same; break;
          default: break;
        }
        // The accumulator itself (acc_rescale_sum reads its dst and its running max): goes with the dst.
        if (t == s->dst || t == s->state) ok = in(s->dst);
        if (!ok) drop.insert(t);
      }
    }
    for (int t : drop) candidates_.erase(t);
    return !drop.empty();
  }

  // Liveness over the statements in order (the body's positions count for every iteration: a tile it reads before
  // writing, or that lives across its ends, is live through the whole body). Registers of the statement's dst and
  // of tiles read later count at each statement; an operand that dies there is reused by the compiler. Returns the
  // largest candidate live where targets::register_tiles_fit fails (one tile past a third of a thread's registers
  // crowds out its A fragments and the matmul's prefetched B fragments), or -1.
  int largest_at_register_peak() const {
    const int64_t n = static_cast<int64_t>(order_.size());
    const int64_t body_begin = static_cast<int64_t>(k_.prologue.size()),
                  body_end = body_begin + static_cast<int64_t>(k_.body.size());
    auto span = access_spans(order_, [&](int t) { return families_.count(t) > 0; });  // first write, last read
    for (auto& [t, sp] : span) {
      const bool touches_body = sp.first < body_end && sp.second >= body_begin;
      bool carried = sp.first < body_begin || sp.second >= body_end;
      for (int64_t i = body_begin; i < body_end && touches_body && !carried; ++i) {
        const Stmt& s = *order_[static_cast<size_t>(i)];
        carried = s.kind == StmtKind::Accumulate && (s.dst == t || s.state == t);
        carried = carried || (s.kind == StmtKind::Matmul && s.accumulate && s.dst == t);
      }
      if (touches_body && carried) sp = {std::min(sp.first, body_begin), std::max(sp.second, body_end - 1)};
    }
    // The statement's writes, read once per position.
    auto live = [&, at = int64_t{-1}, writes = std::vector<int>{}](int64_t i, int t, const AccessSpan& sp) mutable {
      if (i != at) writes = stmt_writes(*order_[static_cast<size_t>(at = i)]);
      return std::count(writes.begin(), writes.end(), t) > 0 || (sp.first <= i && sp.second > i);
    };
    return lower::largest_at_register_peak(
        n, span, live, [&](int t) { return registers(tile(t), families_.at(t)); }, t_);
  }

  void apply() {
    if (families_.empty()) return;
    for (const auto& [t, f] : families_) {
      Tile& d = k_.tiles[static_cast<size_t>(t)];
      d.space = Space::registers;
      d.offset = 0;
      d.dtype = ir::DType::f32;
      d.swizzled = false;
      const int64_t n = d.shape.back();
      d.layout = {f.atom, n == 1 ? 1 : n / instr(f.atom).n, 1};
    }
    for (auto* list : sections_)
      for (Stmt& s : *list) {
        // Register statements go element by element in the layout: no warp-wide folds. A store keeps the alignment
        // choose_instructions proved: mg::store_regs writes the neighbours a lane holds together where it allows.
        if (s.kind == StmtKind::Reduce && families_.count(s.dst)) s.by_warps = false;
        if (s.kind == StmtKind::Matmul && families_.count(s.dst)) {
          s.atoms_n = tile(s.dst).layout.atoms_n;
          s.k_split = 1;
        }
        if (s.kind == StmtKind::Accumulate && s.state >= 0 && families_.count(s.dst)) {
          Tile& m = k_.tiles[static_cast<size_t>(s.state)];
          m.space = Space::registers;
          m.offset = 0;
          m.layout = {families_.at(s.dst).atom, 1, 1};
        }
      }
  }

  Kernel& k_;
  const targets::Target& t_;
  const int64_t warps_;
  std::vector<std::vector<Stmt>*> sections_;
  std::vector<const Stmt*> order_;
  std::set<int> candidates_;
  std::map<int, Family> families_;  // the candidates whose writers can work in registers, and their family
};

}  // namespace

void keep_rows_in_registers(Kernel& k, const targets::Target& target) { RowRegisters(k, target).run(); }

}  // namespace morgana::lower
