// Trust nothing read back (docs/search.md, "Results read back"): a search result that comes from a file (a cache
// entry, a shard's result for `morgana merge`) is only text someone could have written. Its checksum catches damage,
// not intent: anyone who can write the file can fix the checksum up. So before such a result is used, every
// candidate in it is checked again against the spec the way the search checked it when it was found, and its cost is
// estimated again on this machine's target file.
#pragma once

#include <string>

#include "ir/graph.h"
#include "search/search.h"
#include "targets/target.h"

namespace morgana::search {

struct RecheckOptions {
  // The candidates after the best: checked as the search checked them (the cheap exact and the float check), or left
  // out of the result. A cache hit leaves them out: their checks would cost what the search's did, for a list nobody
  // compiles (the best alone is the answer).
  bool keep_others = true;
};

// Re-verifies `result` against `spec` (a program; the result's own spec text must be its canonical form) for
// `target`: every candidate must parse, have the spec's interface and fit the target; the candidates' costs are
// estimated again and the list re-sorted by them (stable: ties keep the file's order), so the best is the cheapest
// here whatever the file said. The best then passes the full exact check and the float check, as a fresh search's
// answer does (the search's cheap check before them is a filter the full one contains), the others kept the cheap
// exact check (the search's trials and seed) and the float check; each candidate's `verification` says what was
// checked now. A candidate that is the spec itself
// (printed the same) needs no check. Returns "" when everything passed, else what failed (the candidate's rank in
// the file and why), and leaves `result` unchanged; `failed`, when given, receives that rank (0 when the fault is
// not one candidate's). Runs independent checks on several threads.
std::string recheck_result(const ir::Graph& spec, const targets::Target& target, SearchResult& result,
                           const RecheckOptions& options = {}, size_t* failed = nullptr);

// The first half of recheck_result alone: every candidate parsed, priced again on `target` and the list re-sorted,
// no checks. For merging shards, whose union is cut to the best few by cost before the few are checked. Returns ""
// or what is wrong.
std::string reprice_result(const ir::Graph& spec, const targets::Target& target, SearchResult& result);

}  // namespace morgana::search
