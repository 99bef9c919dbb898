// Tensor types: element type, shape, strides. Fixed inline storage so that graphs copy as plain data during search.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "ir/dtype.h"

namespace morgana::ir {

// The one place the rank limit lives. Raising it costs memory in every tensor of every searched graph.
inline constexpr int kMaxRank = 4;

struct TensorType {
  DType dtype = DType::f32;
  uint8_t rank = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank> strides{};  // in elements; row-major unless the user says otherwise

  static TensorType make(DType dtype, std::span<const int64_t> dims);  // row-major strides
  std::span<const int64_t> shape() const { return {dims.data(), rank}; }
  int64_t dim(int i) const { return dims[static_cast<size_t>(i)]; }
  int64_t numel() const;
  bool row_major() const;
  void set_row_major_strides();

  // The multi-index of row-major element `flat`, as text: "[3,0,17]".
  std::string index_str(int64_t flat) const;
  // "f16[64,1,128]"; strides are printed only when they are not row-major: "f16[4,8]{1,4}".
  std::string str() const;
  bool operator==(const TensorType&) const = default;
};

}  // namespace morgana::ir
