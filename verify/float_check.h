// The float check: the finite-field verdict (verify/equivalence.h) says that a candidate computes the same function
// as the reference; this says that it also computes it accurately enough in the precision a GPU uses, and that it
// does not overflow where the reference does not. The reference runs in f64, the candidate in Precision::device
// (f32 arithmetic; every kernel-level tensor rounded to its element type as a GPU kernel stores it in global memory,
// while tiles inside a block op stay in f32 as the lowering computes them), on two seeded input sets, each input
// drawn uniformly and rounded to its element type:
//   (a) "random": inputs in [-1, 1];
//   (b) "large": inputs in [-s, s], with s picked from the reference alone (FloatCheckOptions): the smallest
//       s = 2^(k/4) at which the largest |exp argument| the reference evaluates (in f64) reaches `exp_target` = 200.
//       For a softmax that is the spread max - min of a row of logits, so the largest logit is about half of it. A
//       candidate that exponentiates logits without subtracting the max then sees exp(x) with x beyond 88.7, where
//       even an f32 tile overflows (and far beyond 11.09, where a stored f16 tensor does), and produces inf and then
//       NaN (inf / inf); the max-subtracted form evaluates exp on arguments <= 0 and stays finite. Scaling every input is generic: no knowledge of which input feeds which logit is needed, and the
//       search measures the effect instead of assuming a degree (logits QK grow as s^2, a scaled x as s).
//       Limits on s: at most max_scale (256); never so large that a reference output exceeds 1/16 of its type's
//       largest finite value (what is compared must be representable, with headroom); when scaling cannot reach
//       the target (exp arguments bounded, as after an rms_norm: QKNorm), the smallest scale within 10% of the
//       largest reach; when the reference evaluates no exp, the largest power of two up to no_exp_scale (16) that
//       respects the headroom.
// An output element passes when |c - r| <= rtol*|r| + rtol*max|r_o| + floor (float_tolerance, max over the output
// tensor o, or over its sampled elements when FloatCheckOptions::sampled). Where the reference is finite and
// representable in the output's type but the candidate is inf or NaN, the check fails as unsafe. Reference values
// the output type cannot hold are not compared.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <memory>
#include <string>

#include "ir/graph.h"

namespace morgana::verify {

struct Sample;  // verify/sample.h

struct FloatCheckOptions {
  uint64_t seed = 1;
  // The large set (see above): s = 2^(k/4), k >= 0, the smallest at which the reference's largest |exp argument|
  // reaches exp_target, within max_scale and the output headroom; no_exp_scale bounds s for a reference without exp.
  double exp_target = 200;
  double max_scale = 256;
  double no_exp_scale = 16;
  // Multiplies every dtype tolerance (1: the documented defaults).
  double tolerance_factor = 1;
  // Sampled (the search's mode): every evaluation (the reference's outputs on both sets, the large set's probes, the
  // candidate) computes only a structured sample of output elements, on demand (verify/sample.h: the union of the
  // cheap equivalence mode's samples of trials 0 to 3, for a seed derived from `seed`), and max|r_o| in the
  // tolerance is over the sampled elements. The sample depends on the reference's output types and the seed alone,
  // so every candidate is compared at the same elements. Otherwise every element of every output.
  bool sampled = false;
};

// Tolerance of one output element type: |c - r| <= rtol*|r| + rtol*max|r_o| + floor.
struct Tolerance {
  double rtol;
  double floor;  // the smallest normal number of the type: below it the type has no relative precision
};
Tolerance float_tolerance(ir::DType t);

// The bound for the elements of one output tensor, given its reference values (finite ones set max|r_o|):
// an element passes when error(c, r) <= 1. `factor` multiplies the dtype's tolerance (FloatCheckOptions).
struct OutputTolerance {
  double rtol = 0;
  double absolute = 0;  // rtol*max|r_o| + floor
  static OutputTolerance of(std::span<const double> reference, ir::DType t, double factor = 1);
  double error(double candidate, double reference) const {
    return std::fabs(candidate - reference) / (rtol * std::fabs(reference) + absolute);
  }
};

struct FloatCheck {
  bool pass = true;
  bool unsafe = false;  // the candidate produced inf/NaN where the reference is finite
  std::string message;  // why it failed; empty when it passed

  // The worst element over both input sets (the failing one when it failed).
  std::string input_set;  // "random" or "large"; empty when no output has an element
  int output = -1;
  std::string output_desc;  // "O: f16[2,1,16]"
  std::string index;        // "[0,0,3]"
  double reference = 0, candidate = 0;
  double error = 0;  // |c - r| / allowed; <= 1 passes (inf for a non-finite candidate)

  double large_scale = 0;    // the large set's input range [-s, s]
  double large_exp_arg = 0;  // the reference's largest |exp argument| on the large set (0: no exp)
  bool sampled = false;      // FloatCheckOptions::sampled
  int64_t elements = 0;      // output elements compared per input set
  double seconds = 0;

  // "float check passed: ..." or "float check FAILED: <message> ...", one line each for the verdict, the worst
  // element and the input sets; "float check (sampled, N output elements) ..." when it was sampled.
  std::string str() const;
};

// `reference` and `candidate` are kernel graphs with the same inputs and outputs (shapes and element types).
FloatCheck float_check(const ir::Graph& reference, const ir::Graph& candidate, const FloatCheckOptions& options = {});

// The reference's side of float checks, computed once: both input sets, the large set's scale and the reference's
// f64 outputs on each. The search checks many candidates against one spec; the reference side (the large scale
// alone takes several evaluations) is most of a check's time. Holds every input in f64.
class FloatReference {
 public:
  FloatReference(const ir::Graph& reference, const FloatCheckOptions& options = {});
  ~FloatReference();
  FloatReference(const FloatReference&) = delete;
  FloatReference& operator=(const FloatReference&) = delete;
  // The same as float_check(reference, candidate, options). Not thread-safe (the large set is made on first use).
  FloatCheck check(const ir::Graph& candidate);

 private:
  struct Sets;
  const Sample* sample() const;  // nullptr unless sampled
  const ir::Graph& ref_;
  FloatCheckOptions opts_;
  std::unique_ptr<Sets> sets_;
};

}  // namespace morgana::verify
