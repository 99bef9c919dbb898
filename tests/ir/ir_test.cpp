// Unit tests of ir/: dtypes, types, the op table, graph building, hashing, truncation, shape rules, verifier.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "ir/diagnostic.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verify.h"

namespace morgana::ir {
namespace {

TensorType T(DType d, std::initializer_list<int64_t> dims) {
  std::vector<int64_t> v(dims);
  return TensorType::make(d, v);
}

TEST(DType, RoundsToNearestEven) {
  EXPECT_EQ(round_to_dtype(1.0 + 1.0 / 2048, DType::f16), 1.0);                // halfway, ties to even
  EXPECT_EQ(round_to_dtype(1.0 + 3.0 / 2048, DType::f16), 1.0 + 2.0 / 1024);  // halfway, ties to even (up)
  EXPECT_EQ(round_to_dtype(65504.0, DType::f16), 65504.0);
  EXPECT_TRUE(std::isinf(round_to_dtype(65520.0, DType::f16)));
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -24), DType::f16), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -26), DType::f16), 0.0);
  EXPECT_EQ(round_to_dtype(1.0 + 1.0 / 256, DType::bf16), 1.0);
  EXPECT_EQ(round_to_dtype(0.1, DType::f32), static_cast<double>(0.1f));
  EXPECT_EQ(round_to_dtype(-2.5, DType::bf16), -2.5);
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_FALSE(parse_dtype("f64").has_value());
}

TEST(TensorType, PrintsShapeAndNonDefaultStrides) {
  TensorType t = T(DType::f16, {64, 1, 128});
  EXPECT_EQ(t.str(), "f16[64,1,128]");
  EXPECT_EQ(t.numel(), 64 * 128);
  t.strides = {1, 64, 64, 0};
  EXPECT_EQ(t.str(), "f16[64,1,128]{1,64,64}");
}

TEST(OpTable, EveryRowIsConsistent) {
  for (const OpInfo& info : all_ops()) {
    SCOPED_TRACE(std::string(info.name));
    ASSERT_TRUE(op_by_name(info.name).has_value());
    EXPECT_EQ(op_name(*op_by_name(info.name)), info.name);
    EXPECT_NE(info.levels, 0);
    EXPECT_EQ(info.required & ~info.attrs, 0u) << "required attrs must be accepted";
    if (info.kind == OpKind::Unary) {
      EXPECT_NE(info.unary, nullptr);
    }
    if (info.kind == OpKind::Binary || info.kind == OpKind::Reduce || info.kind == OpKind::Accum) {
      EXPECT_NE(info.binary, nullptr);
    }
  }
  EXPECT_EQ(static_cast<int>(all_ops().size()), kNumOps);
}

TEST(Graph, InfersShapesAndHashesStructurally) {
  auto build = [](bool swap) {
    Graph g;
    TensorId q = g.add_input(T(DType::f16, {64, 1, 128}), "Q");
    TensorId k = g.add_input(T(DType::f16, {64, 128, 4096}), "K");
    TensorId a = g.add1(OpCode::matmul, {q, k});
    Attrs d;
    d.dim = 2;
    TensorId s = g.add1(OpCode::softmax, {a}, d);
    TensorId o = swap ? g.add1(OpCode::mul, {s, a}) : g.add1(OpCode::mul, {a, s});
    g.add_output(o);
    return g;
  };
  Graph g = build(false);
  EXPECT_EQ(g.type(g.outputs()[0]).str(), "f16[64,1,4096]");
  EXPECT_EQ(g.hash(), build(false).hash());
  EXPECT_NE(g.hash(), build(true).hash()) << "operand order is part of the structure";
  EXPECT_TRUE(verify(g).empty());
}

TEST(Graph, TruncateRestoresAPrefix) {
  Graph g;
  TensorId x = g.add_input(T(DType::f32, {4, 8}), "X");
  TensorId e = g.add1(OpCode::exp, {x});
  g.add_output(e);
  uint64_t h = g.hash();
  size_t n = g.nodes().size();
  TensorId s = g.add1(OpCode::square, {e});
  g.add_output(s);
  EXPECT_NE(g.hash(), h);
  g.truncate(n);
  EXPECT_EQ(g.hash(), h);
  EXPECT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.num_tensors(), 2u);
}

