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
template <int mant, int emin, int emax>
double round_binary(double x) {
  if (!std::isfinite(x) || x == 0.0) return x;
  uint64_t bits = std::bit_cast<uint64_t>(x);
  int lead = static_cast<int>((bits >> 52) & 0x7ff) - 1023;  // exponent of the leading bit (x is a normal double
                                                             // here: every format we round to has emin > -1022)
  double r;
  if (lead >= emin) {
    // Normal range: round the double's mantissa to `mant` bits, half to even, on the bit pattern. A carry out of
    // the mantissa correctly bumps the exponent.
    const int shift = 52 - mant;
    const uint64_t half = (uint64_t{1} << (shift - 1)) - 1;
    bits += half + ((bits >> shift) & 1);
    bits &= ~((uint64_t{1} << shift) - 1);
    r = std::bit_cast<double>(bits);
  } else {
    static const double quantum = std::ldexp(1.0, emin - mant);  // subnormals share one quantum
    r = std::nearbyint(x / quantum) * quantum;      // default rounding mode is nearest-even
  }
  static const double max_finite = (2.0 - std::ldexp(1.0, -mant)) * std::ldexp(1.0, emax);
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
      return round_binary<10, -14, 15>(x);
    case DType::bf16:
      return round_binary<7, -126, 127>(x);
    case DType::f32:
      return static_cast<double>(static_cast<float>(x));
  }
  return x;
}

}  // namespace morgana::ir
