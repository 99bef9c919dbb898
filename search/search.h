// The superoptimizer's entry point (docs/search.md): given a spec (a kernel graph) and one target, enumerate
// μGraphs that could compute it (search/generator.h), prune them as early as possible, verify the complete ones,
// rank them with the cost model and return the best few, each proven equivalent to the spec.
//
// Determinism: the space is cut into tasks (subtrees) in a fixed order; every task's candidates are collected,
// then sorted by (cost, canonical hash), so the answer does not depend on the thread count or on which thread ran
// which task. A shard i/n explores only the tasks whose index is i mod n; merging the shards' results
// (merge_results) gives exactly what one run gives, but for the partial-fusion fallback (search/partial_fusion.h),
// which only an unsharded search runs when it finds no complete candidate. Only a time limit that cuts the search
// short makes the answer depend on timing; the result says so (`timed_out`).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "targets/target.h"
#include "verify/equivalence.h"

namespace morgana::search {

struct Shard {
  int index = 0;  // 0-based
  int count = 1;
  bool operator==(const Shard&) const = default;
};

struct SearchOptions {
  double time_limit_s = 60;   // wall-clock budget of the whole search: the enumeration stops at kEnumerationShare
                              // of it; verification stops before a check that would end past it, once the best
                              // candidate has passed every check (nothing unverified is ever returned)
  int threads = 0;            // 0: the machine's hardware concurrency
  int max_kernel_ops = 2;     // kernel-level ops of a candidate (block ops and predefined ops)
  int max_block_ops = 12;     // compute ops and accumulators of one block graph (iterators and savers not counted)
  Shard shard;
  int top = 5;                // candidates kept: all pass the cheap exact and float checks, the best also the full one
  int trials = 3;             // finite-field trials per check
  uint64_t seed = 1;          // of the verification
  bool abstract_pruning = true;  // off only to measure what the sub-expression pruning saves
  bool operator==(const SearchOptions&) const = default;
};

// One verified candidate.
struct RankedCandidate {
  std::string mugraph;      // the μGraph as `morgana fmt` prints it (one kernel graph, the spec's name)
  uint64_t hash = 0;        // canonical structural hash (ir::Graph::hash), the tie-break after cost
  double cost_us = 0;       // search::estimate on the target
  std::string cost;         // Cost::str(): the per-kernel breakdown
  std::string verification; // what was checked, one line: "cheap 3 trials; full 3 trials; float max err ..."
  bool operator==(const RankedCandidate&) const = default;
};

// The exact checks the search gives a candidate (docs/search.md, "Verification"), and search/recheck.h gives a
// result read back: the cheap one (a sample of the outputs, `trials` trials) for every kept candidate, the full one
// for the answer. The full check adds exhaustive coverage of the outputs; the cheap check's trials already bound the
// chance that a wrong program agrees, so one fresh trial (another seed) is enough there, and it is the costliest
// check by far (GQA b8: 11 s a trial, its two programs on two threads).
inline verify::EquivalenceOptions cheap_check(const SearchOptions& o) { return {o.trials, o.seed, false}; }
inline verify::EquivalenceOptions full_check(const SearchOptions& o) { return {1, o.seed + 1, true}; }

// The verification line of the candidate that is the spec itself: it needs no check.
inline constexpr std::string_view kSpecAsWritten =
    "the spec as written: its ops as predefined kernels (the reference itself)";

// The share of the time limit the enumeration may use; verifying the finalists takes the rest. Verification costs
// as much as the enumeration on the examples (2-core machine: qknorm_b8 5 s of enumeration, 23 s of checks; ntrans
// 12 s and 0.1 s), so half of the limit each.
inline constexpr double kEnumerationShare = 0.5;

struct SearchStats {
  uint64_t states = 0;                      // prefixes generated (kernel and block level)
  std::map<std::string, uint64_t> pruned;   // prefixes dropped, by rule ("shape", "abstract", "smem", ...)
  uint64_t complete = 0;                    // complete μGraphs whose outputs match the spec's expressions
  uint64_t verified = 0;                    // of those checked, passed every check
  uint64_t rejected = 0;                    // of those checked, failed a check
  uint64_t tasks_total = 0, tasks_done = 0; // of this shard
  double seconds = 0;                       // wall clock of the whole search
  double verify_seconds = 0;                // of which verifying the candidates
  bool timed_out = false;                   // the time limit cut the enumeration short (or a window search of
                                            // the partial-fusion fallback)
  uint64_t unverified_for_time = 0;         // top places left empty: the time limit came before their checks
  bool operator==(const SearchStats&) const = default;
};

struct SearchResult {
  std::string spec;         // the spec's canonical text (`morgana fmt`), so a result file stands alone
  std::string target;       // target name
  std::string key;          // the cache key (hex), see cache.h
  SearchOptions options;
  std::vector<RankedCandidate> top;  // best first; sorted by (cost_us, hash)
  SearchStats stats;
  bool found() const { return !top.empty(); }
};

// What the progress line shows; `on_progress` is called from one thread at a time, a few times a second.
struct Progress {
  uint64_t states = 0;  // of the finished tasks
  uint64_t pruned = 0;  // of the finished tasks
  uint64_t complete = 0;
  uint64_t tasks_done = 0, tasks_total = 0;
  bool verifying = false;  // the enumeration has ended; candidates are being checked
  uint64_t verified = 0, rejected = 0;
  double best_cost_us = 0;  // 0 while nothing is verified
  double elapsed_s = 0;
};
using ProgressFn = std::function<void(const Progress&)>;

// Searches `spec` for `target`. Throws UserError for a spec outside the supported fragment.
SearchResult search(const ir::Graph& spec, const targets::Target& target, const SearchOptions& options,
                    const ProgressFn& on_progress = {});

// Combines the results of the shards 0/n .. n-1/n of one search (same spec, target and options apart from the
// shard) into what the unsharded search returns. Throws UserError when they do not belong together or a shard
// is missing or repeated.
SearchResult merge_results(const std::vector<SearchResult>& shards);

}  // namespace morgana::search
