// Element types. The list is one X-macro so that adding fp8 (e4m3, e5m2) is one line here plus its rounding rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace morgana::ir {

// X(name, bytes)
#define MORGANA_DTYPES(X) \
  X(f16, 2)               \
  X(bf16, 2)              \
  X(f32, 4)

enum class DType : uint8_t {
#define X(name, bytes) name,
  MORGANA_DTYPES(X)
#undef X
};

std::string_view dtype_name(DType t);
int dtype_bytes(DType t);
std::optional<DType> parse_dtype(std::string_view s);

// Rounds a double to the nearest value representable in `t` (round to nearest even), as a device would store it.
double round_to_dtype(double x, DType t);

// The storage bits of `t` (IEEE binary16, bfloat16, binary32; little-endian in memory): encode rounds `x` to `t`
// first (as round_to_dtype), decode is exact. For moving data to and from a device.
void encode_element(double x, DType t, void* dst);
double decode_element(const void* src, DType t);

}  // namespace morgana::ir
