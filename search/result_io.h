// A search result as a text file (docs/search.md, "Shards and merge"): what a shard writes for `morgana
// merge`, and what the cache stores. Line-oriented and versioned so a person can read it and a later morgana
// can refuse an old one; multi-line texts (the spec, each μGraph, each cost breakdown) are blocks prefixed by
// their length in bytes, so no content needs escaping; the last line is a checksum of everything before it,
// so a truncated or edited file is rejected instead of being half read.
#pragma once

#include <string>
#include <string_view>

#include "search/search.h"

namespace morgana::search {

// The first line of every result file; the number changes whenever the format does.
inline constexpr std::string_view kResultMagic = "morgana-search-result";
inline constexpr int kResultFormatVersion = 2;

std::string write_result(const SearchResult& result);

// Throws morgana::UserError naming `where` (a file name, or "cache entry KEY") and the line for anything
// malformed: wrong magic or version, a missing or unknown field, a bad number, a block that runs past the
// end, a checksum that does not match. `made_by`, when given, receives the version of morgana that wrote the
// file.
SearchResult read_result(std::string_view text, std::string_view where, std::string* made_by = nullptr);

}  // namespace morgana::search
