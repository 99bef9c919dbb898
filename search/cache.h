// The result cache (docs/search.md, "Cache"): a search takes minutes, its answer depends only on the spec,
// the hardware description, morgana's version and a few options, so it is kept under $XDG_CACHE_HOME/morgana
// (else
// ~/.cache/morgana) in a file named by a hash of all of those. Caching is best effort: when no cache folder
// is usable it is silently off, and a damaged or stale entry is a miss (with a warning), never an error.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "search/search.h"
#include "targets/target.h"

namespace morgana::search {

// The options that change the answer: all but `threads` and `time_limit_s` (a time limit changes the answer
// only when it cuts the search short, and such a result is never cached or treated as exact).
SearchOptions answer_options(const SearchOptions& options);

// 32 hex digits over the spec's canonical text, the content of the target file and of every file in its base
// chain, MORGANA_VERSION and the commit it was built from (MORGANA_BUILD_ID), and answer_options() without
// the shard; a shard i/n with n > 1 appends
// "-shard-i-of-n", so shards of one search share the part before the dash (merge_results checks it, and gives
// the merged result that part). Throws UserError when a target file cannot be read.
std::string cache_key(const std::string& canonical_spec, const targets::Target& target,
                      const SearchOptions& options);

// The key of the whole search that `shard_key` (a key from cache_key) is a shard of.
std::string unsharded_key(const std::string& shard_key);

// The cache folder, created if needed; nullopt when neither $XDG_CACHE_HOME nor $HOME gives a usable one.
std::optional<std::filesystem::path> cache_dir();

// The cached result of `key`, or nullopt. An entry that does not read (corrupt) or that belongs to another
// key or morgana version (stale) is removed, with a one-line warning on stderr.
std::optional<SearchResult> cache_lookup(const std::string& key);

// Removes the entry of `key`, if any (a hit that failed its re-verification, search/recheck.h).
void cache_discard(const std::string& key);

// Stores `result` under result.key, atomically (a temporary file in the cache folder, then a rename), so
// readers never see half a file. A result cut short by the time limit is not stored. Failures to write are
// warned about and otherwise ignored.
void cache_store(const SearchResult& result);

}  // namespace morgana::search
