// The μGraph generator (paper §4; docs/search.md, "Generator"): enumerates kernel graphs op by op in canonical
// order, and for every `block` op its block graph: grid dims and for-loop (which axes they cut), iterators with
// the imap/fmap that cut those axes, block ops in canonical order, accumulators, epilogue ops, then savers with
// their omap. Every prefix is pruned as early as possible: shapes, axis labels (search/axes.h), the
// abstract-expression oracle (search/subexpr_oracle.h), the state of partial reductions, and the target's limits
// (the rules: search/gen_rules.h; the state they read: search/gen_state.h; docs/search.md lists every piece).
//
// The space is cut into tasks, one per first kernel op (a predefined op, or a block op's operands, grid axes and
// loop axis), in a fixed order; a task is explored depth-first, so what it finds does not depend on which thread
// runs it. Block graphs are enumerated once per (operands, grid axes, loop axis) with representative tile sizes
// and then instantiated at every grid size and loop count the target allows.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/block_rules.h"
#include "ir/graph.h"
#include "search/search.h"
#include "targets/target.h"

namespace morgana::search {

// A complete μGraph whose outputs are equivalent to the spec's under the abstraction, not yet verified.
struct Candidate {
  ir::Graph graph;
  double cost_us = 0;
  uint64_t hash = 0;       // graph.hash(): the tie-break and dedup key
  uint64_t structure = 0;  // the same for every instantiation (grid sizes, loop counts) of one op structure
};

// Counters of one task (summed by the driver).
struct GenStats {
  uint64_t states = 0;
  uint64_t complete = 0;
  std::map<std::string, uint64_t> pruned;
  void add(const GenStats& o);
};

class Generator {
 public:
  // Throws UserError when the spec has no outputs or ops outside what the generator handles.
  // `aliases`: which of the spec's inputs view another's memory (ir::InputAliases), for the cost model.
  Generator(const ir::Graph& spec, const targets::Target& target, const SearchOptions& options,
            ir::InputAliases aliases = {});
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  size_t num_tasks() const;
  // Explores one task; every complete candidate goes to `sink` (in a deterministic order). Returns early when
  // `stop` becomes true. `bound` (may be null), which the sink may lower as it keeps candidates: prefixes that
  // already cost more are pruned.
  void explore(size_t task, GenStats& stats, const std::function<void(Candidate&&)>& sink,
               const std::atomic<bool>& stop, const double* bound = nullptr) const;

  struct Shared;  // spec analysis, oracle, constants, target limits, the task list

 private:
  std::unique_ptr<Shared> shared_;
};

}  // namespace morgana::search
