// The demand-driven interpreter must agree exactly with the eager one, element by element, in both domains.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "tests/common/random_graphs.h"
#include "verify/field.h"
#include "verify/float_domain.h"
#include "verify/lazy_interpreter.h"

namespace morgana::verify {
namespace {

// Compares every output element of `g` under both interpreters; returns the number of elements compared.
int64_t compare_all(const ir::Graph& g, uint64_t seed) {
  FieldDomain fd(seed);
  std::vector<Array<FieldValue>> fin;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    Array<FieldValue> a = make_array<FieldValue>(g.type(g.inputs()[i]), {});
    for (size_t k = 0; k < a.data.size(); ++k) a.data[k] = fd.random_at(seed, i, k);
    fin.push_back(std::move(a));
  }
  Interpreter<FieldDomain> eager(fd);
  std::vector<Array<FieldValue>> want = eager.run(g, fin);
  auto fread = [&](size_t i, int64_t f) { return fin[i].data.data() + f; };
  LazyInterpreter<FieldDomain, decltype(fread)> lazy(fd, g, fread);

  FloatDomain dd;
  std::vector<FloatArray> din = random_inputs(g, seed);
  std::vector<FloatArray> dwant = eval_float(g, din);
  auto dread = [&](size_t i, int64_t f) { return din[i].data.data() + f; };
  LazyInterpreter<FloatDomain, decltype(dread)> dlazy(dd, g, dread);

  int64_t n = 0;
  for (size_t o = 0; o < want.size(); ++o)
    for (size_t k = 0; k < want[o].data.size(); ++k, ++n) {
      // Z_p parts only: the lazy interpreter skips Z_q parts that cannot reach one (exponent_use.h).
      EXPECT_EQ(lazy.output(o, static_cast<int64_t>(k)).u, want[o].data[k].u) << "output " << o << " element " << k;
      double a = dlazy.output(o, static_cast<int64_t>(k)), b = dwant[o].data[k];
      EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << "float output " << o << " element " << k;
    }
  return n;
}

TEST(Lazy, AgreesWithEagerOnRandomGraphs) {
  int graphs = 0, with_blocks = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    ir::Graph g = testing::RandomGraphs(seed).kernel();
    if (!ir::verify(g).empty()) continue;
    SCOPED_TRACE("seed " + std::to_string(seed));
    try {
      compare_all(g, seed);
    } catch (const FieldDivisionByZero&) {
      continue;  // a random program may divide by x - x; both interpreters reject it the same way
    }
    ++graphs;
    with_blocks += !g.bodies().empty();
  }
  EXPECT_GE(graphs, 200);
  EXPECT_GE(with_blocks, 40);
}

TEST(Lazy, AgreesWithEagerOnSmallExamples) {
  for (const char* f : {"examples/mugraphs/lora_concat.mg", "examples/lora.mg"}) {
    SCOPED_TRACE(f);
    EXPECT_GT(compare_all(ir::parse_file(f).programs[0], 5), 0);
  }
}

}  // namespace
}  // namespace morgana::verify

namespace morgana::verify {
namespace {

// In attention only Q and K reach an exp; V's Z_q part, and that of everything after the last exp, cannot matter.
TEST(ExponentUse, AttentionNeedsQAndKOnly) {
  for (const char* f : {"examples/gqa_b1.mg", "examples/mugraphs/gqa_b1_split_kv.mg"}) {
    SCOPED_TRACE(f);
    ir::Graph g = ir::parse_file(f).programs[0];
    ExponentUse use = exponent_use(g);
    auto in = g.inputs();
    EXPECT_TRUE(use.kernel[in[0]]);
    EXPECT_TRUE(use.kernel[in[1]]);
    EXPECT_FALSE(use.kernel[in[2]]);
    EXPECT_FALSE(use.kernel[g.outputs()[0]]);
  }
}

}  // namespace
}  // namespace morgana::verify
