#include "ir/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace morgana::ir {

namespace {
struct DTypeInfo {
  std::string_view name;
  int bytes;
};
constexpr DTypeInfo kDTypes[] = {
#define X(name, bytes) {#name, bytes},
    MORGANA_DTYPES(X)
#undef X
};

// Rounds a float to a narrower format with `mant` explicit mantissa bits and exponent range [emin, emax]
// (of normal numbers), with subnormals and overflow to infinity, round-to-nearest-even.
double round_binary(double x, int mant, int emin, int emax) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int e;
  std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1, so the leading bit has exponent e-1
  int lead = e - 1;
  if (lead < emin) lead = emin;  // subnormal range keeps a fixed quantum
  double quantum = std::ldexp(1.0, lead - mant);
  double r = std::nearbyint(x / quantum) * quantum;  // default rounding mode is nearest-even
  double max_finite = std::ldexp(2.0 - std::ldexp(1.0, -mant), emax);
  if (std::fabs(r) > max_finite) return std::copysign(INFINITY, x);
  return r;
}
}  // namespace

std::string_view dtype_name(DType t) { return kDTypes[static_cast<int>(t)].name; }
int dtype_bytes(DType t) { return kDTypes[static_cast<int>(t)].bytes; }

std::optional<DType> parse_dtype(std::string_view s) {
  for (size_t i = 0; i < std::size(kDTypes); ++i)
    if (kDTypes[i].name == s) return static_cast<DType>(i);
  return std::nullopt;
}

double round_to_dtype(double x, DType t) {
  switch (t) {
    case DType::f16:
      return round_binary(x, 10, -14, 15);
    case DType::bf16:
      return round_binary(x, 7, -126, 127);
    case DType::f32:
      return static_cast<double>(static_cast<float>(x));
  }
  return x;
}

}  // namespace morgana::ir
