// Pass 3c (docs/lowering.md, "Transposed operands"): a tile loaded from a transposed view (a `transpose` of an input
// or of a computed tensor: its last dim strided, the one before contiguous) and read only as matmuls' B is loaded as
// the memory holds it, rows of N along K, and the matmuls read it as Bᵀ (Stmt::trans_b; ldmatrix without .trans on
// the matrix instruction). Its loads are then 16-byte copies along K, asynchronous and pipelined like any other,
// instead of one strided element per thread; multi-head latent attention's Q·Cᵀ reads its cache this way.
#include <algorithm>
#include <utility>

#include "ir/block_rules.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

void load_transposed_operands(Kernel& k, LoweredProgram& p) {
  for (auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (Stmt& load : *list) {
      if (load.kind != StmtKind::Load) continue;
      const GlobalTensor& g = p.tensors[static_cast<size_t>(load.tensor)];
      if (!ir::transposed_layout(g.shape, g.strides)) continue;
      const TileUses uses = tile_uses(k, load.dst);
      const bool only_b = !uses.readers.empty() && uses.writers.size() == 1 &&
                          std::all_of(uses.readers.begin(), uses.readers.end(), [&](const Stmt* s) {
                            return s->kind == StmtKind::Matmul && s->b == load.dst && s->a != load.dst;
                          });
      if (!only_b) continue;
      Tile& tile = k.tiles[static_cast<size_t>(load.dst)];
      if (tile.shape.size() < 2) continue;
      const size_t r = tile.shape.size();
      std::swap(tile.shape[r - 1], tile.shape[r - 2]);
      const int lr = static_cast<int>(load.origin.size());
      swap_addressed_dims(load, p, lr - 1, lr - 2);
      for (auto* readers : {&k.prologue, &k.body, &k.epilogue})
        for (Stmt& s : *readers)
          if (s.kind == StmtKind::Matmul && s.b == load.dst) s.trans_b = true;
    }
}

}  // namespace morgana::lower
