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

void encode_element(double x, DType t, void* dst) {
  double r = round_to_dtype(x, t);
  auto f = static_cast<float>(r);  // exact: every f16 and bf16 value is a float
  uint32_t fb;
  std::memcpy(&fb, &f, 4);
  uint16_t h;
  switch (t) {
    case DType::f32:
      std::memcpy(dst, &fb, 4);
      return;
    case DType::bf16:
      h = static_cast<uint16_t>(std::isnan(f) ? 0x7fc0 : fb >> 16);  // exact after rounding
      break;
    case DType::f16: {
      uint16_t sign = static_cast<uint16_t>((fb >> 16) & 0x8000);
      if (std::isnan(r)) {
        h = 0x7e00;
      } else if (std::isinf(r)) {
        h = sign | 0x7c00;
      } else if (r == 0) {
        h = sign;
      } else {
        int exp;
        double m = std::frexp(std::fabs(r), &exp);  // |r| = m * 2^exp, m in [0.5, 1)
        if (exp - 1 < -14) {
          h = sign | static_cast<uint16_t>(std::ldexp(std::fabs(r), 24));  // subnormal: a multiple of 2^-24
        } else {
          auto mant = static_cast<uint16_t>(std::ldexp(m, 11)) & 0x3ff;  // 11 significant bits, drop the leading 1
          h = sign | static_cast<uint16_t>((exp - 1 + 15) << 10) | mant;
        }
      }
      break;
    }
    default:
      h = 0;
  }
  std::memcpy(dst, &h, 2);
}

double decode_element(const void* src, DType t) {
  if (t == DType::f32) {
    float f;
    std::memcpy(&f, src, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, src, 2);
  if (t == DType::bf16) {
    uint32_t fb = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &fb, 4);
    return f;
  }
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return mant ? std::nan("") : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

}  // namespace morgana::ir
