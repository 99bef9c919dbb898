// Finite-field equivalence: field arithmetic, true rewrites accepted, near-miss wrong rewrites rejected.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/parser.h"
#include "verify/equivalence.h"
#include "verify/field.h"

namespace morgana::verify {
namespace {

TEST(Field, PrimesHaveTheRequiredShape) {
  const FieldPrimes& fp = field_primes();
  EXPECT_TRUE(is_prime_u64(fp.p));
  EXPECT_TRUE(is_prime_u64(fp.q));
  EXPECT_EQ((fp.p - 1) % fp.q, 0u);
  EXPECT_LT(fp.p, 1ULL << 63);
  EXPECT_GT(fp.q, 1ULL << 30);
  EXPECT_FALSE(is_prime_u64(3215031751ULL));  // a strong pseudoprime to bases 2, 3, 5, 7
}

TEST(Field, ConstantsAreExactRationals) {
  FieldDomain d(1);
  using ir::FieldSem;
  EXPECT_EQ(d.binary(FieldSem::Mul, d.constant(0.5), d.constant(2)), d.constant(1));
  EXPECT_EQ(d.binary(FieldSem::Add, d.constant(-3), d.constant(3)), d.constant(0));
  EXPECT_EQ(d.binary(FieldSem::Mul, d.constant(0.000244140625), d.constant(4096)), d.constant(1));
  EXPECT_EQ(d.binary(FieldSem::Div, d.constant(1), d.constant(3)).u,
            d.binary(FieldSem::Div, d.constant(2), d.constant(6)).u);
  EXPECT_THROW(d.binary(FieldSem::Div, d.constant(1), d.constant(0)), FieldDivisionByZero);
}

TEST(Field, ExpIsAHomomorphismAndOraclesAreKeyedPerTrial) {
  FieldDomain d(7), e(8);
  uint64_t s = 3;
  FieldValue a = d.random(s), b = d.random(s);
  using ir::FieldSem;
  using ir::OpCode;
  FieldValue lhs = d.unary(OpCode::exp, d.binary(FieldSem::Add, a, b), 0);
  FieldValue rhs = d.binary(FieldSem::Mul, d.unary(OpCode::exp, a, 0), d.unary(OpCode::exp, b, 0));
  EXPECT_EQ(lhs.u, rhs.u);
  EXPECT_EQ(d.unary(OpCode::silu, a, 0), d.unary(OpCode::silu, a, 0));
  EXPECT_NE(d.unary(OpCode::silu, a, 0), e.unary(OpCode::silu, a, 0));
  EXPECT_NE(d.unary(OpCode::silu, a, 0), d.unary(OpCode::gelu, a, 0));
  EXPECT_EQ(d.binary(FieldSem::Max, a, b), d.binary(FieldSem::Max, b, a));
  // rsqrt(x) is 1/sqrt(x).
  EXPECT_EQ(d.unary(OpCode::rsqrt, a, 0).u,
            d.binary(FieldSem::Div, d.constant(1), d.unary(OpCode::sqrt, a, 0)).u);
}

// dot_rows sums unreduced products in blocked loops (rows of B in tiles, a few columns at a time); it must equal
// the plain fold of mul and add for every length and width, including the largest residues (the carry paths), and
// so must its form that makes a list of columns only.
TEST(Field, DotRowsEqualsTheFoldOfMulAndAdd) {
  FieldDomain d(11);
  const FieldPrimes& fp = field_primes();
  uint64_t s = 5;
  using ir::FieldSem;
  for (int64_t k : {1, 3, 4, 5, 31, 32, 33, 64, 100, 4100})
    for (int64_t n : {1, 2, 3, 4, 5, 7, 64}) {
      for (bool largest : {false, true}) {
        auto value = [&] { return largest ? FieldValue{fp.p - 1, fp.q - 1} : d.random(s); };
        std::vector<FieldValue> a(static_cast<size_t>(k)), b(static_cast<size_t>(k * n));
        std::vector<const FieldValue*> rows(static_cast<size_t>(k));
        for (int64_t kk = 0; kk < k; ++kk) {
          a[static_cast<size_t>(kk)] = value();
          for (int64_t j = 0; j < n; ++j) b[static_cast<size_t>(kk * n + j)] = value();
          rows[static_cast<size_t>(kk)] = b.data() + kk * n;
        }
        std::vector<FieldValue> got(static_cast<size_t>(n)), got_p(static_cast<size_t>(n));
        d.dot_rows(got.data(), a.data(), rows.data(), k, n);
        d.dot_rows_p(got_p.data(), a.data(), rows.data(), k, n);
        std::vector<int32_t> some;  // every other column, and the last
        for (int32_t j = 0; j < n; j += 2) some.push_back(j);
        if (some.back() != n - 1) some.push_back(static_cast<int32_t>(n - 1));
        std::vector<FieldValue> got_some(static_cast<size_t>(n)), got_some_p(static_cast<size_t>(n));
        d.dot_rows(got_some.data(), a.data(), rows.data(), k, static_cast<int64_t>(some.size()), some.data());
        d.dot_rows_p(got_some_p.data(), a.data(), rows.data(), k, static_cast<int64_t>(some.size()), some.data());
        for (int64_t j = 0; j < n; ++j) {
          FieldValue want = d.binary(FieldSem::Mul, a[0], b[static_cast<size_t>(j)]);
          for (int64_t kk = 1; kk < k; ++kk)
            want = d.binary(FieldSem::Add, want,
                            d.binary(FieldSem::Mul, a[static_cast<size_t>(kk)], b[static_cast<size_t>(kk * n + j)]));
          SCOPED_TRACE("k " + std::to_string(k) + " n " + std::to_string(n) + " j " + std::to_string(j));
          EXPECT_EQ(got[static_cast<size_t>(j)], want);
          EXPECT_EQ(got_p[static_cast<size_t>(j)].u, want.u);
          if (std::binary_search(some.begin(), some.end(), j)) {
            EXPECT_EQ(got_some[static_cast<size_t>(j)], want);
            EXPECT_EQ(got_some_p[static_cast<size_t>(j)].u, want.u);
          }
        }
      }
    }
}

ir::Graph parse(const std::string& src) { return std::move(ir::parse_module(src, "t.mg").programs[0]); }

const char* const kAttention = R"(kernel a(Q: f16[2,1,16], K: f16[2,16,64], V: f16[2,64,16]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
)";

// Split-KV attention: 4 splits of 16 keys, for-loop of 2 chunks; `combine` is the combining kernel's reduction.
std::string split_kv(const std::string& combine) {
  return R"(kernel a(Q: f16[2,1,16], K: f16[2,16,64], V: f16[2,64,16]) {
  Os, Ls, Ms = block(Q, K, V) grid=[2,4,1] threads=128 loop=2 {
    q = iter(Q, imap=[0,-,-])
    k = iter(K, imap=[0,2,-], fmap=2)
    v = iter(V, imap=[0,1,-], fmap=1)
    s = matmul(q, k)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    M = acc_max(m)
    La = acc_rescale_sum(l, m)
    Oa = acc_rescale_sum(o, m)
    save(Oa, omap=[0,1,-])
    save(La, omap=[0,1,-])
    save(M, omap=[0,1,-])
  }
  Mg = reduce_max(Ms, dim=1)
  Dm = sub(Ms, Mg)
  W = exp(Dm)
  OW = mul(Os, W)
  LW = mul(Ls, W)
  N = )" + combine + R"((OW, dim=1)
  D = reduce_sum(LW, dim=1)
  O = div(N, D)
  return O
}
)";
}

