// Pass 6g of the lowering: products accumulated into their online-softmax accumulator by the matrix instruction
// (docs/lowering.md, "Products that go straight into the accumulator").
//
// Flash attention's acc_rescale_sum(P·V, m) as written computes P·V into a register tile of its own, then
// O = O * exp(M - M') + (P·V) * exp(m - M'). Since exp(m - M') is one factor per row, (P·V) * exp(m - M') is
// (P * exp(m - M'))·V: the statement can rescale O first and let the matrix instruction add P·V into O, P's rows
// scaled as they become A fragments. The product's own tile goes (at d = 128, 64 registers a thread, which took a
// flash kernel to the 255-register cap), and so do its additions into O. Taken for a matmul on a matrix instruction
// with its A operand in registers (the scaling happens where C fragments are renamed to A fragments) whose product
// only that accumulator reads, where nothing between the two touches the accumulator, its running max or m, and
// where A is no wider than the product (below).

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

bool same_fragments(const Tile& x, const Tile& y) {
  return x.space == Space::registers && y.space == Space::registers && x.shape == y.shape &&
         x.layout.atom >= 0 && !x.layout.fold && !x.layout.elements && !y.layout.fold && !y.layout.elements &&
         x.layout.atom == y.layout.atom && x.layout.atoms_n == y.layout.atoms_n && x.layout.k_split == 1 &&
         y.layout.k_split == 1;
}

// The accumulator statement after body[i] (a matmul) that can take its product, or -1.
int taking_accumulator(const Kernel& k, size_t i) {
  const Stmt& m = k.body[i];
  if (m.kind != StmtKind::Matmul || m.atom < 0 || m.k_split != 1 || m.accumulate || m.scale >= 0) return -1;
  const Tile &product = k.tiles[static_cast<size_t>(m.dst)], &a = k.tiles[static_cast<size_t>(m.a)];
  if (a.space != Space::registers || tile_uses(k, m.dst).readers.size() != 1) return -1;
  // Scaling A's rows costs a multiply per element of A (rows x K), where the whole statement rescales the product
  // (rows x N, a multiply and a fused multiply-add each): taken where K <= N, so that it never does more arithmetic.
  // (H200, the same picks both ways: 64 keys into d = 80 and 128 into 128 ran 1.5% and 10% faster; 128 keys into
  // d = 64 or 96, 1-2.7% slower.)
  if (a.shape.back() > product.shape.back()) return -1;
  for (size_t j = i + 1; j < k.body.size(); ++j) {
    const Stmt& s = k.body[j];
    if (!stmt_touches(s, m.dst)) continue;
    if (s.kind != StmtKind::Accumulate || s.op != ir::OpCode::acc_rescale_sum || s.a != m.dst || s.state < 0 ||
        s.scale >= 0)
      return -1;
    const Tile &acc = k.tiles[static_cast<size_t>(s.dst)], &state = k.tiles[static_cast<size_t>(s.state)];
    if (!same_fragments(product, acc) || state.space != Space::registers || state.layout.elements ||
        state.shape.back() != 1)
      return -1;
    // The statement moves up to the matmul: nothing from the matmul on may touch the accumulator or its running
    // max, or write m (others may read m: the sums' own acc_rescale_sum does).
    for (size_t x = i; x < j; ++x) {
      if (stmt_touches(k.body[x], s.dst) || stmt_touches(k.body[x], s.state) || stmt_writes_tile(k.body[x], s.b))
        return -1;
    }
    return static_cast<int>(j);
  }
  return -1;
}

}  // namespace

void accumulate_rescaled_products(Kernel& k) {
  for (size_t i = 0; i < k.body.size(); ++i) {
    const int j = taking_accumulator(k, i);
    if (j < 0) continue;
    Stmt rescale = k.body[static_cast<size_t>(j)];
    Tile factor = k.tiles[static_cast<size_t>(rescale.state)];
    factor.name = k.tiles[static_cast<size_t>(rescale.dst)].name + "_scale";
    k.tiles.push_back(factor);
    rescale.scale = static_cast<int>(k.tiles.size()) - 1;
    rescale.a = -1;
    Stmt& m = k.body[i];
    m.dst = rescale.dst;
    m.scale = rescale.scale;
    m.accumulate = true;
    k.body.erase(k.body.begin() + j);
    k.body.insert(k.body.begin() + static_cast<std::ptrdiff_t>(i), std::move(rescale));
    ++i;  // past the matmul
  }
  drop_unused_tiles(k);
}

}  // namespace morgana::lower
