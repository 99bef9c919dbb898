#include "ir/type.h"

#include <cstdint>

#include "ir/diagnostic.h"

namespace morgana::ir {

TensorType TensorType::make(DType dtype, std::span<const int64_t> dims) {
  MG_CHECK(!dims.empty() && dims.size() <= kMaxRank, "rank out of range");
  TensorType t;
  t.dtype = dtype;
  t.rank = static_cast<uint8_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) t.dims[i] = dims[i];
  t.set_row_major_strides();
  return t;
}

int64_t TensorType::numel() const {
  // Saturating: a type is built (and may be printed in a message) before addressable_problem refuses it.
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    if (__builtin_mul_overflow(n, dims[static_cast<size_t>(i)], &n)) return INT64_MAX;
  return n;
}

std::string TensorType::addressable_problem() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    const int64_t d = dims[static_cast<size_t>(i)];
    if (d > kMaxDim)
      return "dim " + std::to_string(i) + " is " + std::to_string(d) + ", more than morgana's limit of " +
             std::to_string(kMaxDim);
    // Every graph built checks its tensors (the search builds millions): a multiply with an overflow flag, no divide.
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      return "its elements number more than morgana's limit of " + std::to_string(kMaxElements) + " (2^48) per tensor";
  }
  return "";
}

void TensorType::set_row_major_strides() {
  // Saturating, like numel(): the strides of a type that addressable_problem then refuses are never used, and
  // computing them must not overflow (found by tests/fuzz: f16[4294967296,4294967296]).
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[static_cast<size_t>(i)] = s;
    if (__builtin_mul_overflow(s, dims[static_cast<size_t>(i)], &s)) s = INT64_MAX;
  }
  for (int i = rank; i < kMaxRank; ++i) strides[static_cast<size_t>(i)] = 0;
}

bool TensorType::row_major() const {
  TensorType t = *this;
  t.set_row_major_strides();
  return t.strides == strides;
}

std::string TensorType::index_str(int64_t flat) const {
  std::string s = "]";
  for (int d = rank - 1; d >= 0; --d) {
    s = std::to_string(flat % dims[static_cast<size_t>(d)]) + (d == rank - 1 ? "" : ",") + s;
    flat /= dims[static_cast<size_t>(d)];
  }
  return "[" + s;
}

std::string TensorType::str() const {
  std::string s(dtype_name(dtype));
  s += '[';
  for (int i = 0; i < rank; ++i) s += (i ? "," : "") + std::to_string(dims[static_cast<size_t>(i)]);
  s += ']';
  if (!row_major()) {
    s += '{';
    for (int i = 0; i < rank; ++i) s += (i ? "," : "") + std::to_string(strides[static_cast<size_t>(i)]);
    s += '}';
  }
  return s;
}

}  // namespace morgana::ir
