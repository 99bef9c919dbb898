// The demand-driven interpreter must agree exactly with the eager one, element by element, in both domains, and for
// floats in f64 and in device precision (storage rounding included).
#include <gtest/gtest.h>

#include <memory>

#include "ir/parser.h"
#include "tests/common/random_graphs.h"
#include "verify/field.h"
#include "verify/float_domain.h"
#include "verify/lazy_interpreter.h"

namespace morgana::verify {
namespace {

// Compares output elements of `g` under both interpreters: every element, or with `column_seed` only those in a
// random subset of each output's columns, made by interpreters that compute those columns only (column_use.h).
// Returns the number of elements compared.
int64_t compare_all(const ir::Graph& g, uint64_t seed, uint64_t column_seed = 0) {
  ColumnUse cols = all_columns(g);
  if (column_seed) {
    std::mt19937_64 rng(column_seed);
    std::vector<Columns> outputs;
    for (ir::TensorId t : g.outputs()) {
      int64_t width = g.type(t).dim(g.type(t).rank - 1);
      Columns c;
      for (int32_t j = 0; j < width; ++j)
        if (rng() % 3 == 0) c.push_back(j);
      if (c.empty()) c.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(width)));
      outputs.push_back(std::move(c));
    }
    cols = column_use(g, outputs);
  }
  FieldDomain fd(seed);
  std::vector<Array<FieldValue>> fin;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    Array<FieldValue> a = make_array<FieldValue>(g.type(g.inputs()[i]), {});
    for (size_t k = 0; k < a.data.size(); ++k) a.data[k] = fd.random_at(seed, i, k);
    fin.push_back(std::move(a));
  }
  Interpreter<FieldDomain> eager(fd);
  std::vector<Array<FieldValue>> want = eager.run(g, fin);
  // The lazy interpreters' inputs hold other values outside their columns.
  auto poisoned = [&](auto arrays, auto poison) {
    for (size_t i = 0; i < arrays.size(); ++i) {
      const Columns& keep = cols.kernel[g.inputs()[i]];
      int64_t width = g.type(g.inputs()[i]).dim(g.type(g.inputs()[i]).rank - 1);
      for (size_t k = 0; k < arrays[i].data.size(); ++k)
        if (!std::binary_search(keep.begin(), keep.end(), static_cast<int64_t>(k) % width))
          arrays[i].data[k] = poison(i, k);
    }
    return arrays;
  };
  std::vector<Array<FieldValue>> lin = poisoned(fin, [&](size_t i, size_t k) { return fd.random_at(~seed, i, k); });
  auto fread = [&](size_t i, int64_t f) { return lin[i].data.data() + f; };
  LazyInterpreter<FieldDomain, decltype(fread)> lazy(fd, g, fread, exponent_use(g), cols);

  // Floats in f64 and in device precision (f32 arithmetic, every tensor an op makes rounded to its element type).
  std::vector<FloatArray> din = random_inputs(g, seed);
  std::vector<FloatArray> dlin = poisoned(din, [](size_t, size_t) { return std::nan(""); });
  auto dread = [&](size_t i, int64_t f) { return dlin[i].data.data() + f; };
  using FloatLazy = LazyInterpreter<FloatDomain, decltype(dread)>;
  struct FloatRun {
    FloatDomain domain;
    std::vector<FloatArray> want;
    std::unique_ptr<FloatLazy> lazy;
  };
  std::vector<FloatRun> float_runs;
  float_runs.reserve(2);  // the interpreters hold references to the domains
  for (Precision p : {Precision::f64, Precision::device}) {
    FloatRun& fr = float_runs.emplace_back(FloatRun{FloatDomain{p}, eval_float(g, din, p), nullptr});
    fr.lazy = std::make_unique<FloatLazy>(fr.domain, g, dread, exponent_use(g), cols);
  }

  int64_t n = 0;
  for (size_t o = 0; o < want.size(); ++o)
    for (size_t k = 0; k < want[o].data.size(); ++k) {
      const Columns& asked = cols.kernel[g.outputs()[o]];
      int64_t width = g.type(g.outputs()[o]).dim(g.type(g.outputs()[o]).rank - 1);
      if (!std::binary_search(asked.begin(), asked.end(), static_cast<int64_t>(k) % width)) continue;
      ++n;
      // Z_p parts only: the lazy interpreter skips Z_q parts that cannot reach one (exponent_use.h).
      EXPECT_EQ(lazy.output(o, static_cast<int64_t>(k)).u, want[o].data[k].u) << "output " << o << " element " << k;
      for (FloatRun& fr : float_runs) {
        double a = fr.lazy->output(o, static_cast<int64_t>(k)), b = fr.want[o].data[k];
        EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b)))
            << "float output " << o << " element " << k << " in precision " << static_cast<int>(fr.domain.precision)
            << ": lazy " << a << ", eager " << b;
      }
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

// The same with rows made in a few columns only, and inputs that hold only the columns column_use() names (the
// rest poisoned, so that reading them shows).
TEST(Lazy, AgreesWithEagerInTheColumnsAskedFor) {
  int graphs = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    ir::Graph g = testing::RandomGraphs(seed).kernel();
    if (!ir::verify(g).empty()) continue;
    SCOPED_TRACE("seed " + std::to_string(seed));
    try {
      graphs += compare_all(g, seed, seed + 1000) > 0;
    } catch (const FieldDivisionByZero&) {
      continue;
    }
  }
  EXPECT_GE(graphs, 200);
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

// Attention's sampled output columns read the same columns of V and every column of Q and K, in the spec and in the
// split-KV μGraph (whose V tiles are read through iterators and accumulators).
TEST(ColumnUse, AttentionReadsTheSampledColumnsOfV) {
  for (const char* f : {"examples/gqa_b1.mg", "examples/mugraphs/gqa_b1_split_kv.mg"}) {
    SCOPED_TRACE(f);
    ir::Graph g = ir::parse_file(f).programs[0];
    ColumnUse use = column_use(g, {{0, 17, 63}});
    auto in = g.inputs();
    EXPECT_EQ(use.kernel[in[0]].size(), 64u);
    EXPECT_EQ(use.kernel[in[1]].size(), 4096u);
    EXPECT_EQ(use.kernel[in[2]], (Columns{0, 17, 63}));
  }
}

}  // namespace
}  // namespace morgana::verify
