// The parameter contract between the compiler and the loader (docs/bundle-format.md, "Parameter contract"):
// every kernel of a program takes the program's parameters, the same list in the same order, namely its
// inputs, then its outputs, then one workspace parameter exactly when the program has workspace bytes. That
// lets a caller pass one argument list per program, whatever the search split it into. The bundle format can
// describe other lists; the loader refuses them when it opens a bundle.
#pragma once

#include <optional>
#include <string>

#include "bundle.h"

namespace morgana::runtime {

// The first broken rule, as a message without the program's name, or nothing.
std::optional<std::string> check_parameter_contract(const bundle::Program& program);

}  // namespace morgana::runtime
