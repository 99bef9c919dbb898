// The float reference domain: every op in double precision (f64 mode), or rounded to float after every op so that
// sums accumulate in f32 (f32 mode). Its semantics are the op table's float functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "verify/interpreter.h"

namespace morgana::verify {

// f64: every op in double. f32: every op rounded to float (f32 accumulation). device: f32 arithmetic, and every
// kernel-level tensor (a predefined op's result, what a block op saves) rounded to its element type, as a GPU kernel
// stores it in global memory (f16 overflows to inf past 65504); tiles inside a block op stay in f32, as the lowering
// computes them, but for a matmul's operands, which a matrix instruction takes in their element type (a normalized
// Q tile, the exp of the scores: rounded to f16 or bf16 as the lowering stores them for it), except a normalized
// operand whose norm the lowering applies to the product instead (ir::norm_scaled_after: QK-norm's K), never stored.
enum class Precision : uint8_t { f64, f32, device };

struct FloatDomain {
  using Value = double;
  Precision precision = Precision::f64;

  double round(double v) const { return precision != Precision::f64 ? static_cast<double>(static_cast<float>(v)) : v; }
  // Device storage rounding (interpreter.h): whether every tensor an op makes is rounded to its element type, and
  // a value as a tensor of type `t` holds it.
  bool rounds_stores() const { return precision == Precision::device; }
  static double stored(double v, ir::DType t) { return ir::round_to_dtype(v, t); }
  double constant(double c) const { return round(c); }
  double unary(ir::OpCode op, double x, double s) const { return round(ir::op_info(op).unary(x, s)); }
  double binary(ir::FieldSem f, double a, double b) const {
    switch (f) {
      case ir::FieldSem::Add: return round(a + b);
      case ir::FieldSem::Sub: return round(a - b);
      case ir::FieldSem::Mul: return round(a * b);
      case ir::FieldSem::Div: return round(a / b);
      case ir::FieldSem::Max: return std::isnan(a) || a >= b ? a : b;
      default: bad_binary();
    }
  }
  // out[j] = ((a0*b0[j] + a1*b1[j]) + a2*b2[j]) + ...: the one summation order both interpreters use. With `cols`,
  // only the columns j = cols[i], i < n.
  void dot_rows(double* out, const double* a, const double* const* b, int64_t k, int64_t n,
                const int32_t* cols = nullptr) const {
    if (cols) {
      for (int64_t i = 0; i < n; ++i) {
        const int32_t j = cols[i];
        out[j] = round(a[0] * b[0][j]);
        for (int64_t kk = 1; kk < k; ++kk) out[j] = round(out[j] + round(a[kk] * b[kk][j]));
      }
      return;
    }
    for (int64_t j = 0; j < n; ++j) out[j] = round(a[0] * b[0][j]);
    for (int64_t kk = 1; kk < k; ++kk) {
      const double av = a[kk], *bk = b[kk];
      for (int64_t j = 0; j < n; ++j) out[j] = round(out[j] + round(av * bk[j]));
    }
  }
  // A float has no second part to skip (field.h's *_p forms): the same as the full ops.
  double binary_p(ir::FieldSem f, double a, double b) const { return binary(f, a, b); }
  double unary_p(ir::OpCode op, double x, double s) const { return unary(op, x, s); }
  void dot_rows_p(double* out, const double* a, const double* const* b, int64_t k, int64_t n,
                  const int32_t* cols = nullptr) const {
    dot_rows(out, a, b, k, n, cols);
  }
  [[noreturn]] static void bad_binary();
};

using FloatArray = Array<double>;

// Runs a kernel graph in the float domain.
std::vector<FloatArray> eval_float(const ir::Graph& g, std::span<const FloatArray> inputs,
                                   Precision precision = Precision::f64);

// Inputs for `g` drawn uniformly from [-scale, scale], rounded to each input's element type, from one seed.
std::vector<FloatArray> random_inputs(const ir::Graph& g, uint64_t seed, double scale = 1.0);
// Element `i` of that stream (the inputs' elements one after another, in parameter order), of element type `t`:
// for drawing a part of the inputs, in any order.
double random_input(uint64_t seed, uint64_t i, double scale, ir::DType t);

// A checksum that is stable across platforms for equal values: the sum and the sum of |x|, printed by the CLI.
struct Checksum {
  double sum = 0, abs_sum = 0;
};
Checksum checksum(const FloatArray& a);

// Largest |a - b| / (atol + rtol * |b|) over all elements; <= 1 means "close".
double max_scaled_error(const FloatArray& a, const FloatArray& b, double atol, double rtol);

}  // namespace morgana::verify
