// Abstract expressions: hash-consing and normal forms, and the abstraction of every op (the oracle that
// answers sub-expression queries over them is search/subexpr_oracle.h, tested in tests/search).
#include <gtest/gtest.h>

#include <map>

#include "ir/abstract_expr.h"
#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace morgana::ir {
namespace {

TEST(AbstractExpr, HashConsesAndNormalises) {
  ExprArena ar;
  EXPECT_EQ(ar.parse("Mul(x0, x1)"), ar.mul(ar.var(0), ar.var(1)));
  EXPECT_NE(ar.parse("Mul(x0, x1)"), ar.parse("Mul(x1, x0)"));  // commutativity is the e-graph's business
  EXPECT_EQ(ar.str(ar.parse("Sum(4, Sum(1024, Mul(x0, x1)))")), "Sum(4096, Mul(x0, x1))");
  EXPECT_EQ(ar.str(ar.parse("Sum(1, x3)")), "x3");
  EXPECT_EQ(ar.str(ar.parse("Mul(x0, One)")), "x0");
  EXPECT_EQ(ar.str(ar.parse("Div(x0, Shift)")), "x0");
  EXPECT_EQ(ar.str(ar.parse("Exp(Add(Shift, Shift))")), "Shift");
  EXPECT_EQ(ar.str(ar.parse("Div(Shift, x1)")), "Div(One, x1)");
  EXPECT_EQ(ar.str(ar.parse("Exp(Cat(x0, x1))")), "Cat(Exp(x0), Exp(x1))");
  EXPECT_EQ(ar.str(ar.parse("Cat(x2, x2)")), "x2");
  EXPECT_EQ(ar.str(ar.parse("  Rms( 64 ,x0 ) ")), "Rms(64, x0)");
  EXPECT_EQ(ar.str(ar.parse("rsqrt(x0)")), "rsqrt(x0)");  // an op name: Other(rsqrt, x0)
  EXPECT_THROW(ar.parse("Sum(0, x0)"), UserError);
  EXPECT_THROW(ar.parse("Mul(x0)"), UserError);
  EXPECT_THROW(ar.parse("Add(x0, x1) x2"), UserError);
  EXPECT_THROW(ar.parse("matmul(x0)"), UserError);  // not a unary op
  EXPECT_THROW(ar.parse("tanh(x0)"), UserError);    // not an op
}

// The abstraction of each op, from one spec that uses them all.
TEST(AbstractExpr, AbstractionOfEveryOp) {
  const char* text = R"(
kernel all(X: f32[8,16], Y: f32[8,16], W: f32[16,4]) {
  a = matmul(X, W)
  b = exp(X)
  c = sqrt(X)
  d = rsqrt(X)
  e = square(X)
  f = silu(X)
  g = gelu(X)
  h = relu(X)
  i = mul_scalar(X, s=0.5)
  j = add_scalar(X, s=2)
  k = add(X, Y)
  l = sub(X, Y)
  m = mul(X, Y)
  n = div(X, Y)
  o = reduce_sum(X, dim=1)
  p = reduce_sum(X, dim=1, to=4)
  q = reduce_max(X, dim=1)
  r = rms_norm(X, dim=1)
  s = softmax(X, dim=1)
  t = concat(X, Y, dim=0)
  u = sub(X, q)
  v0 = sub(q, q)
  v = exp(v0)
  w = mul(X, v)
  return a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u, v, w
})";
  Module m = parse_module(text);
  const Graph& g = m.programs[0];
  ExprArena ar;
  std::vector<ExprId> ex = abstract_exprs(g, ar);
  std::vector<std::string> names = printed_names(g);
  std::map<std::string, std::string> got;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (ex[t] != kNoExpr) got[names[t]] = ar.str(ex[t]);
  std::map<std::string, std::string> want = {
      {"X", "x0"},
      {"Y", "x1"},
      {"W", "x2"},
      {"a", "Sum(16, Mul(x0, x2))"},
      {"b", "Exp(x0)"},
      {"c", "Sqrt(x0)"},
      {"d", "Div(One, Sqrt(x0))"},
      {"e", "Mul(x0, x0)"},
      {"f", "Silu(x0)"},
      {"g", "Gelu(x0)"},
      {"h", "Relu(x0)"},
      {"i", "x0"},
      {"j", "x0"},
      {"k", "Add(x0, x1)"},
      {"l", "Add(x0, x1)"},
      {"m", "Mul(x0, x1)"},
      {"n", "Div(x0, x1)"},
      {"o", "Sum(16, x0)"},
      {"p", "Sum(4, x0)"},
      {"q", "Shift"},
      {"r", "Div(x0, Rms(16, x0))"},
      {"s", "Div(Exp(x0), Sum(16, Exp(x0)))"},
      {"t", "Cat(x0, x1)"},
      {"u", "x0"},
      {"v0", "Shift"},
      {"v", "Shift"},
      {"w", "x0"},
  };
  EXPECT_EQ(got, want);
}

TEST(AbstractExpr, ConcatFeedingMatmulReductionAndElementwise) {
  const char* text = R"(
kernel cat(X: f32[4,8], T: f32[4,2], W: f32[8,6], B: f32[2,6], Z: f32[3,8]) {
  l = concat(X, T, dim=1)
  r = concat(W, B, dim=0)
  p = matmul(l, r)
  rows = concat(X, Z, dim=0)
  q = matmul(rows, W)
  s = reduce_sum(l, dim=1)
  s2 = reduce_sum(l, dim=1, to=2)
  e = mul(l, l)
  return p, q, s, s2, e
})";
  Module m = parse_module(text);
  const Graph& g = m.programs[0];
  ExprArena ar;
  std::vector<ExprId> ex = abstract_exprs(g, ar);
  std::vector<std::string> names = printed_names(g);
  auto expr = [&](const std::string& name) {
    for (TensorId t = 0; t < g.num_tensors(); ++t)
      if (names[t] == name) return ar.str(ex[t]);
    return std::string("?");
  };
  EXPECT_EQ(expr("p"), "Add(Sum(8, Mul(x0, x2)), Sum(2, Mul(x1, x3)))");
  // A concat along rows (not the contraction dim): the sum distributes over it.
  EXPECT_EQ(expr("q"), "Cat(Sum(8, Mul(x0, x2)), Sum(8, Mul(x4, x2)))");
  EXPECT_EQ(expr("s"), "Add(Sum(8, x0), Sum(2, x1))");
  EXPECT_EQ(expr("s2"), "Add(Sum(4, x0), x1)");
  EXPECT_EQ(expr("e"), "Cat(Mul(x0, x0), Mul(x1, x1))");  // piecewise, not the four cross products
}

}  // namespace
}  // namespace morgana::ir
