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

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
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
