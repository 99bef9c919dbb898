// `morgana run`: executes a program of a bundle on this machine's GPU through the runtime (the same C API a user
// embeds), on seeded random inputs, and compares every output element with the CPU reference interpreter run on
// the program's μGraph (tolerance by element type, as verify/float_check.h defines it). Then it times the launch.
#pragma once

#include <cstdint>
#include <string>

namespace morgana::frontend {

struct RunOptions {
  std::string bundle_path;
  std::string program;  // empty: the bundle's only program name
  int device = 0;       // CUDA device ordinal
  uint64_t seed = 1;
  bool check = true;
  int warmup = 5;
  int iterations = 50;  // timed launches (median reported); 0: no timing
};

struct RunResult {
  bool pass = true;     // every output within tolerance (always true without check)
  std::string report;   // the lines to print
};

// Throws morgana::UserError for what the user can fix (no driver or GPU, no such program, no variant for this
// GPU), with the runtime's message.
RunResult run_bundle(const RunOptions& options);

}  // namespace morgana::frontend
