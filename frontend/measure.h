// `morgana optimize --measure` (docs/search.md, "Measuring the finalists"): the cost model ranks the verified
// candidates; on a machine whose GPU is the one a target file describes, the top few are compiled for it, checked
// against the CPU reference and timed through the runtime with the bench's protocol, and the fastest that passes
// becomes the answer. Where the GPU is not there, the cost model decides alone and the report says why.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "search/search.h"
#include "targets/target.h"

namespace morgana::frontend {

struct MeasureOptions {
  int top = 5;        // candidates to time, best estimate first
  int device = 0;     // CUDA device ordinal
  uint64_t seed = 1;  // of the inputs the check uses
  int warmup = 5;     // replays before timing
  int replays = 30;   // timed replays (median reported); the bench takes at least 20
  // Called with one line per candidate measured.
  std::function<void(const std::string&)> progress;
};

struct MeasuredCandidate {
  int rank = 0;  // 1-based, in the cost model's order (its index in the result's top is rank - 1)
  double estimate_us = 0;
  bool ok = false;      // compiled, loaded, checked and timed
  std::string problem;  // why not, when !ok
  double median_us = 0, min_us = 0;
  int sets = 0;          // input sets a replay went through
  double check_worst = 0;  // the largest output error as a fraction of its tolerance
};

struct Measurement {
  std::string target;
  std::string skipped;  // why nothing was measured (no driver, no GPU, another GPU); empty when measured
  std::string device;   // the GPU that measured, "NVIDIA H100 80GB HBM3 (device 0)"
  std::vector<MeasuredCandidate> rows;
  int chosen = -1;  // index into rows of the fastest that passed; -1: none did
};

// The form of a μGraph: which computations each of its kernels does, in launch order (a predefined op's name; a
// block op's ops as a multiset, without its iterators, accumulators and saves); grids, loops, maps, tile sizes and
// the order and accumulation of a block's ops aside. Two candidates of one form split the work into kernels alike.
std::string candidate_form(const std::string& mugraph);

// The candidates --measure times, as indices into result.top in rank order: the best-ranked candidate of each form
// first, up to half of `count` (rounded up), then the best-ranked others until `count`. The cost model's errors are largely
// errors about a form (its variants share them: qknorm_h8_d128_k1024's six best estimates were all one two-kernel
// form, 14.2-16.9 us measured, while its split-KV flash form, ranked 7th, ran 11.1 us), so timing the best of
// each form first asks the GPU about what the model can get wrong.
std::vector<int> choose_finalists(const search::SearchResult& result, int count);

// Compiles, checks and times `options.top` candidates of `result` (a search for `target`; choose_finalists) on the
// local GPU. Never throws for a candidate that fails: its row says why.
Measurement measure_candidates(const search::SearchResult& result, const targets::Target& target,
                               const MeasureOptions& options);

// The report's table: every candidate's estimate next to its measurement, and which one was chosen.
std::string render_measurement(const Measurement& m);

// Moves the chosen candidate to the front of `result.top` (the rest keep their order), so that what `optimize`
// writes is the measured fastest. No change when nothing passed.
void apply_measurement(const Measurement& m, search::SearchResult& result);

}  // namespace morgana::frontend
