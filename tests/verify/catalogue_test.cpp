// The rewrite catalogue (tests/verify/catalogue/README.md): every true rewrite is equivalent and passes the float
// check, every near-miss wrong rewrite is Different, every unsafe rewrite is equivalent but fails the float check,
// whole or sampled (the search's); plus a statistical test that many independent seeds never accept a wrong rewrite.
// Prints counts and timings.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "verify/equivalence.h"
#include "verify/float_check.h"

namespace morgana::verify {
namespace {

namespace fs = std::filesystem;

const fs::path kCatalogue = "tests/verify/catalogue";  // the test runs in the source root (meson workdir)

struct Case {
  std::string name;  // "true/01_split_k"
  std::string what;  // the first comment line
  ir::Graph ref, cand;
};

std::vector<Case> load(const std::string& kind) {
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(kCatalogue / kind))
    if (e.path().extension() == ".mg") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<Case> cases;
  for (const fs::path& f : files) {
    ir::Module m = ir::parse_file(f);
    std::ifstream in(f);
    std::string first;
    std::getline(in, first);
    EXPECT_EQ(m.programs.size(), 2u) << f;
    if (m.programs.size() != 2) continue;
    EXPECT_EQ(m.programs[0].name(), "ref") << f;
    EXPECT_EQ(m.programs[1].name(), "cand") << f;
    cases.push_back({kind + "/" + f.stem().string(), first, std::move(m.programs[0]), std::move(m.programs[1])});
  }
  return cases;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A full check (every output element compared exactly) or a cheap one (the search's sampled mode), `trials` trials
// from `seed`.
EquivalenceOptions check(int trials, uint64_t seed, bool full = true) {
  EquivalenceOptions o;
  o.trials = trials;
  o.seed = seed;
  o.full = full;
  return o;
}

// Seeds of the repeated runs: every run of every case, full and cheap, must give the expected verdict.
constexpr uint64_t kSeeds[] = {1, 2, 3, 4, 5};

TEST(Catalogue, HasTheDocumentedCases) {
  std::vector<Case> t = load("true"), w = load("wrong"), u = load("unsafe");
  std::printf("catalogue: %zu true, %zu wrong, %zu unsafe rewrites\n", t.size(), w.size(), u.size());
  EXPECT_GE(t.size(), 20u);
  EXPECT_GE(w.size(), 25u);
  EXPECT_GE(u.size(), 2u);
  for (const Case& c : w) EXPECT_EQ(c.what.rfind("# WRONG: ", 0), 0u) << c.name << ": first line says what is wrong";
  for (const Case& c : u) EXPECT_EQ(c.what.rfind("# UNSAFE: ", 0), 0u) << c.name << ": first line says what is unsafe";
}

TEST(Catalogue, TrueRewritesAreEquivalentAndPassTheFloatCheck) {
  double total_eq = 0, total_fc = 0, total_sampled = 0;
  std::vector<Case> cases = load("true");
  std::printf("%-44s %12s %12s %10s %8s %14s\n", "case (3 trials, seed 1)", "equiv [ms]", "float [ms]", "worst err",
              "scale", "sampled [ms]");
  for (const Case& c : cases) {
    for (uint64_t seed : kSeeds) {
      auto start = std::chrono::steady_clock::now();
      Verdict v = equivalent(c.ref, c.cand, check(3, seed));
      double t = seconds_since(start);
      EXPECT_EQ(v.kind, Verdict::Equivalent) << c.name << " seed " << seed << ": " << v.str();
      Verdict cheap = equivalent(c.ref, c.cand, check(3, seed, false));
      EXPECT_EQ(cheap.kind, Verdict::Equivalent) << c.name << " seed " << seed << " (cheap): " << cheap.str();
      if (seed != 1) continue;
      total_eq += t;
      start = std::chrono::steady_clock::now();
      FloatCheck f = float_check(c.ref, c.cand, {});
      double tf = seconds_since(start);
      total_fc += tf;
      EXPECT_TRUE(f.pass) << c.name << ": " << f.str();
      FloatCheck fs = float_check(c.ref, c.cand, {.sampled = true});
      total_sampled += fs.seconds;
      EXPECT_TRUE(fs.pass) << c.name << " (sampled): " << fs.str();
      std::printf("%-44s %12.2f %12.2f %10.3g %8.3g %14.2f\n", c.name.c_str(), t * 1e3, tf * 1e3, f.error,
                  f.large_scale, fs.seconds * 1e3);
    }
  }
  std::printf("%zu true rewrites: equivalence %.3f s, float check %.3f s (sampled %.3f s) in all\n", cases.size(),
              total_eq, total_fc, total_sampled);
}

TEST(Catalogue, WrongRewritesAreDifferent) {
  double total = 0;
  int float_caught = 0, sampled_caught = 0;
  std::vector<Case> cases = load("wrong");
  std::printf("%-44s %12s  %s\n", "case (3 trials, seed 1)", "equiv [ms]", "what is wrong");
  for (const Case& c : cases) {
    for (uint64_t seed : kSeeds) {
      auto start = std::chrono::steady_clock::now();
      Verdict v = equivalent(c.ref, c.cand, check(3, seed));
      double t = seconds_since(start);
      EXPECT_EQ(v.kind, Verdict::Different) << c.name << " seed " << seed << " (" << c.what << "): " << v.str();
      Verdict cheap = equivalent(c.ref, c.cand, check(3, seed, false));
      EXPECT_EQ(cheap.kind, Verdict::Different) << c.name << " seed " << seed << " (cheap): " << cheap.str();
      if (seed != 1) continue;
      total += t;
      // The sampled check agrees with the whole one: these programs are small, and their sample meets the errors.
      bool whole = float_check(c.ref, c.cand, {}).pass, sampled = float_check(c.ref, c.cand, {.sampled = true}).pass;
      EXPECT_EQ(whole, sampled) << c.name << ": the float check " << (whole ? "passes" : "fails") << " whole";
      float_caught += !whole;
      sampled_caught += !sampled;
      std::printf("%-44s %12.2f  %s\n", c.name.c_str(), t * 1e3, c.what.substr(9).c_str());
    }
  }
  std::printf(
      "%zu wrong rewrites: equivalence %.3f s in all; the float check alone would catch %d of them (sampled: %d)\n",
      cases.size(), total, float_caught, sampled_caught);
}

// Caught on every seed: kSeeds, or 1..N with MORGANA_FLOAT_SEEDS=N (as FloatCheck.NoExampleIsRejectedOnAnySeed, the
// other half of the float check's contract: no false rejection there, no unsafe program passing here).
TEST(Catalogue, UnsafeRewritesAreEquivalentButFailTheFloatCheck) {
  const char* env = std::getenv("MORGANA_FLOAT_SEEDS");
  const uint64_t seeds = env ? std::strtoull(env, nullptr, 10) : std::size(kSeeds);
  for (const Case& c : load("unsafe")) {
    Verdict v = equivalent(c.ref, c.cand, check(3, 1));
    EXPECT_EQ(v.kind, Verdict::Equivalent) << c.name << ": " << v.str();
    for (uint64_t seed = 1; seed <= seeds; ++seed)
      for (bool sampled : {false, true}) {
        FloatCheck f = float_check(c.ref, c.cand, {.seed = seed, .sampled = sampled});
        EXPECT_FALSE(f.pass) << c.name << " seed " << seed << ": " << f.str();
        EXPECT_TRUE(f.unsafe) << c.name << ": " << f.str();
        EXPECT_EQ(f.message,
                  "unsafe: candidate produced inf/NaN (e.g. softmax without max subtraction overflows f16)");
        EXPECT_EQ(f.input_set, "large") << c.name << ": " << f.str();
        if (seed == 1) std::printf("%s: %s\n", c.name.c_str(), f.str().c_str());
      }
  }
}

// Tiny versions of three near misses of different kinds: a polynomial one (a duplicated K chunk), one through the
// max oracle (acc_max for acc_sum) and one through exp (an inverted rescale factor in a split-KV combine).
const char* const kTinyWrong[][2] = {
    {R"(kernel ref(X: f16[1,4], W: f16[4,4]) {
  Y = matmul(X, W)
  return Y
}
)",
     R"(kernel cand(X: f16[1,4], W: f16[4,4]) {
  Y = block(X, W) grid=[2,1,1] threads=32 loop=2 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w = iter(W, imap=[0,-,-], fmap=1)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,-,-])
  }
  return Y
}
)"},
    {R"(kernel ref(X: f16[1,4], W: f16[4,2]) {
  Y = matmul(X, W)
  return Y
}
)",
     R"(kernel cand(X: f16[1,4], W: f16[4,2]) {
  P = block(X, W) grid=[1,2,1] threads=32 loop=2 {
    x = iter(X, imap=[-,1,-], fmap=1)
    w = iter(W, imap=[-,0,-], fmap=0)
    p = matmul(x, w)
    a = acc_max(p)
    save(a, omap=[-,0,-])
  }
  Y = reduce_sum(P, dim=0, to=1)
  return Y
}
)"},
    {R"(kernel ref(Q: f16[1,1,2], K: f16[1,2,4], V: f16[1,4,2]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
)",
     R"(kernel cand(Q: f16[1,1,2], K: f16[1,2,4], V: f16[1,4,2]) {
  Os, Ls, Ms = block(Q, K, V) grid=[1,2,1] threads=32 loop=2 {
    q = iter(Q, imap=[-,-,-])
    k = iter(K, imap=[-,2,-], fmap=2)
    v = iter(V, imap=[-,1,-], fmap=1)
    s = matmul(q, k)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    M = acc_max(m)
    La = acc_rescale_sum(l, m)
    Oa = acc_rescale_sum(o, m)
    save(Oa, omap=[-,1,-])
    save(La, omap=[-,1,-])
    save(M, omap=[-,1,-])
  }
  Mg = reduce_max(Ms, dim=1)
  Dm = sub(Mg, Ms)
  Wt = exp(Dm)
  OW = mul(Os, Wt)
  LW = mul(Ls, Wt)
  Num = reduce_sum(OW, dim=1)
  Den = reduce_sum(LW, dim=1)
  O = div(Num, Den)
  return O
}
)"},
};

