// Probabilistic equivalence of two programs over finite fields (docs/verification.md): both run on the same fresh
// random inputs, with a fresh ω and oracle key, in several independent trials; any differing output element is a
// proof that they differ, and agreement in every trial bounds the chance that they differ.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace morgana::verify {

struct EquivalenceOptions {
  int trials = 3;
  uint64_t seed = 1;
  // Full: every output element, exactly. Cheap (the search's filter): a structured sample of output elements,
  // evaluated on demand; every block of every block op of the candidate is represented (docs/verification.md).
  bool full = false;
};

struct Verdict {
  enum Kind : uint8_t {
    Equivalent,         // agreed in every trial
    Different,          // an output element differs (evidence names it)
    InterfaceMismatch,  // inputs or outputs do not line up
    Inconclusive,       // a trial divided by a zero residue
  };
  Kind kind = Equivalent;
  std::string evidence;
  int trials = 0;
  double seconds = 0;
  bool sampled = false;          // the cheap mode: a sample of the output elements, not all of them
  int64_t elements_checked = 0;  // output elements compared per trial
  int64_t elements_total = 0;    // output elements of the programs (the full mode compares them all)
  int64_t blocks_covered = 0, blocks_total = 0;  // cheap mode: blocks of the candidate's block ops some trial reached

  bool equivalent() const { return kind == Equivalent; }
  std::string str() const;  // "equivalent (3 trials)" or "NOT equivalent: <evidence>"
};

// `reference` and `candidate` are kernel graphs with the same inputs (in order) and outputs (in order).
Verdict equivalent(const ir::Graph& reference, const ir::Graph& candidate, const EquivalenceOptions& options = {});

}  // namespace morgana::verify
