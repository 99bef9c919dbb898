#include "verify/float_domain.h"

#include "verify/splitmix.h"

#include <cmath>

namespace morgana::verify {

void FloatDomain::bad_binary() { MG_CHECK(false, "FloatDomain::binary on a non-binary semantics"); __builtin_unreachable(); }

std::vector<FloatArray> eval_float(const ir::Graph& g, std::span<const FloatArray> inputs, Precision precision) {
  FloatDomain d{precision};
  Interpreter<FloatDomain> interp(d);
  return interp.run(g, inputs);
}

double random_input(uint64_t seed, uint64_t i, double scale, ir::DType t) {
  // splitmix64's (i + 1)-th output from state `seed`, drawn directly (splitmix.h).
  double u = static_cast<double>(mix64(seed + (i + 1) * kGoldenGamma) >> 11) * 0x1.0p-53;  // [0, 1)
  return ir::round_to_dtype((2 * u - 1) * scale, t);
}

std::vector<FloatArray> random_inputs(const ir::Graph& g, uint64_t seed, double scale) {
  uint64_t i = 0;
  std::vector<FloatArray> out;
  for (ir::TensorId t : g.inputs()) {
    FloatArray a = make_array<double>(g.type(t), 0.0);
    for (double& v : a.data) v = random_input(seed, i++, scale, g.type(t).dtype);
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
