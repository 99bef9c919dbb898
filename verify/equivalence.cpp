#include "verify/equivalence.h"

#include <chrono>

#include "ir/printer.h"
#include "verify/field.h"
#include "verify/interpreter.h"

namespace morgana::verify {

namespace {

std::string index_str(const ir::TensorType& t, int64_t flat) {
  std::string s = "]";
  for (int d = t.rank - 1; d >= 0; --d) {
    s = std::to_string(flat % t.dim(d)) + (d == t.rank - 1 ? "" : ",") + s;
    flat /= t.dim(d);
  }
  return "[" + s;
}

std::string value_str(const FieldDomain& d, const FieldValue& v) { return std::to_string(d.canonical(v.u)) + " (mod p)"; }

bool same_shape(const ir::TensorType& a, const ir::TensorType& b) {
  return a.rank == b.rank && std::equal(a.shape().begin(), a.shape().end(), b.shape().begin());
}

// Inputs and outputs must line up one to one, with equal shapes and element types.
std::string interface_mismatch(const ir::Graph& ref, const ir::Graph& cand) {
  auto side = [](const char* what, std::span<const ir::TensorId> r, std::span<const ir::TensorId> c,
                 const ir::Graph& rg, const ir::Graph& cg) -> std::string {
    if (r.size() != c.size())
      return std::string("the reference has ") + std::to_string(r.size()) + " " + what + "s, the candidate " +
             std::to_string(c.size());
    for (size_t i = 0; i < r.size(); ++i)
      if (!same_shape(rg.type(r[i]), cg.type(c[i])) || rg.type(r[i]).dtype != cg.type(c[i]).dtype)
        return std::string(what) + " " + std::to_string(i) + " is " + rg.type(r[i]).str() + " in the reference but " +
               cg.type(c[i]).str() + " in the candidate";
    return "";
  };
  std::string m = side("input", ref.inputs(), cand.inputs(), ref, cand);
  return m.empty() ? side("output", ref.outputs(), cand.outputs(), ref, cand) : m;
}

}  // namespace

std::string Verdict::str() const {
  switch (kind) {
    case Equivalent: return "equivalent (" + std::to_string(trials) + " trial" + (trials == 1 ? "" : "s") + ")";
    case Different: return "NOT equivalent: " + evidence;
    case InterfaceMismatch: return "NOT equivalent (interfaces differ): " + evidence;
    case Inconclusive: return "inconclusive: " + evidence;
  }
  return "?";
}

Verdict equivalent(const ir::Graph& ref, const ir::Graph& cand, const EquivalenceOptions& opts) {
  auto start = std::chrono::steady_clock::now();
  Verdict v;
  auto done = [&](Verdict::Kind k, std::string evidence) {
    v.kind = k;
    v.evidence = std::move(evidence);
    v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return v;
  };
  if (std::string m = interface_mismatch(ref, cand); !m.empty()) return done(Verdict::InterfaceMismatch, m);
  std::vector<std::string> names = ir::printed_names(ref);
  for (int trial = 0; trial < opts.trials; ++trial) {
    // Each trial's randomness (inputs, ω, oracle key) comes from (seed, trial) alone.
    uint64_t trial_seed = opts.seed * 0x100000001b3ULL + static_cast<uint64_t>(trial) * 0x9e3779b97f4a7c15ULL;
    FieldDomain domain(trial_seed);
    uint64_t state = trial_seed ^ 0xa5a5a5a5a5a5a5a5ULL;
    std::vector<Array<FieldValue>> inputs;
    for (ir::TensorId t : ref.inputs()) {
      Array<FieldValue> a = make_array<FieldValue>(ref.type(t), {});
      for (FieldValue& x : a.data) x = domain.random(state);
      inputs.push_back(std::move(a));
    }
    Interpreter<FieldDomain> interp(domain);
    std::vector<Array<FieldValue>> want, got;
    try {
      want = interp.run(ref, inputs);
    } catch (const FieldDivisionByZero&) {
      return done(Verdict::Inconclusive, "the reference divides by a zero residue in trial " + std::to_string(trial));
    }
    try {
      got = interp.run(cand, inputs);
    } catch (const FieldDivisionByZero&) {
      return done(Verdict::Inconclusive, "the candidate divides by a zero residue in trial " + std::to_string(trial));
    }
    ++v.trials;
    for (size_t o = 0; o < want.size(); ++o)
      for (size_t i = 0; i < want[o].data.size(); ++i)
        // Outputs compare in Z_p: the Z_q part exists to feed exp's exponent and is an oracle value after an exp.
        if (want[o].data[i].u != got[o].data[i].u) {
          ir::TensorId t = ref.outputs()[o];
          return done(Verdict::Different,
                      "output " + std::to_string(o) + " (" + names[t] + ": " + ref.type(t).str() + ") differs at " +
                          index_str(ref.type(t), static_cast<int64_t>(i)) + " in trial " + std::to_string(trial) +
                          ": reference " + value_str(domain, want[o].data[i]) + ", candidate " +
                          value_str(domain, got[o].data[i]));
        }
  }
  return done(Verdict::Equivalent, "");
}

}  // namespace morgana::verify