TEST(ShapeRules, RejectMismatchesWithAClearMessage) {
  Graph g;
  TensorId a = g.add_input(T(DType::f16, {64, 128}), "A");
  TensorId b = g.add_input(T(DType::f16, {64, 4096}), "B");
  TensorId c = g.add_input(T(DType::f32, {64, 128}), "C");
  try {
    g.add1(OpCode::matmul, {a, b});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(e.message(), "'matmul': inner dimensions differ: f16[64,128] x f16[64,4096] (128 vs 64)");
  }
  EXPECT_THROW(g.add1(OpCode::add, {a, c}), UserError);  // dtypes differ
  EXPECT_THROW(g.add1(OpCode::add, {a, b}), UserError);  // no broadcast
  Attrs r;
  r.dim = 1;
  r.to = 3;
  EXPECT_THROW(g.add1(OpCode::reduce_sum, {a}, r), UserError);  // 3 does not divide 128
  r.to = 4;
  EXPECT_EQ(g.type(g.add1(OpCode::reduce_sum, {a}, r)).str(), "f16[64,4]");
  Attrs cat;
  cat.dim = 1;
  EXPECT_EQ(g.type(g.add1(OpCode::concat, {a, b}, cat)).str(), "f16[64,4224]");
}

TEST(ShapeRules, BroadcastingAndBatchedMatmul) {
  Graph g;
  TensorId x = g.add_input(T(DType::f32, {8, 1, 16}), "X");
  TensorId y = g.add_input(T(DType::f32, {4, 1}), "Y");
  EXPECT_EQ(g.type(g.add1(OpCode::add, {x, y})).str(), "f32[8,4,16]");
  TensorId w = g.add_input(T(DType::f32, {16, 3}), "W");
  EXPECT_EQ(g.type(g.add1(OpCode::matmul, {x, w})).str(), "f32[8,1,3]");
}

// A block graph built by hand: y = sum over K of x-tile * w-tile, grid over N.
Graph split_n_matmul(bool accumulate) {
  Graph g;
  TensorId x = g.add_input(T(DType::f16, {16, 256}), "X");
  TensorId w = g.add_input(T(DType::f16, {256, 64}), "W");
  BlockParams p;
  p.grid = {4, 1, 1};
  p.loop = 4;
  Graph body = Graph::make_block(p, {g.type(x), g.type(w)});
  TensorId xt = body.add_iter(0, {kPhi, kPhi, kPhi}, 1);
  TensorId wt = body.add_iter(1, {1, kPhi, kPhi}, 0);
  TensorId m = body.add1(OpCode::matmul, {xt, wt});
  TensorId a = accumulate ? body.add1(OpCode::acc_sum, {m}) : m;
  Attrs s;
  s.map = {1, kPhi, kPhi};
  body.add(OpCode::save, std::vector<TensorId>{a}, s);
  std::vector<TensorId> outs = g.add_block(std::vector<TensorId>{x, w}, std::move(body));
  g.add_output(outs[0]);
  return g;
}

TEST(Verifier, AcceptsAWellFormedBlockGraph) {
  Graph g = split_n_matmul(true);
  EXPECT_TRUE(verify(g).empty());
  EXPECT_EQ(g.type(g.outputs()[0]).str(), "f16[16,64]");
  EXPECT_EQ(g.body(g.node(2)).type(0).str(), "f16[16,64]");
}

TEST(Verifier, NamesTheNodeAndRuleForAPathWithoutAccumulator) {
  Graph g = split_n_matmul(false);
  std::vector<VerifyIssue> issues = verify(g);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(format_issue(g, issues[0]),
            "block graph 0, node 3 `save(t2, omap=[1,-,-])`: [path] saves 't2', which passed no accumulator; "
            "accumulate it first (acc_sum, acc_max)");
}

TEST(Verifier, RejectsOmapWithPhiAndIndivisibleSplits) {
  Graph g;
  TensorId x = g.add_input(T(DType::f32, {10, 8}), "X");
  BlockParams p;
  p.grid = {3, 2, 1};
  Graph body = Graph::make_block(p, {g.type(x)});
  EXPECT_THROW(body.add_iter(0, {0, kPhi, kPhi}, kPhi), UserError);  // 10 rows in 3 parts
  TensorId t = body.add_iter(0, {0, kPhi, kPhi}, kPhi, /*mask=*/true);
  EXPECT_EQ(body.type(t).str(), "f32[4,8]");
  TensorId a = body.add1(OpCode::acc_sum, {t});
  Attrs s;
  s.map = {0, kPhi, kPhi};  // grid y (size 2) left as φ
  try {
    body.add(OpCode::save, std::vector<TensorId>{a}, s);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(e.message(), "'save': omap leaves grid dim y (size 2) as φ: blocks along it would write the same tile");
  }
}

