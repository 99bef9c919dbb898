#include "verify/float_check.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "ir/printer.h"
#include "verify/float_domain.h"
#include "verify/input_rows.h"
#include "verify/interpreter.h"
#include "verify/lazy_interpreter.h"
#include "verify/sample.h"
#include "verify/splitmix.h"

namespace morgana::verify {

namespace {

// The f64 float domain, recording the largest |argument| of every exp it evaluates (softmax's and the online
// accumulators' included, since the interpreter evaluates them through unary(exp)).
struct ExpProbe : FloatDomain {
  double max_arg = 0;
  int64_t count = 0;
  double unary(ir::OpCode op, double x, double s) {
    if (op == ir::OpCode::exp) {
      ++count;
      if (std::isfinite(x)) max_arg = std::max(max_arg, std::fabs(x));
    }
    return FloatDomain::unary(op, x, s);
  }
  // The lazy interpreter evaluates the exps whose oracle part no output needs through unary_p, which must count too
  // (FloatDomain's calls its own unary, not this one).
  double unary_p(ir::OpCode op, double x, double s) { return unary(op, x, s); }
};

// One input set, random_inputs(g, seed, scale): whole arrays, or (for a sampled check) the same values drawn a row
// (a slice along the last dim) at a time, on first use, in the columns the evaluations so far read (input_rows.h). A
// sampled check reads few rows and columns (in rms_norm + linear, 6 of W's 6144 columns), and drawing whole sets was
// most of its time (the large set's scale search draws one per probe).
class Inputs {
 public:
  Inputs(const ir::Graph& g, uint64_t seed, double scale, bool whole) : seed_(seed), scale_(scale) {
    if (whole) {
      whole_ = random_inputs(g, seed, scale);
      return;
    }
    uint64_t offset = 0;
    for (ir::TensorId t : g.inputs()) {
      offsets_.push_back(offset);
      dtypes_.push_back(g.type(t).dtype);
      offset += static_cast<uint64_t>(g.type(t).numel());
    }
    columns_.resize(g.inputs().size());
    rows_.emplace(g);
  }
  const std::vector<FloatArray>& whole() const { return whole_; }

  // Rows are to hold the columns that `g` (which takes these inputs) reads by `use` too. Rows drawn so far are drawn
  // again when that adds a column: candidates mostly read the columns the reference does.
  void need(const ir::Graph& g, const ColumnUse& use) {
    bool grown = false;
    for (size_t k = 0; k < columns_.size(); ++k) {
      Columns u = column_union(columns_[k], use.kernel[g.inputs()[k]]);
      grown = grown || u != columns_[k];
      columns_[k] = std::move(u);
    }
    if (grown) rows_->layout(columns_);
  }

  // Element `flat` of input `k`, which starts a row (LazyInterpreter's InputFn).
  const double* row(size_t k, int64_t flat) {
    return rows_->row(k, flat, [&](double* p, const Columns* columns, int64_t width) {
      auto draw = [&](int64_t c) {
        p[c] = random_input(seed_, offsets_[k] + static_cast<uint64_t>(flat + c), scale_, dtypes_[k]);
      };
      if (!columns)
        for (int64_t c = 0; c < width; ++c) draw(c);
      else
        for (int32_t c : *columns) draw(c);
    });
  }

