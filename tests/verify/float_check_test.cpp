// The sampled float check (the search's, FloatCheckOptions::sampled) on the hand-written μGraphs of examples/ against
// their specs: each passes, and prints its time (about 0.1 s each, alone on the machine; a whole check of these
// sizes takes seconds to half a minute, so the catalogue test compares the two modes on small programs). A
// FloatReference gives every candidate the result that a check of its own gives, whatever columns the candidates
// before it read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

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

// No false rejections (issue 14 item 3): every example μGraph, every search winner (tests/verify/winners: each
// example's best μGraph for h100, as `morgana optimize examples/NAME.mg --target h100 --no-cache -o
// tests/verify/winners/NAME.h100.mg` wrote it), and every example spec as its own candidate, passes the sampled
// float check on every seed tried (the samples and both input sets differ per seed), and the whole check too.
// Before the tolerance counted the spec's own device error, gqa_b1 failed against itself on every seed: its logits
// reach ~280 on the large set, where the f16 tensors it stores round in steps of 0.25. The programs with an exp
// (where the large set matters) get seeds 1..10, the others 1..2, the whole check seed 1 (about 40 s on the 2-core
// machine); MORGANA_FLOAT_SEEDS=N gives every program N seeds and the whole check min(N, 3) (the issue's 100 seeds:
// MORGANA_FLOAT_SEEDS=100 build/tests/verify/verify_tests --gtest_filter=FloatCheck.NoExample*).
TEST(FloatCheck, NoExampleIsRejectedOnAnySeed) {
  const char* env = std::getenv("MORGANA_FLOAT_SEEDS");
  const uint64_t many = env ? std::strtoull(env, nullptr, 10) : 10, few = env ? many : 2,
                 whole = env ? std::min<uint64_t>(many, 3) : 1;
  // kExamples, two μGraphs more, and every example spec as its own candidate. Whether a program has an exp is what
  // its first check reports (FloatCheck::large_exp_arg), not a second list.
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& [spec, mugraph] : kExamples) pairs.push_back({spec, mugraph});
  pairs.push_back({"examples/qknorm_b1.mg", "examples/mugraphs/qknorm_b1_flash.mg"});
  pairs.push_back({"examples/ntrans.mg", "examples/mugraphs/ntrans_fused.mg"});
  for (const char* spec : {"examples/attention_decode.mg", "examples/gated_mlp.mg", "examples/gqa_b1.mg",
                           "examples/gqa_b8.mg", "examples/lora.mg", "examples/ntrans.mg", "examples/qknorm_b1.mg",
                           "examples/qknorm_b8.mg", "examples/rmsnorm_linear_b1.mg", "examples/rmsnorm_linear_b8.mg"})
    pairs.push_back({spec, spec});
  size_t winners = 0;
  for (const auto& e : std::filesystem::directory_iterator("tests/verify/winners")) {
    const std::string name = e.path().filename().string();
    pairs.push_back({"examples/" + name.substr(0, name.find('.')) + ".mg", e.path().string()});
    ++winners;
  }
  EXPECT_GE(winners, 11u) << "a winner for every example";
  int rejected = 0;
  for (const auto& [spec, mugraph] : pairs) {
    SCOPED_TRACE(mugraph);
    ir::Graph ref = load(spec.c_str()), cand = load(mugraph.c_str());
    uint64_t seeds = few;
    for (uint64_t seed = 1; seed <= seeds; ++seed) {
      FloatCheck f = float_check(ref, cand, {.seed = seed, .sampled = true});
      if (seed == 1 && f.large_exp_arg > 0) seeds = many;
      rejected += !f.pass;
      EXPECT_TRUE(f.pass) << "seed " << seed << ": " << f.str();
    }
  }
  for (const char* mugraph : {"examples/gqa_b1.mg", "examples/mugraphs/gqa_b1_split_kv.mg"}) {
    SCOPED_TRACE(mugraph);
    for (uint64_t seed = 1; seed <= whole; ++seed) {
      FloatCheck f = float_check(load("examples/gqa_b1.mg"), load(mugraph), {.seed = seed});
      rejected += !f.pass;
      EXPECT_TRUE(f.pass) << "seed " << seed << " (whole check): " << f.str();
    }
  }
  EXPECT_EQ(rejected, 0);
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
