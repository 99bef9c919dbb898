#include "ir/diagnostic.h"

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

void internal_failure(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(std::string("internal error at ") + file + ":" + std::to_string(line) + ": check `" + cond +
                      "` failed: " + msg);
}

}  // namespace morgana
