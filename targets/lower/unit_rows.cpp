// Pass 3d (docs/lowering.md, "Batch elements as rows"): where ir::unit_row_fold finds a block graph whose batched
// values each hold one row per batch element and whose matmuls share their B across the batch, every tile of that
// form has its batch dim and its row dim swapped, so that a product's batch elements are the rows of one matrix
// instruction's m instead of one row each of m; loads and stores address their tensors through views with the same
// two dims swapped (a tile's memory order does not change: the row dim has extent 1).
#include <utility>

#include "ir/block_rules.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

void fold_unit_rows(Kernel& k, LoweredProgram& p, const ir::Graph& body) {
  const std::optional<ir::UnitRowFold> fold = ir::unit_row_fold(body);
  if (!fold) return;
  const int q = fold->dim, row = fold->rank - 2;
  std::vector<char> folded(k.tiles.size(), 0);
  for (size_t t = 0; t < k.tiles.size(); ++t) {
    std::vector<int64_t>& shape = k.tiles[t].shape;
    if (!ir::folds(shape, *fold)) continue;
    std::swap(shape[static_cast<size_t>(q)], shape[static_cast<size_t>(row)]);
    folded[t] = 1;
  }
  auto is_folded = [&](int t) { return t >= 0 && folded[static_cast<size_t>(t)]; };
  for (auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (Stmt& s : *list) {
      if ((s.kind == StmtKind::Load && is_folded(s.dst)) || (s.kind == StmtKind::Store && is_folded(s.a)))
        swap_addressed_dims(s, p, q, row);
      if ((s.kind == StmtKind::Reduce || s.kind == StmtKind::Concat) && is_folded(s.a))
        s.dim = ir::folded_dim(s.dim, *fold);
    }
}

}  // namespace morgana::lower