TEST(Catalogue, TenThousandSeedsNeverAcceptAWrongRewrite) {
  constexpr uint64_t kTrials = 10000;
  auto start = std::chrono::steady_clock::now();
  for (const auto& pair : kTinyWrong) {
    ir::Graph ref = std::move(ir::parse_module(pair[0], "ref.mg").programs[0]);
    ir::Graph cand = std::move(ir::parse_module(pair[1], "cand.mg").programs[0]);
    auto t0 = std::chrono::steady_clock::now();
    uint64_t accepted = 0, different = 0;
    for (uint64_t seed = 1; seed <= kTrials; ++seed) {
      Verdict v = equivalent(ref, cand, check(1, seed));
      accepted += v.kind == Verdict::Equivalent;
      different += v.kind == Verdict::Different;
    }
    EXPECT_EQ(accepted, 0u) << cand.name();
    EXPECT_EQ(different, kTrials) << "every seed gives a verdict (no inconclusive trial)";
    std::printf("%llu seeds x 1 trial: %llu accepted, %llu different (%.3f s)\n",
                static_cast<unsigned long long>(kTrials), static_cast<unsigned long long>(accepted),
                static_cast<unsigned long long>(different), seconds_since(t0));
  }
  std::printf("statistical test: %.3f s for %llu runs\n", seconds_since(start),
              static_cast<unsigned long long>(3 * kTrials));
}

}  // namespace
}  // namespace morgana::verify
