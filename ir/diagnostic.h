// Two error channels, as in Halide: UserError for the user's mistakes (bad spec, bad target file, an op applied to
// shapes that do not fit), always carrying a location when one is known; InternalError for our own broken
// invariants, raised by MG_CHECK, which is always on. Nothing in morgana aborts the process for either.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace morgana {

// A place in a source file. line and column are 1-based; 0 means "unknown".
struct SourceLoc {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;

  bool known() const { return line != 0; }
  // "file:line:column", or "file", or "" when nothing is known.
  std::string str() const;
};

class UserError : public std::runtime_error {
 public:
  explicit UserError(std::string message, SourceLoc loc = {});
  const SourceLoc& loc() const { return loc_; }
  const std::string& message() const { return message_; }
  // The text to show a person: "file:line:column: error: message".
  std::string render() const;

 private:
  SourceLoc loc_;
  std::string message_;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Levenshtein distance, for "did you mean ...?" hints on misspelt names and keys: the distance when it is at most
// `limit`, else limit + 1 (hints only care about near misses, and the bound keeps the cost linear in the words).
size_t edit_distance(std::string_view a, std::string_view b, size_t limit = 2);
// Whether `candidate` is a plausible misspelling target for `word`: one edit for short words, two for longer ones,
// and never a rewrite of most of the word ("W1" does not suggest "X").
bool likely_typo(std::string_view word, std::string_view candidate);

[[noreturn]] void internal_failure(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace morgana

#define MG_CHECK(cond, msg)                                                  \
  do {                                                                       \
    if (!(cond)) ::morgana::internal_failure(__FILE__, __LINE__, #cond, msg); \
  } while (0)