TEST(Parser, ErrorsCarryFileLineColumn) {
  try {
    parse_module("kernel k(X: f16[4,4]) {\n  Y = expp(X)\n  return Y\n}\n", "a.mg");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(e.render(), "a.mg:2:7: error: unknown op 'expp'; did you mean 'exp'?");
  }
}

TEST(Parser, RecordsWhereEachNodeWasWritten) {
  Module m = parse_module(
      "kernel k(X: f16[4,8]) {\n"
      "  Y = block(X) grid=[2,1,1] {\n"
      "    x = iter(X, imap=[0,-,-])\n"
      "    a = acc_sum(x)\n"
      "    save(a, omap=[0,-,-])\n"
      "  }\n"
      "  Z = exp(Y)\n"
      "  return Z\n"
      "}\n",
      "k.mg");
  const Graph& g = m.programs[0];
  EXPECT_EQ(g.loc(0).str(), "k.mg:1:10");  // the parameter X
  EXPECT_EQ(g.loc(1).str(), "k.mg:2:7");   // the block op
  EXPECT_EQ(g.loc(2).str(), "k.mg:7:7");   // exp
  EXPECT_EQ(g.loc(3).str(), "k.mg:8:10");  // return Z
  const Graph& body = g.bodies()[0];
  EXPECT_EQ(body.loc(0).str(), "k.mg:3:9");
  EXPECT_EQ(body.loc(2).str(), "k.mg:5:5");
  Graph copy = g;
  copy.truncate(2);
  EXPECT_FALSE(copy.loc(2).known());
  EXPECT_FALSE(Graph().loc(0).known());
}

// `kernel f(...) for [h200, h100]`: the targets a program is for round-trip; one name may serve several
// disjoint target lists, and every other reuse of a name is refused.
TEST(Parser, TargetListsRoundTripAndMayShareANameWhenDisjoint) {
  const std::string text =
      "kernel f(X: f16[4,8]) for [h200, h100] {\n"
      "  Y = exp(X)\n"
      "  return Y\n"
      "}\n"
      "\n"
      "kernel f(X: f16[4,8]) for [a100] {\n"
      "  Y = relu(X)\n"
      "  return Y\n"
      "}\n"
      "\n"
      "kernel g(X: f16[4,8]) {\n"
      "  return X\n"
      "}\n";
  Module m = parse_module(text, "t.mg");
  ASSERT_EQ(m.programs.size(), 3u);
  EXPECT_EQ(m.programs[0].for_targets(), (std::vector<std::string>{"h200", "h100"}));
  EXPECT_EQ(m.programs[1].for_targets(), (std::vector<std::string>{"a100"}));
  EXPECT_TRUE(m.programs[2].for_targets().empty());
  EXPECT_EQ(print(m), text);
  EXPECT_TRUE(serves_target(m.programs[0], "h100"));
  EXPECT_FALSE(serves_target(m.programs[0], "a100"));
  EXPECT_TRUE(serves_target(m.programs[2], "a100")) << "no list: every target";
  EXPECT_EQ(m.programs[0].hash(), parse_module("kernel f(X: f16[4,8]) {\n  Y = exp(X)\n  return Y\n}\n")
                                      .programs[0]
                                      .hash())
      << "the list is side data, like the name";
}

std::string parse_error(const std::string& text) {
  try {
    parse_module(text, "t.mg");
  } catch (const UserError& e) {
    return e.render();
  }
  return "(no error)";
}

TEST(Parser, TargetListErrors) {
  const std::string body = "(X: f16[4]) {\n  return X\n}\n";
  EXPECT_EQ(parse_error("kernel f" + body + "kernel f" + body),
            "t.mg:4:1: error: kernel 'f' is already defined at t.mg:1:1");
  EXPECT_EQ(parse_error("kernel f(X: f16[4]) for [h200] {\n  return X\n}\nkernel f" + body),
            "t.mg:4:1: error: kernel 'f' is already defined at t.mg:1:1 (kernels may share a name only when each "
            "has a 'for' list of targets and no target is in two of them)");
  EXPECT_EQ(parse_error("kernel f(X: f16[4]) for [h200, a100] {\n  return X\n}\n"
                        "kernel f(X: f16[4]) for [h100, a100] {\n  return X\n}\n"),
            "t.mg:4:1: error: kernel 'f' for target 'a100' is already defined at t.mg:1:1");
  EXPECT_EQ(parse_error("kernel f(X: f16[4]) for [] {\n  return X\n}\n"),
            "t.mg:1:25: error: a 'for' list names at least one target, e.g. for [h200]");
  EXPECT_EQ(parse_error("kernel f(X: f16[4]) for [h200, h200] {\n  return X\n}\n"),
            "t.mg:1:32: error: target 'h200' is listed twice");
  EXPECT_EQ(parse_error("kernel f(X: f16[4]) for h200 {\n  return X\n}\n"),
            "t.mg:1:25: error: expected '[' to open the list of targets after 'for' but found 'h200'");
  EXPECT_EQ(parse_error("kernel f(X: f16[4]) for [h200 {\n  return X\n}\n"),
            "t.mg:1:31: error: expected ']' to close the list of targets but found '{'");
}

