#include "ir/diagnostic.h"

#include <algorithm>
#include <vector>

namespace morgana {

std::string SourceLoc::str() const {
  std::string s = file;
  if (line != 0) {
    if (!s.empty()) s += ':';
    s += std::to_string(line) + ':' + std::to_string(column);
  }
  return s;
}

UserError::UserError(std::string message, SourceLoc loc)
    : std::runtime_error(loc.known() || !loc.file.empty() ? loc.str() + ": " + message : message),
      loc_(std::move(loc)),
      message_(std::move(message)) {}

std::string UserError::render() const {
  std::string where = loc_.str();
  return (where.empty() ? std::string() : where + ": ") + "error: " + message_;
}

size_t edit_distance(std::string_view a, std::string_view b, size_t limit) {
  const size_t over = limit + 1;
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit) return over;
  // Only the band |i - j| <= limit of the table can hold a distance within the limit: O(limit x length) time, so a
  // hint for a 100,000-character name costs what reading it does (issue 17: the whole table took 23 s).
  std::vector<size_t> prev(b.size() + 1, over), cur(b.size() + 1, over);
  for (size_t j = 0; j <= std::min(b.size(), limit); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    const size_t lo = i > limit ? i - limit : 1, hi = std::min(b.size(), i + limit);
    // Cells next to the band read as out of reach (they hold stale values from earlier rows otherwise).
    cur[0] = i <= limit ? i : over;
    cur[lo - 1] = lo == 1 ? cur[0] : over;
    size_t row_min = cur[0];
    for (size_t j = lo; j <= hi; ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1), over});
      row_min = std::min(row_min, cur[j]);
    }
    if (hi + 1 <= b.size()) cur[hi + 1] = over;
    if (row_min >= over) return over;
    std::swap(prev, cur);
  }
  return std::min(prev[b.size()], over);
}

bool likely_typo(std::string_view word, std::string_view candidate) {
  size_t d = edit_distance(word, candidate);
  size_t limit = word.size() <= 4 ? 1 : 2;
  return d <= limit && d < word.size() && d < candidate.size();
}

void internal_failure(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(std::string("internal error at ") + file + ":" + std::to_string(line) + ": check `" + cond +
                      "` failed: " + msg);
}

}  // namespace morgana