 private:
  uint64_t seed_;
  double scale_;
  std::vector<FloatArray> whole_;
  std::vector<uint64_t> offsets_;  // of each input's first element in random_input's stream
  std::vector<ir::DType> dtypes_;
  std::vector<Columns> columns_;  // per input, what the rows hold
  std::optional<RowStore<double>> rows_;
};

// The outputs of one evaluation: per output, its values at the sample's elements, or at every element in order.
using Values = std::vector<std::vector<double>>;

// Runs `g` on `inputs` in domain `d`: on demand at the elements of `sample` (lazy_interpreter.h, which computes the
// same values as the eager interpreter) when there is one, else eagerly on whole tensors (`inputs` then whole).
template <class D>
Values evaluate(D& d, const ir::Graph& g, Inputs& inputs, const Sample* sample) {
  Values out;
  if (!sample) {
    for (FloatArray& a : Interpreter<D>(d).run(g, inputs.whole())) out.push_back(std::move(a.data));
    return out;
  }
  ColumnUse use = column_use(g, sample->columns);
  inputs.need(g, use);
  auto input = [&](size_t k, int64_t flat) { return inputs.row(k, flat); };
  LazyInterpreter<D, decltype(input)> lazy(d, g, input, exponent_use(g), std::move(use));
  for (size_t o = 0; o < sample->elements.size(); ++o) {
    std::vector<double>& v = out.emplace_back();
    for (int64_t i : sample->elements[o]) v.push_back(lazy.output(o, i));
  }
  return out;
}

// Per output of `ref`, the largest |device - f64| over its elements on `inputs` (finite ones: an element the spec
// itself overflows holds nobody to anything), `want` being the f64 values.
std::vector<double> spec_error(const ir::Graph& ref, Inputs& inputs, const Values& want, const Sample* sample) {
  FloatDomain device{Precision::device};
  Values got = evaluate(device, ref, inputs, sample);
  std::vector<double> err(want.size(), 0);
  for (size_t o = 0; o < want.size(); ++o)
    for (size_t i = 0; i < want[o].size(); ++i)
      if (std::isfinite(got[o][i]) && std::isfinite(want[o][i]))
        err[o] = std::max(err[o], std::fabs(got[o][i] - want[o][i]));
  return err;
}

// The seed of the large set's inputs: a different stream from the random set's.
uint64_t large_seed(uint64_t seed) { return seed ^ 0x5851f42d4c957f2dULL; }

double dtype_max(ir::DType t) {
  switch (t) {
    case ir::DType::f16: return 65504.0;
    case ir::DType::bf16: return 0x1.fep127;
    case ir::DType::f32: return static_cast<double>(std::numeric_limits<float>::max());
  }
  return static_cast<double>(std::numeric_limits<float>::max());
}

struct Probe {
  double reach;  // the largest |exp argument|, or -1 when the reference evaluates no exp
  double fill;   // the largest |output| as a fraction of its element type's largest finite value
};
Probe probe(const ir::Graph& ref, uint64_t seed, double scale, const Sample* sample) {
  ExpProbe d;
  Inputs in(ref, large_seed(seed), scale, !sample);
  Values out = evaluate(d, ref, in, sample);
  double fill = 0;
  for (size_t o = 0; o < out.size(); ++o) {
    double max_finite = dtype_max(ref.type(ref.outputs()[o]).dtype);
    for (double v : out[o]) fill = std::max(fill, std::isnan(v) ? INFINITY : std::fabs(v) / max_finite);
  }
  return {d.count == 0 ? -1 : d.max_arg, fill};
}

// The reference's outputs must stay within 1/16 of their type's range on the large set, so that what is compared is
// representable with room for the candidate's intermediates.
constexpr double kMaxFill = 1.0 / 16;

// The large set's scale (FloatCheckOptions): s = 2^(k/4), searched by doubling and then bisection on k. Probes see
// the sample's elements only, when there is one.
double large_scale(const ir::Graph& ref, const FloatCheckOptions& o, const Sample* sample, double& reached) {
  auto scale = [](int k) { return std::exp2(k / 4.0); };
  auto k_of = [](double s) { return std::max(0, static_cast<int>(std::floor(4 * std::log2(s) + 1e-9))); };
  const int kmax = k_of(o.max_scale);
  std::vector<std::optional<Probe>> memo(static_cast<size_t>(kmax) + 1);
  auto at = [&](int k) -> const Probe& {
    std::optional<Probe>& p = memo[static_cast<size_t>(k)];
    if (!p) p = probe(ref, o.seed, scale(k), sample);
    return *p;
  };
  auto feasible = [&](int k) { return at(k).fill <= kMaxFill; };
  if (at(0).reach < 0) {
    // No exp: the largest power of two up to no_exp_scale whose outputs stay in range.
    int k = 0;
    while (k + 4 <= std::min(kmax, k_of(o.no_exp_scale)) && feasible(k + 4)) k += 4;
    reached = 0;
    return scale(k);
  }
  // Stop at the first k that reaches the target or leaves the range: doubling, then bisection.
  auto stop = [&](int k) { return at(k).reach >= o.exp_target || !feasible(k); };
  // Doubling ends early, as bounded, once a doubling of the inputs grows the exp arguments by less than 10%.
  int hi = -1;
  for (int k = 0, prev = -1;; prev = k, k = std::min(k + 4, kmax)) {
    if (stop(k)) {
      hi = k;
      break;
    }
    if (k == kmax || (prev >= 0 && at(k).reach < 1.1 * at(prev).reach)) break;
  }
  if (hi >= 0) {
    if (hi > 0) {
      int lo = (hi - 1) / 4 * 4;  // the previous doubling step: stop(lo) is false
      while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        (stop(mid) ? hi : lo) = mid;
      }
    }
    // hi reaches the target or is out of range; then the step below it is the largest in range (never below 1).
    int k = feasible(hi) || hi == 0 ? hi : hi - 1;
    reached = at(k).reach;
    return scale(k);
  }
  // Bounded (scaling the inputs does not bring the exp arguments to the target, e.g. after an rms_norm): the
  // smallest evaluated scale that gets within 10% of the largest value reached.
  double best = 0;
  for (const std::optional<Probe>& p : memo)
    if (p) best = std::max(best, p->reach);
  for (int k = 0; k <= kmax; ++k)
    if (memo[static_cast<size_t>(k)] && memo[static_cast<size_t>(k)]->reach >= 0.9 * best) {
      reached = memo[static_cast<size_t>(k)]->reach;
      return scale(k);
    }
  reached = best;
  return scale(kmax);
}


std::string num(double v) {
  if (std::isnan(v)) return "nan";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

bool same_shape(const ir::TensorType& a, const ir::TensorType& b) {
  return a.rank == b.rank && std::equal(a.shape().begin(), a.shape().end(), b.shape().begin());
}

std::string interface_mismatch(const ir::Graph& r, const ir::Graph& c) {
  auto side = [&](const char* what, std::span<const ir::TensorId> a, std::span<const ir::TensorId> b) -> std::string {
    if (a.size() != b.size()) return std::string("the programs have different numbers of ") + what + "s";
    for (size_t i = 0; i < a.size(); ++i)
      if (!same_shape(r.type(a[i]), c.type(b[i])) || r.type(a[i]).dtype != c.type(b[i]).dtype)
        return std::string(what) + " " + std::to_string(i) + " is " + r.type(a[i]).str() + " in the reference but " +
               c.type(b[i]).str() + " in the candidate";
    return "";
  };
  std::string m = side("input", r.inputs(), c.inputs());
  return m.empty() ? side("output", r.outputs(), c.outputs()) : m;
}

}  // namespace

// Tolerances (relative; see float_check.h for how they apply). A device program differs from the f64 reference
// by the rounding of every tensor it stores (unit roundoff u: f16 2^-11 = 4.9e-4, bf16 2^-8 = 3.9e-3, f32
// 2^-24 = 6e-8), compounded along a chain of a few to ~10 stored intermediates, plus f32 accumulation and, on the
// large set, the amplification of a logit's rounding error by exp (d exp(x) / exp(x) = dx, and an f16 logit near
// 60 carries an absolute error up to 2^-6). The tolerances leave that budget with a margin of ~10-20 ulps for f16
// and bf16, and ~1700 ulps for f32, where the reference's own f64 rounding no longer dominates but long f32 sums
// in a different order do. They are far below any structural error (which the finite-field check excludes
// anyway) and far above what correct rewrites produce on small and medium shapes. The absolute part rtol*max|r_o|
// is norm-wise: the rounding error of a sum scales with the magnitude of its terms, not of its result, so an
// element that cancels to near zero is judged against the size of its output tensor; the floor (the type's
// smallest normal) covers outputs that are all (nearly) zero.
Tolerance float_tolerance(ir::DType t) {
  switch (t) {
    case ir::DType::f16: return {1e-2, 0x1p-14};
    case ir::DType::bf16: return {3e-2, 0x1p-126};
    case ir::DType::f32: return {1e-4, 0x1p-126};
  }
  return {1e-4, 0x1p-126};
}

OutputTolerance OutputTolerance::of(std::span<const double> reference, ir::DType t, double factor) {
  Tolerance tol = float_tolerance(t);
  double maxabs = 0;
  for (double v : reference)
    if (std::isfinite(v)) maxabs = std::max(maxabs, std::fabs(v));
  double rtol = tol.rtol * factor;
  return {rtol, rtol * maxabs + tol.floor * factor};
}

std::string FloatCheck::str() const {
  std::string head =
      sampled ? "float check (sampled, " + std::to_string(elements) + " output elements)" : "float check";
  std::string s = pass                ? head + " passed"
                  : input_set.empty() ? head + " FAILED: " + message
                                      : head + " FAILED on the " + input_set + " inputs: " + message;
  if (output >= 0)
    s += std::string("\n  ") + (pass ? "worst element" : "failing element") + ": output " + std::to_string(output) +
         " (" + output_desc + ") at " + index + " on the " + input_set + " inputs: reference " + num(reference) +
         ", candidate " + num(candidate) + " (" + (std::isfinite(error) ? num(error) : "inf") +
         " of the tolerance)";
  s += "\n  inputs: random in [-1, 1]";
  if (large_scale > 0) {
    s += "; large in [-" + num(large_scale) + ", " + num(large_scale) + "]";
    s += large_exp_arg > 0 ? " (reference's largest |exp argument| " + num(large_exp_arg) + ")" : " (no exp)";
  }
  char t[32];
  std::snprintf(t, sizeof t, "; %.2f s", seconds);
  return s + t;
}

struct FloatReference::Sets {
  std::optional<Sample> sample;  // FloatCheckOptions::sampled: the output elements every evaluation computes
  std::optional<Inputs> random_in, large_in;
  Values random_want, large_want;
  // Per output, the largest |spec in device precision - reference| over the set's elements: what the program as
  // written (its ops as predefined kernels, each storing its result in its element type) is off by itself. A
  // candidate is allowed that much on top of the dtype tolerance (docs/verification.md, "The float check").
  std::vector<double> random_spec_error, large_spec_error;
  double large_scale = 0, large_exp_arg = 0;
  bool large_done = false;  // the large set is made on the first candidate that passes the random set
};

FloatReference::FloatReference(const ir::Graph& reference, const FloatCheckOptions& options)
    : ref_(reference), opts_(options), sets_(std::make_unique<Sets>()) {
  if (opts_.sampled) {
    // A seed of the sample's own, from the options'. Trial 0's sample has the last position of every dim, trials
    // 1-3 random ones; all have both ends of the last dim. Four trials' rows: attention's sample is then 16 rows of
    // 4 elements, still a fraction of a second where the whole check takes half a minute.
    uint64_t seed = mix64(opts_.seed ^ 0x73616d706c65ULL);
    Sample s = choose_sample(ref_, seed, 0);
    // choose_sample's random positions come from its seed alone, so each trial gets a seed of its own.
    for (int trial = 1; trial < 4; ++trial)
      s = sample_union(s, choose_sample(ref_, mix64(seed + static_cast<uint64_t>(trial)), trial));
    sets_->sample = std::move(s);
  }
  sets_->random_in.emplace(ref_, opts_.seed, 1.0, !opts_.sampled);
  FloatDomain f64;
  sets_->random_want = evaluate(f64, ref_, *sets_->random_in, sample());
  sets_->random_spec_error = spec_error(ref_, *sets_->random_in, sets_->random_want, sample());
}

const Sample* FloatReference::sample() const { return sets_->sample ? &*sets_->sample : nullptr; }

FloatReference::~FloatReference() = default;

FloatCheck float_check(const ir::Graph& ref, const ir::Graph& cand, const FloatCheckOptions& opts) {
  return FloatReference(ref, opts).check(cand);
}

FloatCheck FloatReference::check(const ir::Graph& cand) {
  const ir::Graph& ref = ref_;
  const FloatCheckOptions& opts = opts_;
  auto start = std::chrono::steady_clock::now();
  FloatCheck fc;
  auto finish = [&] {
    fc.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return fc;
  };
  if (std::string m = interface_mismatch(ref, cand); !m.empty()) {
    fc.pass = false;
    fc.message = "interfaces differ: " + m;
    return finish();
  }
  std::vector<std::string> names = ir::printed_names(ref);

  const Sample* sample = this->sample();
  fc.sampled = sample != nullptr;
  // Element k of output o's values: its flat index in the output.
  auto flat = [&](size_t o, size_t k) { return sample ? sample->elements[o][k] : static_cast<int64_t>(k); };
  // Compares one input set; returns false (after filling fc) on failure.
  auto check_set = [&](const char* set, Inputs& inputs, const Values& want, const std::vector<double>& spec_err) {
    FloatDomain device{Precision::device};
    Values got = evaluate(device, cand, inputs, sample);
    double worst = -1;
    bool unsafe = false;
    int64_t at_o = -1, at_i = -1;
    fc.elements = 0;
    for (size_t o = 0; o < want.size(); ++o) {
      const std::vector<double> &r = want[o], &c = got[o];
      ir::DType dtype = ref.type(ref.outputs()[o]).dtype;
      OutputTolerance tol = OutputTolerance::of(r, dtype, opts.tolerance_factor);
      tol.absolute += spec_err[o];
      fc.elements += static_cast<int64_t>(r.size());
      for (size_t i = 0; i < r.size(); ++i) {
        double rv = r[i], cv = c[i];
        // A reference value that its element type cannot hold (inf, NaN, or beyond the type's range, so that the
        // output tensor itself overflows on a device) holds the candidate to nothing.
        if (!std::isfinite(ir::round_to_dtype(rv, dtype))) continue;
        if (!std::isfinite(cv)) {
          if (!unsafe) {  // report the first non-finite element
            unsafe = true;
            worst = INFINITY;
            at_o = static_cast<int64_t>(o);
            at_i = static_cast<int64_t>(i);
          }
          continue;
        }
        double err = tol.error(cv, rv);
        if (!unsafe && err > worst) {
          worst = err;
          at_o = static_cast<int64_t>(o);
          at_i = static_cast<int64_t>(i);
        }
      }
    }
    // Keep the worse of the two sets' worst elements (a failure is always worse than a pass).
    if (at_o < 0 || (worst <= fc.error && fc.output >= 0)) return !unsafe && worst <= 1;
    auto o = static_cast<size_t>(at_o), i = static_cast<size_t>(at_i);
    ir::TensorId t = ref.outputs()[o];
    fc.input_set = set;
    fc.output = static_cast<int>(o);
    fc.output_desc = names[t] + ": " + ref.type(t).str();
    fc.index = ref.type(t).index_str(flat(o, i));
    fc.reference = want[o][i];
    fc.candidate = got[o][i];
    fc.error = worst;
    if (unsafe) {
      fc.pass = false;
      fc.unsafe = true;
      fc.message = "unsafe: candidate produced inf/NaN (e.g. softmax without max subtraction overflows f16)";
    } else if (worst > 1) {
      fc.pass = false;
      fc.message = "the candidate is less accurate than the " + std::string(ir::dtype_name(ref.type(t).dtype)) +
                   " tolerance allows (rtol " + num(float_tolerance(ref.type(t).dtype).rtol * opts.tolerance_factor) +
                   ")";
    }
    return fc.pass;
  };

  if (!check_set("random", *sets_->random_in, sets_->random_want, sets_->random_spec_error)) return finish();
  Sets& s = *sets_;
  if (!s.large_done) {
    s.large_scale = large_scale(ref, opts, sample, s.large_exp_arg);
    s.large_in.emplace(ref, large_seed(opts.seed), s.large_scale, !sample);
    FloatDomain f64;
    s.large_want = evaluate(f64, ref, *s.large_in, sample);
    s.large_spec_error = spec_error(ref, *s.large_in, s.large_want, sample);
    s.large_done = true;
  }
  fc.large_scale = s.large_scale;
  fc.large_exp_arg = s.large_exp_arg;
  check_set("large", *s.large_in, s.large_want, s.large_spec_error);
  return finish();
}

}  // namespace morgana::verify
