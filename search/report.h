// What `morgana optimize` and `morgana merge` print about a search (docs/search.md, "Report"): the counts,
// the ranked candidates and the best μGraph with its cost breakdown; and the one-line progress shown while it
// runs.
#pragma once

#include <string>

#include "search/search.h"

namespace morgana::search {

// Lines ending in newlines. Without `with_timing` the wall-clock time is left out, so the text of a search
// that was not cut short is the same on every run (golden tests rely on it). Throws UserError when the
// result's spec or a candidate's μGraph does not parse (a hand-edited result file).
std::string render_report(const SearchResult& result, bool with_timing);

// One line without a newline, e.g. "h200: best 41.30 us, 3 verified of 12 complete, 1234567 states".
std::string render_summary(const SearchResult& result);

// One line without a newline, e.g.
// "search h200: 1.2M states, 0.9M pruned, 12 complete, 3 verified, best 41.30 us, tasks 17/40, 12.3 s".
std::string render_progress(const std::string& target, const Progress& progress);

// 999, 12.3k, 1.2M, 4.5G: counts that stay readable as they grow.
std::string compact_count(uint64_t n);

}  // namespace morgana::search
