// Text reports of the CLI's `check` and `eval` subcommands, kept apart from main() so golden tests can call them.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "verify/float_domain.h"

namespace morgana::frontend {

// A program as the reports and commands name it: "gqa_b1", or "gqa_b1 for [h100]" when it has a `for` list
// (optimize's result for several targets holds one program per target, all of one name).
std::string program_label(const ir::Graph& g);

// Every tensor of every program with its type, statement by statement, block graphs indented.
std::string check_report(const ir::Module& m);

struct EvalOptions {
  uint64_t seed = 1;
  verify::Precision precision = verify::Precision::f64;
};

// Runs each program on seeded random inputs in the float reference and prints output shapes and checksums.
std::string eval_report(const ir::Module& m, const EvalOptions& opts);

}  // namespace morgana::frontend
