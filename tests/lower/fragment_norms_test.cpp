// Pass norms_from_fragments (targets/lower/fragment_norms.cpp): QK-norm's query factors taken from the A fragments
// the matrix instruction is fed, their reduction and multiply gone; the CPU executor of the kernel IR still matches
// the float reference.
#include <gtest/gtest.h>

#include "targets/lower/lower.h"
#include "tests/lower/common.h"

namespace morgana::testing {
namespace {

const lower::LowerOptions kWithMma{.spill_to_global = false, .matrix_ops = {"mma.sync.aligned.m16n8k16"}};

int count(const lower::Kernel& k, lower::StmtKind kind, ir::OpCode op) {
  int n = 0;
  for (const auto* section : {&k.prologue, &k.body, &k.epilogue})
    for (const lower::Stmt& s : *section) n += s.kind == kind && s.op == op;
  return n;
}

const lower::Stmt* first_matmul(const lower::Kernel& k) {
  for (const auto* section : {&k.prologue, &k.body, &k.epilogue})
    for (const lower::Stmt& s : *section)
      if (s.kind == lower::StmtKind::Matmul) return &s;
  return nullptr;
}

// A one-kernel spec lowered for the H100 with its matrix instruction, and its kernel IR as text.
struct Lowered {
  ir::Graph g;
  lower::LoweredProgram p;
  std::string ir;
  const lower::Kernel& kernel() const { return p.kernels[0]; }
};
Lowered lowered_with_mma(const std::string& file) {
  Lowered l;
  l.g = std::move(ir::parse_file(file).programs[0]);
  l.p = lower::lower(l.g, targets::load_target("targets/cuda/h100.toml"), kWithMma);
  l.ir = lower::print(l.p);
  return l;
}

// Q's rows from the fragments; K's columns, which every warp's task spans, keep their reduction and multiply.
TEST(FragmentNorms, QueryFactorsComeFromTheFragments) {
  const Lowered l = lowered_with_mma("tests/lower/specs/qk_norm_scores.mg");
  const lower::Stmt* m = first_matmul(l.kernel());
  ASSERT_NE(m, nullptr) << l.ir;
  ASSERT_TRUE(m->norm_rows) << l.ir;
  // rsqrt(sum * (1/64) + eps), as the reduction's maps were; then K's factor, as before.
  EXPECT_NE(l.ir.find("s_scaled_once = matmul(q, k) * rsqrt(add_scalar(mul_scalar(row_sum_squares(q), 0.015625), "
                      "1e-06))"),
            std::string::npos)
      << l.ir;
  EXPECT_NE(l.ir.find("s = mul(s_scaled_once, kn_rms)"), std::string::npos) << l.ir;
  EXPECT_EQ(count(l.kernel(), lower::StmtKind::Reduce, ir::OpCode::reduce_sum), 1) << l.ir;  // K's
  EXPECT_EQ(count(l.kernel(), lower::StmtKind::Binary, ir::OpCode::mul), 1) << l.ir;
  for (const lower::Tile& t : l.kernel().tiles) EXPECT_NE(t.name, "qn_rms") << l.ir;
  for (uint64_t seed : {1, 2, 3}) expect_matches_reference(l.g, l.p, seed, "E");
}

// The same when K's factor is the first multiply: the row factor moves into the matmul, K's multiply writes the
// scaled product.
TEST(FragmentNorms, TheRowFactorMayComeSecondInTheChain) {
  const Lowered l = lowered_with_mma("tests/lower/specs/kq_norm_scores.mg");
  const lower::Stmt* m = first_matmul(l.kernel());
  ASSERT_NE(m, nullptr) << l.ir;
  ASSERT_TRUE(m->norm_rows) << l.ir;
  EXPECT_NE(l.ir.find("s = mul(s_unscaled, kn_rms)"), std::string::npos) << l.ir;
  EXPECT_EQ(count(l.kernel(), lower::StmtKind::Reduce, ir::OpCode::reduce_sum), 1) << l.ir;
  for (uint64_t seed : {1, 2}) expect_matches_reference(l.g, l.p, seed, "E");
}

// A flash kernel normalises Q once in its prologue (its norm and the scores are in different sections, so the
// product is not scaled by it) and K's columns in every iteration: nothing moves.
TEST(FragmentNorms, AFlashKernelKeepsItsReductions) {
  const Lowered l = lowered_with_mma("tests/gpu/specs/flash_qknorm.mg");
  const lower::Stmt* m = first_matmul(l.kernel());
  ASSERT_NE(m, nullptr) << l.ir;
  EXPECT_FALSE(m->norm_rows) << l.ir;
  EXPECT_NE(l.ir.find("qn = mul(q, qn_rms)"), std::string::npos) << l.ir;
  EXPECT_NE(l.ir.find("s = mul(s_unscaled, kn_rms)"), std::string::npos) << l.ir;
}

// Without a matrix instruction the product is computed by the scalar routine, and a product whose K is split over
// warps is published to shared memory before it is scaled: the reductions stay in both.
TEST(FragmentNorms, ScalarAndSplitMatmulsKeepTheirReductions) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  struct Case {
    const char* file;
    lower::LowerOptions options;
  };
  for (const Case& c : {Case{"tests/lower/specs/qk_norm_scores.mg", {}}, Case{"tests/lower/specs/both_norms.mg", {}},
                        Case{"tests/lower/specs/both_norms.mg", kWithMma}}) {
    ir::Graph g = std::move(ir::parse_file(c.file).programs[0]);
    lower::LoweredProgram p = lower::lower(g, h100, c.options);
    const lower::Stmt* m = first_matmul(p.kernels[0]);
    ASSERT_NE(m, nullptr) << c.file;
    EXPECT_FALSE(m->norm_rows) << c.file << "\n" << lower::print(p);
    EXPECT_EQ(count(p.kernels[0], lower::StmtKind::Reduce, ir::OpCode::reduce_sum), 2) << c.file;
  }
}

}  // namespace
}  // namespace morgana::testing
