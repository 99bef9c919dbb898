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

// What a tensor of morgana may hold, checked where every tensor is made (Graph's builder, so the parser too): every
// later product of dims (element counts, byte sizes, strides, offsets) then fits 64 bits with room to spare. A dim
// is a grid dimension somewhere (2^31 - 1 is CUDA's grid x); 2^48 elements (512 TiB of f16) is beyond any device.
// What a particular GPU or this machine can hold is checked by the command that needs it (compile and optimize:
// the target's dram_bytes; eval and verify: this machine's memory).
inline constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;
inline constexpr int64_t kMaxElements = int64_t{1} << 48;

struct TensorType {
  DType dtype = DType::f32;
  uint8_t rank = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank> strides{};  // in elements; row-major unless the user says otherwise

  static TensorType make(DType dtype, std::span<const int64_t> dims);  // row-major strides
  std::span<const int64_t> shape() const { return {dims.data(), rank}; }
  int64_t dim(int i) const { return dims[static_cast<size_t>(i)]; }
  int64_t numel() const;  // within kMaxElements for every tensor of a graph (addressable_problem)
  // Why this type is beyond kMaxDim or kMaxElements ("its 2 x 4294967296 x ... elements exceed ..."), or "".
  std::string addressable_problem() const;
  bool row_major() const;
  void set_row_major_strides();

  // The multi-index of row-major element `flat`, as text: "[3,0,17]".
  std::string index_str(int64_t flat) const;
  // "f16[64,1,128]"; strides are printed only when they are not row-major: "f16[4,8]{1,4}".
  std::string str() const;
  bool operator==(const TensorType&) const = default;
};

}  // namespace morgana::ir
