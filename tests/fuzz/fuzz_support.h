// What the fuzz targets (tests/fuzz/README.md) share: the expected way to fail, the work bound that keeps an
// execution within libFuzzer's timeout, and the repairs that let mutated files past their checksums.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace morgana::fuzz {

// A property that must hold for every input broke: the input is a finding. abort() makes libFuzzer save it.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// The interpreters run a program only when all its kernel-level tensors together hold at most this many elements:
// what a fuzzed spec may ask for is bounded by the memory limits morgana checks (frontend/memory_limits.h), not by
// an execution's time, and an execution must stay far below libFuzzer's per-input timeout. The parsers, the
// verifier, the cost model and the result checks before an interpreter runs see every input whatever its size.
inline constexpr int64_t kMaxInterpretedElements = 1 << 14;

inline bool small_enough_to_interpret(const ir::Graph& g) {
  int64_t total = 0;
  for (ir::TensorId t = 0; t < g.num_tensors(); ++t) {
    total += g.type(t).numel();  // each within ir::kMaxElements (2^48): no overflow over < 2^15 tensors
    if (total > kMaxInterpretedElements) return false;
  }
  return true;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The folder of the source tree's target files (the build names it, as it does for the CLI).
inline std::string source_targets_dir() {
  if (const char* dir = std::getenv("MORGANA_TARGETS_DIR")) return dir;
  return MORGANA_SOURCE_TARGETS_DIR;
}

}  // namespace morgana::fuzz
