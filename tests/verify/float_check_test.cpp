// The sampled float check (the search's, FloatCheckOptions::sampled) on the hand-written μGraphs of examples/ against
// their specs: each passes, and prints its time (about 0.1 s each, alone on the machine; a whole check of these
// sizes takes seconds to half a minute, so the catalogue test compares the two modes on small programs). A
// FloatReference gives every candidate the result that a check of its own gives, whatever columns the candidates
// before it read.
#include <gtest/gtest.h>

#include <cstdio>

#include "ir/parser.h"
#include "verify/float_check.h"

namespace morgana::verify {
namespace {

ir::Graph load(const char* file) { return std::move(ir::parse_file(file).programs[0]); }
ir::Graph parse(const char* text) { return std::move(ir::parse_module(text, "test.mg").programs[0]); }

constexpr const char* kExamples[][2] = {
    {"examples/attention_decode.mg", "examples/mugraphs/attention_decode_split_kv.mg"},
    {"examples/gated_mlp.mg", "examples/mugraphs/gated_mlp_fused.mg"},
    {"examples/gqa_b1.mg", "examples/mugraphs/gqa_b1_flash.mg"},
    {"examples/gqa_b1.mg", "examples/mugraphs/gqa_b1_split_kv.mg"},
    {"examples/lora.mg", "examples/mugraphs/lora_concat.mg"},
    {"examples/mugraphs/matmul.mg", "examples/mugraphs/matmul_split_k.mg"},
    {"examples/rmsnorm_linear_b1.mg", "examples/mugraphs/rmsnorm_linear_fused.mg"},
};

TEST(SampledFloatCheck, MuGraphExamplesPass) {
  for (const auto& [spec, mugraph] : kExamples) {
    SCOPED_TRACE(mugraph);
    FloatCheck f = float_check(load(spec), load(mugraph), {.sampled = true});
    EXPECT_TRUE(f.pass) << f.str();
    EXPECT_TRUE(f.sampled);
    EXPECT_GT(f.elements, 0);
    EXPECT_EQ(f.str().rfind("float check (sampled, " + std::to_string(f.elements) + " output elements) passed", 0), 0u)
        << f.str();
    std::printf("%-50s %8.3f s, worst %.3g of the tolerance\n", mugraph, f.seconds, f.error);
  }
}

// A check through a shared FloatReference, after other candidates, is the check of its own.
void expect_same(const FloatCheck& shared, const FloatCheck& own) {
  EXPECT_EQ(shared.pass, own.pass) << shared.str();
  EXPECT_EQ(shared.index, own.index);
  EXPECT_EQ(shared.input_set, own.input_set);
  EXPECT_EQ(shared.reference, own.reference);
  EXPECT_EQ(shared.candidate, own.candidate);
  EXPECT_EQ(shared.large_scale, own.large_scale);
}

// Some μGraphs read input columns that their specs do not (rows are then drawn again in more columns); then the spec
// itself is checked as a candidate.
TEST(SampledFloatCheck, OneReferenceForManyCandidatesGivesEachItsOwnResult) {
  for (const auto& [spec_file, mugraph] : kExamples) {
    SCOPED_TRACE(mugraph);
    ir::Graph spec = load(spec_file);
    FloatReference shared(spec, {.sampled = true});
    for (const char* cand : {mugraph, spec_file}) {
      ir::Graph c = load(cand);
      FloatCheck f = shared.check(c);
      EXPECT_TRUE(f.pass) << f.str();
      expect_same(f, float_check(spec, c, {.sampled = true}));
    }
  }
}

// The same where the extra columns matter: the reference reads the sampled columns of X, the candidate all of them.
TEST(SampledFloatCheck, ACandidateThatReadsMoreColumnsSeesTheSameInputs) {
  ir::Graph ref = parse(R"(kernel ref(X: f16[4,64]) {
  Y = mul_scalar(X, s=2)
  return Y
}
)");
  ir::Graph cand = parse(R"(kernel cand(X: f16[4,64]) {
  Y = softmax(X, dim=1)
  return Y
}
)");
  FloatReference shared(ref, {.sampled = true});
  FloatCheck f = shared.check(cand);
  EXPECT_FALSE(f.pass) << f.str();
  expect_same(f, float_check(ref, cand, {.sampled = true}));
}

}  // namespace
}  // namespace morgana::verify
