// A CPU model of the NVIDIA warp-level matrix instructions morgana's CUDA tile library uses, written from the PTX
// ISA (sections "Matrix Fragments for mma.m16n8k16 with floating point type" and "Warp-level matrix load
// instruction: ldmatrix"), in the ISA's own terms (groupID, threadID_in_group, element index i) and independently
// of the bit-weight lane layouts in the target files. Two uses: the host emulation of generated CUDA executes
// ldmatrix and mma.sync through it (host_prelude.h), and a test checks the target files' layouts against it.
#pragma once

namespace mg_isa {

constexpr int kLanes = 32;  // a warp, in the PTX ISA's definition of these instructions

struct RowCol {
  int row, col;
};

// mma.m16n8k16, .f16/.bf16 A (16x16, row): element i (0..7) of a thread's four .f16x2 registers a0..a3.
constexpr RowCol mma_m16n8k16_a(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  const int row = (i < 2 || (i >= 4 && i < 6)) ? group : group + 8;
  const int col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
  return {row, col};
}
// B (16x8, col): element i (0..3) of b0, b1.
constexpr RowCol mma_m16n8k16_b(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  return {tig * 2 + (i & 1) + (i >= 2 ? 8 : 0), group};
}
// C and D (16x8, f32): element i (0..3) of c0..c3.
constexpr RowCol mma_m16n8k16_c(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  return {i < 2 ? group : group + 8, tig * 2 + (i & 1)};
}

// ldmatrix .m8n8 .b16: matrix j's rows are addressed by lanes 8j..8j+7 (row r by lane 8j + r). Without .trans,
// lane `lane` receives in register j the two 16-bit elements at (row lane/4, columns 2*(lane%4) and +1) of
// matrix j; with .trans, those at (rows 2*(lane%4) and +1, column lane/4). Element h (0, 1) of the register:
constexpr RowCol ldmatrix_element(int lane, int h, bool trans) {
  return trans ? RowCol{2 * (lane % 4) + h, lane / 4} : RowCol{lane / 4, 2 * (lane % 4) + h};
}

}  // namespace mg_isa
