// The shape of the generator's space (docs/search.md, "Generator" and "Sizes"): the skeletons a block op may
// take over some kernel tensors, the grid sizes and loop counts each may be instantiated at, the task list, and
// how a block graph found at one size is rebuilt at another. No pruning by terms here: that is the walk's
// (search/generator.cpp, search/gen_block.cpp) with the rules of search/gen_rules.h.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "search/gen_rules.h"
#include "search/gen_state.h"

namespace morgana::search::gen {

// Skeletons over the kernel tensors `ops` (ids into `kt`): grid axes (up to three, in label order, from the
// operands' labels) and the loop axis (or none); a stacked dim must be cut by the grid or the loop. In a fixed
// order.
void skeletons_over(const std::vector<TensorId>& ops, const std::vector<KTensor>& kt,
                    const std::function<void(const Skeleton&)>& f);

// Every task's first op, in a fixed order: "a predefined op first", then one task per block-op skeleton over
// 1..4 of the spec inputs (labelled `input_labels`).
std::vector<Task> root_tasks(const std::vector<Labels>& input_labels);

// The grid sizes and loop counts skeleton `sk` may take, the first being the representative its block graphs are
// found at: divisors of the axes' extents (a stacked dim cut into exactly its parts), at most `max_blocks`
// blocks in total, loop counts the powers of two up to kMaxLoop dividing what the grid leaves. Where the grid
// cuts the loop's axis too (a split-KV block), its part may also be taken in one iteration: the same block
// graph without a for-loop (never first).
std::vector<ir::BlockParams> instantiations(const Skeleton& sk, const SpecAxes& axes, int64_t max_blocks,
                                            int64_t threads);

// `body` rebuilt with the grid sizes and loop count `p` (a loop of 1 drops the iterators' fmaps) over operands
// of `types`; nullopt when the shapes do not divide.
std::optional<ir::Graph> replay(const ir::Graph& body, const ir::BlockParams& p,
                                const std::vector<ir::TensorType>& types);

// The same for every choice of grid sizes and loop counts: the ops and their wiring.
uint64_t structure_hash(const ir::Graph& g);

// The labels of tensor `t` of a built block graph `bg` of skeleton `sk` over kernel tensors `kt`, recomputed
// from the body (the walk's per-tensor state is gone by then): stacked dims of iterators are read as their
// parts; a concat's dim takes its joined axis.
Labels tile_labels(const ir::Graph& bg, TensorId t, const Skeleton& sk, const std::vector<KTensor>& kt,
                   const JoinedAxes& joints);

}  // namespace morgana::search::gen
