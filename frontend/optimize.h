// `morgana optimize` and `morgana merge` (docs/search.md, "Command line"): the search per target with the
// cache in front of it, the shards' result files, and the file of best μGraphs that `morgana compile` takes.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "search/search.h"
#include "targets/target.h"

namespace morgana::frontend {

struct OptimizeOptions {
  search::SearchOptions search;
  bool use_cache = true;  // read and write the result cache (search/cache.h)
  // A cache hit is checked again before it is believed (search/recheck.h): the best always, the other candidates
  // only when they are wanted (--measure compiles them), since their checks cost what the search's did.
  bool keep_cached_candidates = false;
  // Called with the progress line (search::render_progress) at most about five times a second while a search
  // runs, and once with an empty line when it ends; from one thread at a time.
  std::function<void(const std::string&)> progress;
};

struct Optimized {
  search::SearchResult result;
  bool cached = false;  // found in the cache: no search ran
};

// The search of `spec` (a program) for `target`: the cached result when there is one, else search::search,
// whose result is then cached (unless cut short by the time limit). The result's spec, target, key and
// options are this search's, whatever search::search filled in.
Optimized optimize_for(const ir::Graph& spec, const targets::Target& target, const OptimizeOptions& options);

// "i/n" with 0 <= i < n; throws UserError naming `option` otherwise.
search::Shard parse_shard(const std::string& text, const std::string& option = "--shard");

// What `optimize` and `merge` write: one target's best μGraph as a program, or for several targets one
// program per distinct μGraph, annotated `for [targets]` (ir::Graph::for_targets). Each program is preceded
// by a comment with its estimated cost per target. Every result must have found a μGraph.
std::string best_mugraphs(const std::vector<search::SearchResult>& results);

// The targets among `results` that found no verified μGraph, as "h200, a100"; empty when all did.
std::string targets_without_result(const std::vector<search::SearchResult>& results);

// Reads shard result files (search/result_io.h), groups them by target in the order each target first
// appears, and merges each group (search::merge_results). Nothing in the files is believed: every shard's
// candidates are checked again (search/recheck.h) and priced with the target files below `targets_dir`, and the
// merged answer gets the full exact check. With `spec`, every file must have been searched for it. Throws UserError
// naming the file for anything that fails.
std::vector<search::SearchResult> merge_shard_files(const std::vector<std::string>& files,
                                                   const std::filesystem::path& targets_dir,
                                                   const ir::Graph* spec = nullptr);

// One shard's result file: its name (for messages) and its text.
struct ShardText {
  std::string name;
  std::string text;
};
// merge_shard_files on texts already read (the fuzzer's entry: tests/fuzz/).
std::vector<search::SearchResult> merge_shards(const std::vector<ShardText>& shards,
                                              const std::filesystem::path& targets_dir,
                                              const ir::Graph* spec = nullptr);

}  // namespace morgana::frontend