TEST(Equivalence, SplitKvAttentionWithCombiningKernelIsEquivalent) {
  Verdict v = equivalent(parse(kAttention), parse(split_kv("reduce_sum")));
  EXPECT_TRUE(v.equivalent()) << v.str();
  EXPECT_EQ(v.trials, 3);
}

TEST(Equivalence, NearMissesInAttentionAreRejected) {
  ir::Graph ref = parse(kAttention);
  // The combining kernel takes the max instead of the sum of the rescaled partial outputs.
  Verdict v = equivalent(ref, parse(split_kv("reduce_max")));
  EXPECT_EQ(v.kind, Verdict::Different) << v.str();
  EXPECT_NE(v.evidence.find("output 0 (O: f16[2,1,16]) differs at ["), std::string::npos) << v.evidence;
  // The denominator is summed without rescaling to the running max.
  std::string wrong = split_kv("reduce_sum");
  wrong.replace(wrong.find("La = acc_rescale_sum(l, m)"), 26, "La = acc_sum(l)           ");
  EXPECT_EQ(equivalent(ref, parse(wrong)).kind, Verdict::Different);
}

const char* const kMatmul = R"(kernel mm(X: f32[8,64], W: f32[64,64]) {
  Y = matmul(X, W)
  return Y
}
)";

std::string split_k(const std::string& w_imap, const std::string& acc = "acc_sum") {
  return R"(kernel sk(X: f32[8,64], W: f32[64,64]) {
  P = block(X, W) grid=[2,2,1] threads=64 loop=4 {
    x = iter(X, imap=[-,1,-], fmap=1)
    w = iter(W, imap=)" + w_imap + R"(, fmap=0)
    p = matmul(x, w)
    a = )" + acc + R"((p)
    save(a, omap=[1,0,-])
  }
  Y = reduce_sum(P, dim=0, to=8)
  return Y
}
)";
}

TEST(Equivalence, SplitKAcceptedWrongImapAndWrongAccumulatorRejected) {
  ir::Graph ref = parse(kMatmul);
  EXPECT_TRUE(equivalent(ref, parse(split_k("[1,0,-]"))).equivalent());
  EXPECT_EQ(equivalent(ref, parse(split_k("[0,1,-]"))).kind, Verdict::Different);
  EXPECT_EQ(equivalent(ref, parse(split_k("[1,0,-]", "acc_max"))).kind, Verdict::Different);
}

