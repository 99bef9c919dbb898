// The runtime's error value: a status code of the C API (morgana/runtime.h) and a one-line message. Code
// inside the runtime returns it rather than throwing; api.cpp turns it into the C API's return value and
// mg_last_error.
#pragma once

#include <string>
#include <utility>

#include "morgana/runtime.h"

namespace morgana::runtime {

struct Error {
  mg_status status = MG_OK;
  std::string message;
  bool ok() const { return status == MG_OK; }
};

inline Error failure(mg_status status, std::string message) {
  return Error{status, std::move(message)};
}

}  // namespace morgana::runtime
