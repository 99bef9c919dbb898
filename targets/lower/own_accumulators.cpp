// Pass 6f of the lowering: online-softmax accumulators whose threads own their elements (docs/lowering.md,
// "Accumulators that own their elements").
//
// mg::acc_rescale_sum over shared memory deals the accumulator's elements to threads as the other accumulators do
// (element e to thread e % threads, every iteration the same), but keeps its running max per row of m, which several
// threads read and then one rewrites: a barrier inside the statement, and the loop's closing barrier, every
// iteration. With a running max per accumulator element instead (the state tile of the accumulator's shape), each
// thread reads and writes only its own elements, so the statement needs no barrier and neither does the loop
// around it where nothing else is shared (a split-KV combine's loop over preloaded partial results). The state is
// then as large as the accumulator: taken only where it costs no busy block.
#include "targets/lower/passes.h"

namespace morgana::lower {

void own_accumulator_state(Kernel& k, const targets::Target& target) {
  // By index: taking a change replaces k, lists and tiles included (the change keeps every statement in place).
  for (auto list : {&Kernel::prologue, &Kernel::body, &Kernel::epilogue})
    for (size_t i = 0; i < (k.*list).size(); ++i) {
      const Stmt& s = (k.*list)[i];
      if (s.kind != StmtKind::Accumulate || s.op != ir::OpCode::acc_rescale_sum || s.state < 0) continue;
      const size_t acc_tile = static_cast<size_t>(s.dst), state_tile = static_cast<size_t>(s.state);
      const Tile &acc = k.tiles[acc_tile], &state = k.tiles[state_tile];
      if (acc.space != Space::shared || state.space != Space::shared || state.shape == acc.shape) continue;
      Kernel owned = k;
      owned.tiles[state_tile].shape = acc.shape;
      if (costs_nothing(k, owned, target)) k = std::move(owned);
    }
}

}  // namespace morgana::lower
