// The block level of the generator's walk (docs/search.md, "Generator"): for one block-op skeleton over some
// kernel tensors, every block graph at the skeleton's representative sizes: iterators, body ops in canonical
// order, accumulators, epilogue ops, savers. Each step applies the rules of search/gen_rules.h to the
// partial-result state (search/gen_state.h). Memoised per skeleton and operand terms within a task.
#pragma once

#include <unordered_map>
#include <vector>

#include "search/gen_terms.h"

namespace morgana::search::gen {

class BlockGraphs {
 public:
  explicit BlockGraphs(Terms& terms) : t_(terms) {}

  // The block graphs of `sk` over kernel tensors `kt` (of graph `kg`) at the representative sizes `rep`, with
  // `later` kernel ops still to follow it (none: the block's saves must be the spec's outputs).
  const std::vector<Structure>& structures(const Skeleton& sk, const ir::BlockParams& rep, int later,
                                           const std::vector<KTensor>& kt, const ir::Graph& kg);

 private:
  bool add_iters(Block& b, const std::vector<KTensor>& kt);
  bool block_try(Block& b, OpCode op, std::initializer_list<TensorId> operands, const ir::Attrs& a, bool epilogue);
  void block_undo(Block& b);
  template <class F>
  void for_each_block_op(Block& b, Rank last, bool epilogue, F&& f);
  template <class Next>
  void extend(Block& b, Rank last, bool epilogue, Next&& next);
  void body_dfs(Block& b, Rank last, std::vector<Structure>& found);
  void close_body(Block& b, std::vector<Structure>& found);
  bool add_acc(Block& b, OpCode op, TensorId x, TensorId partner);
  void epilogue_dfs(Block& b, Rank last, std::vector<Structure>& found);
  void try_saves(Block& b, std::vector<Structure>& found);

  Terms& t_;
  std::unordered_map<uint64_t, std::vector<Structure>> memo_;
};

}  // namespace morgana::search::gen
