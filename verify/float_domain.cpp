#include "verify/float_domain.h"

#include <cmath>

namespace morgana::verify {

double FloatDomain::binary(ir::FieldSem f, double a, double b) const {
  switch (f) {
    case ir::FieldSem::Add: return round(a + b);
    case ir::FieldSem::Sub: return round(a - b);
    case ir::FieldSem::Mul: return round(a * b);
    case ir::FieldSem::Div: return round(a / b);
    case ir::FieldSem::Max: return std::isnan(a) || a >= b ? a : b;
    default: break;
  }
  MG_CHECK(false, "FloatDomain::binary on a non-binary semantics");
  return 0;
}

std::vector<FloatArray> eval_float(const ir::Graph& g, std::span<const FloatArray> inputs, Precision precision) {
  FloatDomain d{precision};
  Interpreter<FloatDomain> interp(d);
  return interp.run(g, inputs);
}

std::vector<FloatArray> random_inputs(const ir::Graph& g, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  std::vector<FloatArray> out;
  for (ir::TensorId t : g.inputs()) {
    FloatArray a = make_array<double>(g.type(t), 0.0);
    for (double& v : a.data) v = ir::round_to_dtype(dist(rng), g.type(t).dtype);
    out.push_back(std::move(a));
  }
  return out;
}

Checksum checksum(const FloatArray& a) {
  Checksum c;
  for (double v : a.data) {
    c.sum += v;
    c.abs_sum += std::fabs(v);
  }
  return c;
}

double max_scaled_error(const FloatArray& a, const FloatArray& b, double atol, double rtol) {
  MG_CHECK(a.data.size() == b.data.size(), "comparing arrays of different sizes");
  double worst = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    double e = std::fabs(a.data[i] - b.data[i]) / (atol + rtol * std::fabs(b.data[i]));
    if (std::isnan(e)) return INFINITY;
    worst = std::max(worst, e);
  }
  return worst;
}

}  // namespace morgana::verify