TEST(Printer, NumbersRoundTripExactly) {
  for (double v : {0.1, 1e-06, 0.000244140625, -3.5, 1.0 / 3.0, 6.02e23}) {
    std::string s = format_number(v);
    Module m = parse_module("kernel k(X: f32[2]) {\n  Y = mul_scalar(X, s=" + s + ")\n  return Y\n}\n");
    EXPECT_EQ(m.programs[0].node(1).attrs.s, v) << s;
  }
}

}  // namespace
}  // namespace morgana::ir

namespace morgana::ir {
namespace {

// Every f16 and bf16 bit pattern survives decode -> encode (NaNs stay NaN), and encode rounds like round_to_dtype.
TEST(DType, StorageBitsRoundTrip) {
  for (DType t : {DType::f16, DType::bf16}) {
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      auto h = static_cast<uint16_t>(bits);
      double x = decode_element(&h, t);
      uint16_t back = 0;
      encode_element(x, t, &back);
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(decode_element(&back, t)));
      } else {
        ASSERT_EQ(back, h) << dtype_name(t) << " bits " << bits;
      }
    }
  }
  uint16_t h = 0;
  encode_element(1.0 + 0x1p-11, DType::f16, &h);  // a tie: rounds to even (1.0)
  EXPECT_EQ(h, 0x3c00);
  encode_element(70000.0, DType::f16, &h);
  EXPECT_EQ(h, 0x7c00);
  encode_element(-0x1p-24, DType::f16, &h);  // the smallest subnormal
  EXPECT_EQ(h, 0x8001);
  EXPECT_EQ(decode_element(&h, DType::f16), -0x1p-24);
  float f = 0;
  encode_element(0.1, DType::f32, &f);
  EXPECT_EQ(f, 0.1f);
}

}  // namespace
}  // namespace morgana::ir

namespace morgana {
namespace {

// The whole Levenshtein table, to check the banded one against.
size_t full_edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j)
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
  return d[a.size()][b.size()];
}

TEST(EditDistance, IsTheLevenshteinDistanceUpToItsLimit) {
  uint64_t state = 7;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull, state >> 33; };
  for (int n = 0; n < 20000; ++n) {
    std::string a, b;
    for (size_t i = next() % 9; i > 0; --i) a += static_cast<char>('a' + next() % 3);
    for (size_t i = next() % 9; i > 0; --i) b += static_cast<char>('a' + next() % 3);
    const size_t limit = next() % 4, exact = full_edit_distance(a, b);
    EXPECT_EQ(edit_distance(a, b, limit), std::min(exact, limit + 1)) << a << " / " << b << " within " << limit;
  }
}

// Issue 17, reproducer 5: one 50,000-character name took 5.5 s to `check` (100,000: 23 s): the hint's distance filled
// the whole table of the name against every name in scope.
TEST(Parser, AHintForAHugeNameCostsWhatReadingItDoes) {
  const std::string name(100000, 'x'), other = name.substr(1) + "y";
  const std::string spec = "kernel k(" + name + ": f16[4,4]) {\n  Y = exp(" + other + ")\n  return Y\n}\n";
  const auto start = std::chrono::steady_clock::now();
  try {
    ir::parse_module(spec, "huge.mg");
    FAIL() << "an undefined name parsed";
  } catch (const UserError& e) {
    EXPECT_NE(e.render().find("huge.mg:2:11: error: '" + other.substr(0, 10)), std::string::npos)
        << e.render().substr(0, 200);
    EXPECT_NE(e.render().find("did you mean '" + name.substr(0, 10)), std::string::npos) << e.render().substr(0, 200);
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
}

}  // namespace
}  // namespace morgana
