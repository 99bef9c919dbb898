#include "verify/float_domain.h"

#include <cmath>

namespace morgana::verify {

void FloatDomain::bad_binary() { MG_CHECK(false, "FloatDomain::binary on a non-binary semantics"); __builtin_unreachable(); }

std::vector<FloatArray> eval_float(const ir::Graph& g, std::span<const FloatArray> inputs, Precision precision) {
  FloatDomain d{precision};
  Interpreter<FloatDomain> interp(d);
  return interp.run(g, inputs);
}

std::vector<FloatArray> random_inputs(const ir::Graph& g, uint64_t seed, double scale) {
  // splitmix64: fast, and the same stream on every platform (std::uniform_real_distribution is not).
  uint64_t state = seed;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  std::vector<FloatArray> out;
  for (ir::TensorId t : g.inputs()) {
    FloatArray a = make_array<double>(g.type(t), 0.0);
    for (double& v : a.data) {
      double u = static_cast<double>(next() >> 11) * 0x1.0p-53;  // [0, 1)
      v = ir::round_to_dtype((2 * u - 1) * scale, g.type(t).dtype);
    }
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