TEST(Equivalence, CommutedOperandsAreEquivalentSwappedMatmulOperandsAreNot) {
  const char* a = "kernel k(X: f32[4,4], Y: f32[4,4]) {\n  Z = mul(X, Y)\n  W = matmul(X, Y)\n  return Z, W\n}\n";
  const char* b = "kernel k(X: f32[4,4], Y: f32[4,4]) {\n  Z = mul(Y, X)\n  W = matmul(X, Y)\n  return Z, W\n}\n";
  const char* c = "kernel k(X: f32[4,4], Y: f32[4,4]) {\n  Z = mul(Y, X)\n  W = matmul(Y, X)\n  return Z, W\n}\n";
  EXPECT_TRUE(equivalent(parse(a), parse(b)).equivalent());
  Verdict v = equivalent(parse(a), parse(c));
  EXPECT_EQ(v.kind, Verdict::Different);
  EXPECT_NE(v.evidence.find("output 1"), std::string::npos) << v.evidence;
}

TEST(Equivalence, RmsNormEpsAndMeanMatter) {
  const char* ref = "kernel n(X: f32[2,8]) {\n  Y = rms_norm(X, dim=1)\n  return Y\n}\n";
  auto manual = [](const std::string& scale, const std::string& eps) {
    return "kernel n(X: f32[2,8]) {\n  S = square(X)\n  T = reduce_sum(S, dim=1)\n  M = mul_scalar(T, s=" + scale +
           ")\n  E = add_scalar(M, s=" + eps + ")\n  R = rsqrt(E)\n  Y = mul(X, R)\n  return Y\n}\n";
  };
  EXPECT_TRUE(equivalent(parse(ref), parse(manual("0.125", "1e-06"))).equivalent());
  EXPECT_EQ(equivalent(parse(ref), parse(manual("1", "1e-06"))).kind, Verdict::Different);   // missing 1/n
  EXPECT_EQ(equivalent(parse(ref), parse(manual("0.125", "0"))).kind, Verdict::Different);   // eps dropped
}

TEST(Equivalence, InterfaceMismatchIsExplained) {
  Verdict v = equivalent(parse(kMatmul), parse("kernel k(X: f32[8,64]) {\n  return X\n}\n"));
  EXPECT_EQ(v.kind, Verdict::InterfaceMismatch);
  EXPECT_EQ(v.evidence, "the reference has 2 inputs, the candidate 1");
}

// The evidence names the side that divides, the reference when both do, in both modes (the full mode runs the two
// sides on two threads).
TEST(Equivalence, DivisionByAZeroResidueIsReported) {
  const char* divides = "kernel k(X: f32[4]) {\n  Z = sub(X, X)\n  Y = div(X, Z)\n  return Y\n}\n";
  const char* plain = "kernel k(X: f32[4]) {\n  Y = mul_scalar(X, s=1)\n  return Y\n}\n";
  const char* const cases[][3] = {
      {divides, divides, "the reference"}, {plain, divides, "the candidate"}, {divides, plain, "the reference"}};
  for (bool full : {false, true})
    for (const auto& [ref, cand, side] : cases) {
      EquivalenceOptions o;
      o.full = full;
      Verdict v = equivalent(parse(ref), parse(cand), o);
      EXPECT_EQ(v.kind, Verdict::Inconclusive) << v.str();
      EXPECT_EQ(v.evidence, std::string(side) + " divides by a zero residue in trial 0") << (full ? "full" : "cheap");
    }
}

}  // namespace
}  // namespace morgana::verify

namespace morgana::verify {
namespace {

TEST(Equivalence, CheapAndFullModesGiveTheSameVerdicts) {
  ir::Graph ref = parse(kAttention);
  std::vector<std::pair<std::string, bool>> cases = {
      {split_kv("reduce_sum"), true}, {split_kv("reduce_max"), false}};
  ir::Graph mm = parse(kMatmul);
  for (auto& [src, want] : cases) {
    for (bool full : {false, true})
      for (int trials : {1, 2, 3}) {
        EquivalenceOptions o;
        o.full = full;
        o.trials = trials;
        Verdict v = equivalent(ref, parse(src), o);
        EXPECT_EQ(v.equivalent(), want) << (full ? "full: " : "cheap: ") << trials << " trials: " << v.str();
        if (!full && want) {
          // The trials share the blocks that their samples miss (each is chased in one trial): together they
          // reach every block, whatever their number.
          EXPECT_GT(v.blocks_total, 0);
          EXPECT_EQ(v.blocks_covered, v.blocks_total) << trials << " trials: every block of the candidate is reached";
        }
      }
  }
  for (bool full : {false, true}) {
    EquivalenceOptions o;
    o.full = full;
    EXPECT_TRUE(equivalent(mm, parse(split_k("[1,0,-]")), o).equivalent());
    EXPECT_FALSE(equivalent(mm, parse(split_k("[0,1,-]")), o).equivalent());
  }
}

}  // namespace
}  // namespace morgana::verify
