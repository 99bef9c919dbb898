// Pass 6i of the lowering: QK-norm's query factors from the fragments the matrix instruction is fed
// (docs/lowering.md, "Row norms from the fragments").
//
// An rms_norm over a matmul operand's contraction dim is lowered as its sum of squares, a factor per row (A) or
// column (B), and the product scaled by it (ir::norm_scaled_after): a reduction over the operand's shared tile behind
// a barrier, then a multiply of the product. Every element of A's rows also goes through the fragments of the warp
// task that owns those rows, over the whole of K, so a row's sum of squares can be taken there: a multiply-add per
// fragment value, the lanes that share a row combined by shuffles, the product scaled in registers
// (mg::Fragments::mma_row_normed). Hand-written first on qknorm_h8_d128_k1024's pick (H100, bench/probes/harness.py):
// 8.97 -> 8.02 us a pass; Q's reduction (whole short rows folded by shuffle trees) had been 0.9 us of the score
// kernel's chain.
//
// Only A's rows: B's columns are every warp's (each task of a row block spans them all), so each warp would fold all
// of K's squares again where the reduction spreads them over the block once, and the column factors need a shuffle
// from the lane that holds each column. Tried on the H100: qknorm_b1's flash kernel took K's column sums in its loop
// 8.29 -> 9.51 us a pass (255 registers, from 190), qknorm_h8's pick gained nothing over rows alone.
//
// Taken for a matmul on a matrix instruction into a register tile of whole K (no K split, not accumulating, no A
// scaling) from a 16-bit shared A, on a target whose A layout follows its C rows (c_fragments_feed_a), where a chain of
// multiplies reads the product (each the only reader of the one before, each by an rms factor) and one of them is by
// the factor of A's rows, written only by a sum of squares of A over its last dim in the same section before the
// matmul and read only by that multiply.

#include <algorithm>

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

class FragmentNorms {
 public:
  FragmentNorms(Kernel& k, const targets::Target& t) : k_(k), t_(t) {}

  void run() {
    for (std::vector<Stmt>* section : {&k_.prologue, &k_.body, &k_.epilogue})
      for (size_t i = 0; i < section->size(); ++i) i = take_row_norm(*section, i);
    drop_unused_tiles(k_);
  }

 private:
  const Tile& tile(int i) const { return k_.tiles[static_cast<size_t>(i)]; }

  bool candidate(const Stmt& m) const {
    if (m.kind != StmtKind::Matmul || m.atom < 0 || m.k_split != 1 || m.accumulate || m.scale >= 0 || m.norm_rows)
      return false;
    const Tile &c = tile(m.dst), &a = tile(m.a);
    return c.space == Space::registers && !c.layout.fold && !c.layout.elements && c.layout.k_split == 1 &&
           a.space == Space::shared && (a.dtype == ir::DType::f16 || a.dtype == ir::DType::bf16) &&
           tile(m.b).space == Space::shared &&
           c_fragments_feed_a(t_.matrix[static_cast<size_t>(m.atom)], t_.execution.warp_size);
  }

  // The one statement of the kernel that reads tile t, or nullptr.
  const Stmt* only_reader(int t) const {
    TileUses u = tile_uses(k_, t);
    return u.readers.size() == 1 ? u.readers[0] : nullptr;
  }

  // For a multiply `s` of `product` by an rms factor: the sum of squares that wrote the factor, or nullptr.
  const Stmt* factor_sum(const Stmt& s, int product) const {
    if (s.kind != StmtKind::Binary || s.op != ir::OpCode::mul || s.a != product || s.b < 0 || !s.pre.empty() ||
        !s.post.empty())
      return nullptr;
    const Tile &from = tile(product), &to = tile(s.dst);
    if (to.space != Space::registers || to.shape != from.shape || to.layout.atom != from.layout.atom ||
        to.layout.atoms_n != from.layout.atoms_n || to.layout.fold || to.layout.elements || to.layout.k_split != 1)
      return nullptr;
    TileUses f = tile_uses(k_, s.b);
    if (f.writers.size() != 1 || f.readers.size() != 1) return nullptr;
    const Stmt& r = *f.writers[0];
    if (r.kind != StmtKind::Reduce || r.op != ir::OpCode::reduce_sum || r.accumulate || r.to != 1 ||
        r.pre.size() != 1 || r.pre[0].op != ir::OpCode::square)
      return nullptr;
    return &r;
  }

  // Takes the row norm of section[i] if it can; returns the matmul's index after that.
  size_t take_row_norm(std::vector<Stmt>& section, size_t i) {
    if (!candidate(section[i])) return i;
    const Stmt& m = section[i];
    const int rank = static_cast<int>(tile(m.a).shape.size());
    // The chain of multiplies by rms factors after the matmul; the one by A's row factor.
    std::vector<const Stmt*> chain;
    const Stmt *rows = nullptr, *sum = nullptr;
    for (const Stmt* s = only_reader(m.dst); s != nullptr; s = only_reader(s->dst)) {
      const Stmt* r = factor_sum(*s, chain.empty() ? m.dst : chain.back()->dst);
      if (r == nullptr) break;
      chain.push_back(s);
      if (!rows && r->a == m.a && r->dim == rank - 1) {
        rows = s;
        sum = r;
      }
    }
    if (!rows) return i;
    // Both in this section, the sum before the matmul with nothing between that writes A, the multiply after it.
    const auto at = static_cast<std::ptrdiff_t>(i), p_mul = rows - section.data(), p_sum = sum - section.data();
    const auto n = static_cast<std::ptrdiff_t>(section.size());
    if (p_mul <= at || p_mul >= n || p_sum < 0 || p_sum >= at) return i;
    for (std::ptrdiff_t x = p_sum + 1; x < at; ++x)
      if (stmt_writes_tile(section[static_cast<size_t>(x)], m.a)) return i;
    // The multiply goes: what it wrote, its predecessor in the chain (or the matmul) writes now.
    const size_t q = static_cast<size_t>(std::find(chain.begin(), chain.end(), rows) - chain.begin());
    const std::ptrdiff_t writer = q == 0 ? at : chain[q - 1] - section.data();
    if (writer < at || writer >= p_mul) return i;
    section[static_cast<size_t>(writer)].dst = rows->dst;
    section[i].norm_rows = sum->post;
    std::vector<Stmt> kept;
    size_t now = 0;
    for (std::ptrdiff_t s = 0; s < n; ++s) {
      if (s == p_mul || s == p_sum) continue;
      if (s == at) now = kept.size();
      kept.push_back(std::move(section[static_cast<size_t>(s)]));
    }
    section = std::move(kept);
    return now;
  }

  Kernel& k_;
  const targets::Target& t_;
};

}  // namespace

void norms_from_fragments(Kernel& k, const targets::Target& target) { FragmentNorms(k, target).run(); }

}  // namespace morgana::lower
