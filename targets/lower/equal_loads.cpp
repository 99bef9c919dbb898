// Pass 3e (docs/lowering.md, "Equal loads"): two loads of one section that fill tiles of the same type and shape from
// the same elements (the same tensor, origin, bounds and padding) are one load. Multi-head latent attention's split
// kernel reads each tile of its cache twice in the μGraph, as Cᵀ for the scores and as C for P·C; once pass 3c
// has made the first a plain load read as Bᵀ, the two loads are equal, and the block keeps one tile of the cache
// instead of two (half the shared memory and half the copies). The later tile's readers read the earlier one,
// which is loaded first on every path that reaches them (one section runs straight through).
#include <algorithm>

#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

bool same_elements(const Stmt& x, const Stmt& y, const Kernel& k) {
  const Tile& a = k.tiles[static_cast<size_t>(x.dst)];
  const Tile& b = k.tiles[static_cast<size_t>(y.dst)];
  return x.tensor == y.tensor && x.origin == y.origin && x.mask == y.mask && x.pad == y.pad && x.ahead == y.ahead &&
         x.iterations == y.iterations && a.dtype == b.dtype && a.shape == b.shape;
}

bool written_only_by_its_load(const Kernel& k, int tile) { return tile_uses(k, tile).writers.size() == 1; }

// Whether the kernel stores into the memory of `tensor` (a kernel reads what earlier kernels wrote; a tensor it also
// writes could change between the two loads).
bool stored_by(const Kernel& k, const LoweredProgram& p, int tensor) {
  const GlobalTensor& g = p.tensors[static_cast<size_t>(tensor)];
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const Stmt& s : *list)
      if (s.kind == StmtKind::Store && p.tensors[static_cast<size_t>(s.tensor)].param == g.param) return true;
  return false;
}

}  // namespace

void merge_equal_loads(Kernel& k, const LoweredProgram& p) {
  bool merged = false;
  for (auto* list : {&k.prologue, &k.body, &k.epilogue}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const Stmt& first = (*list)[i];
      if (first.kind != StmtKind::Load || !written_only_by_its_load(k, first.dst) || stored_by(k, p, first.tensor))
        continue;
      for (size_t j = i + 1; j < list->size();) {
        const Stmt& later = (*list)[j];
        if (later.kind != StmtKind::Load || !same_elements(first, later, k) ||
            !written_only_by_its_load(k, later.dst)) {
          ++j;
          continue;
        }
        const int gone = later.dst, kept = (*list)[i].dst;
        list->erase(list->begin() + static_cast<std::ptrdiff_t>(j));
        for (auto* readers : {&k.prologue, &k.body, &k.epilogue})
          for (Stmt& s : *readers)
            for (int* t : {&s.a, &s.b, &s.state, &s.scale})
              if (*t == gone) *t = kept;
        merged = true;
      }
    }
  }
  if (merged) drop_unused_tiles(k);
}

}  // namespace morgana::lower
