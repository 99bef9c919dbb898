#include "verify/field.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "ir/diagnostic.h"
#include "verify/splitmix.h"

namespace morgana::verify {

namespace {

// Uniform in [0, m) without modulo bias (rejection sampling).
uint64_t uniform_below(uint64_t& state, uint64_t m) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % m;
  for (;;) {
    uint64_t r = splitmix64(state);
    if (r < limit) return r % m;
  }
}

}  // namespace

// GCC and Clang provide a 128-bit integer on 64-bit targets; __extension__ marks the use as deliberate.
__extension__ using u128 = unsigned __int128;

uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m) { return static_cast<uint64_t>(static_cast<u128>(a) * b % m); }

uint64_t powmod(uint64_t a, uint64_t e, uint64_t m) {
  uint64_t r = 1 % m;
  a %= m;
  while (e) {
    if (e & 1) r = mulmod(r, a, m);
    a = mulmod(a, a, m);
    e >>= 1;
  }
  return r;
}

bool is_prime_u64(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t sp : {2ULL, 3ULL, 5ULL, 7ULL, 11ULL, 13ULL, 17ULL, 19ULL, 23ULL, 29ULL, 31ULL, 37ULL}) {
    if (n % sp == 0) return n == sp;
  }
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1) == 0) {
    d >>= 1;
    ++s;
  }
  // These bases are a deterministic witness set for every n < 2^64.
  for (uint64_t a : {2ULL, 3ULL, 5ULL, 7ULL, 11ULL, 13ULL, 17ULL, 19ULL, 23ULL, 29ULL, 31ULL, 37ULL}) {
    uint64_t x = powmod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int r = 1; r < s; ++r) {
      x = mulmod(x, x, n);
      if (x == n - 1) {
        composite = false;
        break;
      }
    }
    if (composite) return false;
  }
  return true;
}

const FieldPrimes& field_primes() {
  static const FieldPrimes primes = [] {
    const uint64_t q = (1ULL << 31) - 1;  // a Mersenne prime
    MG_CHECK(is_prime_u64(q), "q must be prime");
    for (uint64_t k = ((1ULL << 63) - 2) / q; k > 0; --k) {
      uint64_t p = k * q + 1;
      if (is_prime_u64(p)) return FieldPrimes{p, q};
    }
    MG_CHECK(false, "no prime p = k*q + 1 below 2^63");
    return FieldPrimes{};
  }();
  return primes;
}

FieldDomain::FieldDomain(uint64_t trial_seed) {
  const FieldPrimes& fp = field_primes();
  p_ = fp.p;
  q_ = fp.q;
  MG_CHECK(q_ == (1ULL << 31) - 1, "mul_q assumes q = 2^31 - 1");
  // Newton iteration for p^-1 mod 2^64 (p odd): each step doubles the correct low bits.
  uint64_t inv = p_;
  for (int i = 0; i < 6; ++i) inv *= 2 - p_ * inv;
  p_inv_neg_ = 0 - inv;
  uint64_t r = static_cast<uint64_t>((static_cast<u128>(1) << 64) % p_);
  r2_ = mulmod(r, r, p_);
  one_ = r;
  uint64_t state = trial_seed ^ 0x6d6f7267616e61ULL;
  // ω = g^((p-1)/q) for random g has order q unless it is 1 (q prime).
  uint64_t w;
  do w = powmod(2 + uniform_below(state, p_ - 3), (p_ - 1) / q_, p_);
  while (w == 1);
  omega_ = to_mont(w);
  key_ = splitmix64(state);
  uint64_t base = omega_;  // ω^(256^window)
  for (auto& table : omega_pow_) {
    table[0] = one_;
    for (size_t d = 1; d < 256; ++d) table[d] = mont_mul(table[d - 1], base);
    base = mont_mul(table[255], base);
  }
}

void FieldDomain::random_fill(uint64_t seed, uint64_t stream, uint64_t first, Value* out, size_t n,
                              bool with_q) const {
  const uint64_t p = p_, q = q_;
  uint64_t c = counter(seed, stream, first);
  if (with_q)
    for (size_t i = 0; i < n; ++i, c += 2 * kWyStep) out[i] = draw(c, p, q, true);
  else
    for (size_t i = 0; i < n; ++i, c += 2 * kWyStep) out[i] = draw(c, p, q, false);
}

namespace {

// The matmul inner loops. Columns are taken a few at a time with their sums in registers, over a tile of kTile
// rows of B (which stays in L1 while the columns move along it): summing into memory cost a load and a store per
// multiply-add.
constexpr int64_t kTile = 32;

// Z_p: each product of residues is < p^2 < 2^126 and is added unreduced to a 192-bit sum (128 bits plus a carry
// word: add, add-with-carry, add-with-carry), reduced once at the end. C <= 3 columns j.. of B at a time (with more,
// the sums no longer fit in x86-64's registers), summed into sum[0..C) and carry[0..C).
template <int C>
void dot_p_columns(u128* sum, uint64_t* carry, const FieldValue* a, const FieldValue* const* b, int64_t k0,
                   int64_t k1, size_t j) {
  static_assert(C >= 1 && C <= 3);
  auto mac = [](u128& s, uint64_t& c, uint64_t x, uint64_t y) {
    u128 prod = static_cast<u128>(x) * y;
    s += prod;
    c += s < prod;
  };
  u128 s0 = sum[0], s1 = C > 1 ? sum[1] : 0, s2 = C > 2 ? sum[2] : 0;
  uint64_t c0 = carry[0], c1 = C > 1 ? carry[1] : 0, c2 = C > 2 ? carry[2] : 0;
  for (int64_t kk = k0; kk < k1; ++kk) {
    const uint64_t au = a[kk].u;
    const FieldValue* r = b[kk] + j;
    mac(s0, c0, au, r[0].u);
    if constexpr (C > 1) mac(s1, c1, au, r[1].u);
    if constexpr (C > 2) mac(s2, c2, au, r[2].u);
  }
  sum[0] = s0;
  carry[0] = c0;
  if constexpr (C > 1) sum[1] = s1, carry[1] = c1;
  if constexpr (C > 2) sum[2] = s2, carry[2] = c2;
}

// Z_q (q = 2^31 - 1): a product of residues is below 2^62 - 2^32 and a folded sum ((x & q) + (x >> 31), the same
// residue) below 2^33 + 2^31, so a 64-bit sum takes four products between folds. C <= 4 columns j.. of B at a time,
// summed into sum[0..C).
template <int C>
void dot_q_columns(uint64_t* sum, const FieldValue* a, const FieldValue* const* b, int64_t k0, int64_t k1,
                   size_t j) {
  static_assert(C >= 1 && C <= 4);
  std::array<uint64_t, 4> s{};
  for (int c = 0; c < C; ++c) s[c] = sum[c];
  auto step = [&](int64_t kk) {
    const uint64_t av = a[kk].v;
    const FieldValue* r = b[kk] + j;
    s[0] += av * r[0].v;
    if constexpr (C > 1) s[1] += av * r[1].v;
    if constexpr (C > 2) s[2] += av * r[2].v;
    if constexpr (C > 3) s[3] += av * r[3].v;
  };
  auto fold = [&] {
    const uint64_t q = (uint64_t{1} << 31) - 1;
    for (int c = 0; c < C; ++c) s[c] = (s[c] & q) + (s[c] >> 31);
  };
  int64_t kk = k0;
  for (; kk + 3 < k1; kk += 4) {
    step(kk);
    step(kk + 1);
    step(kk + 2);
    step(kk + 3);
    fold();
  }
  for (; kk < k1; ++kk) {
    step(kk);
    fold();
  }
  for (int c = 0; c < C; ++c) sum[c] = s[c];
}

}  // namespace

template <bool kWithQ>
void FieldDomain::dot_rows_impl(Value* out, const Value* a, const Value* const* b, int64_t k, int64_t n,
                                const int32_t* cols) const {
  MG_CHECK(k >= 1 && k < (int64_t{1} << 31), "dot product length out of range");
  auto width = static_cast<size_t>(n);
  acc_p_.assign(width, 0);
  acc_carry_.assign(width, 0);
  acc_q_.assign(width, 0);
  u128* sp = acc_p_.data();
  uint64_t *carry = acc_carry_.data(), *sq = acc_q_.data();
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    int64_t k1 = std::min(k, k0 + kTile);
    if (cols) {  // a few scattered columns: one at a time
      for (size_t i = 0; i < width; ++i) {
        auto j = static_cast<size_t>(cols[i]);
        dot_p_columns<1>(sp + i, carry + i, a, b, k0, k1, j);
        if constexpr (kWithQ) dot_q_columns<1>(sq + i, a, b, k0, k1, j);
      }
      continue;
    }
    size_t j = 0;
    for (; j + 3 <= width; j += 3) dot_p_columns<3>(sp + j, carry + j, a, b, k0, k1, j);
    if (j + 2 == width) dot_p_columns<2>(sp + j, carry + j, a, b, k0, k1, j);
    if (j + 1 == width) dot_p_columns<1>(sp + j, carry + j, a, b, k0, k1, j);
    if constexpr (kWithQ) {
      for (j = 0; j + 4 <= width; j += 4) dot_q_columns<4>(sq + j, a, b, k0, k1, j);
      for (; j < width; ++j) dot_q_columns<1>(sq + j, a, b, k0, k1, j);
    }
  }
  // The stored values are x·R, so the Z_p sum is (sum of products)·R^2: carry·2^128 + sp mod p·R, then one REDC
  // gives the Montgomery form of the result. carry < 2^31 (k < 2^31 products below 2^126 each), so carry·(2^128
  // mod p) is below 2^94 and the additions below cannot overflow 128 bits.
  const u128 pr = static_cast<u128>(p_) << 64;
  for (size_t j = 0; j < width; ++j) {
    u128 t = sp[j];
    while (t >= pr) t -= pr;  // at most twice: pr > 2^127 - 2^65
    t += static_cast<u128>(carry[j]) * r2_;  // r2_ = R^2 = 2^128 mod p
    if (t >= pr) t -= pr;
    uint64_t x = sq[j];
    x = (x & q_) + (x >> 31);
    x = (x & q_) + (x >> 31);
    out[cols ? cols[j] : j] = {mont_reduce(t), x >= q_ ? x - q_ : x};
  }
}
template void FieldDomain::dot_rows_impl<true>(Value*, const Value*, const Value* const*, int64_t, int64_t,
                                               const int32_t*) const;
template void FieldDomain::dot_rows_impl<false>(Value*, const Value*, const Value* const*, int64_t, int64_t,
                                                const int32_t*) const;


uint64_t FieldDomain::mont_pow(uint64_t a, uint64_t e) const {
  uint64_t r = one_;
  while (e) {
    if (e & 1) r = mont_mul(r, a);
    a = mont_mul(a, a);
    e >>= 1;
  }
  return r;
}

uint64_t FieldDomain::pow_q(uint64_t a, uint64_t e) const {
  uint64_t r = 1;
  while (e) {
    if (e & 1) r = mul_q(r, a);
    a = mul_q(a, a);
    e >>= 1;
  }
  return r;
}


FieldValue FieldDomain::constant(double c) const {
  if (!std::isfinite(c)) throw UserError("constant " + std::to_string(c) + " has no finite-field value");
  if (c == 0) return {};
  int e;
  double frac = std::frexp(std::fabs(c), &e);  // |c| = frac * 2^e, frac in [0.5, 1)
  auto m = static_cast<uint64_t>(std::ldexp(frac, 53));  // exact: a double has 53 significant bits
  e -= 53;                                                // |c| = m * 2^e exactly
  auto scaled = [&](uint64_t mod) {
    uint64_t two_e = e >= 0 ? powmod(2, static_cast<uint64_t>(e), mod)
                            : powmod(powmod(2, mod - 2, mod), static_cast<uint64_t>(-e), mod);
    uint64_t r = mulmod(m % mod, two_e, mod);
    return c < 0 ? sub_mod(0, r, mod) : r;
  };
  return {to_mont(scaled(p_)), scaled(q_)};
}

// A keyed hash of the arguments, mixed in a word at a time, is the counter of a draw like an input's: uniform in
// Z_p x Z_q without the four 64-bit divisions that rejection by modulo cost.
FieldValue FieldDomain::oracle(uint64_t tag, Value a, Value b) const {
  uint64_t h = mix64(key_ ^ (tag * kGoldenGamma));
  h = mix64(h ^ a.u);
  h = mix64(h ^ a.v);
  h = mix64(h ^ b.u);
  h = mix64(h ^ b.v);
  return draw(h, p_, q_, true);
}

FieldValue FieldDomain::inverse(Value a) const {
  if (a.u == 0 || a.v == 0) throw FieldDivisionByZero("division by a zero residue");
  // Softmax and norms divide a whole row by one value: remember the last inverse (Fermat costs ~90 products).
  if (a == last_inverted_) return last_inverse_;
  last_inverted_ = a;
  last_inverse_ = {mont_pow(a.u, p_ - 2), pow_q(a.v, q_ - 2)};
  return last_inverse_;
}

uint64_t FieldDomain::inverse_p(uint64_t u) const {
  if (u == 0) throw FieldDivisionByZero("division by a zero residue");
  if (u != last_inverted_p_) {
    last_inverted_p_ = u;
    last_inverse_p_ = mont_pow(u, p_ - 2);
  }
  return last_inverse_p_;
}

FieldValue FieldDomain::unary_p(ir::OpCode op, Value x, double s) const {
  switch (ir::op_info(op).field) {
    case ir::FieldSem::Exp: return {omega_to(x.v), 0};  // without the oracle that makes the Z_q part
    case ir::FieldSem::Square: return binary_p(ir::FieldSem::Mul, x, x);
    case ir::FieldSem::ScaleConst: return binary_p(ir::FieldSem::Mul, x, constant(s));
    case ir::FieldSem::AddConst: return binary_p(ir::FieldSem::Add, x, constant(s));
    default: return unary(op, x, s);
  }
}

FieldValue FieldDomain::binary_slow(ir::FieldSem f, Value a, Value b) const {
  switch (f) {
    case ir::FieldSem::Div: {
      Value inv = inverse(b);
      return {mont_mul(a.u, inv.u), mul_q(a.v, inv.v)};
    }
    case ir::FieldSem::Max: {
      // max is commutative: order the arguments so max(a, b) and max(b, a) agree.
      bool swap = b.u < a.u || (b.u == a.u && b.v < a.v);
      return oracle(static_cast<uint64_t>(ir::OpCode::reduce_max), swap ? b : a, swap ? a : b);
    }
    default: break;
  }
  MG_CHECK(false, "FieldDomain::binary on a non-binary semantics");
  return {};
}

FieldValue FieldDomain::unary(ir::OpCode op, Value x, double s) const {
  switch (ir::op_info(op).field) {
    case ir::FieldSem::Exp:
      return {omega_to(x.v), oracle(static_cast<uint64_t>(op), {0, x.v}).v};
    case ir::FieldSem::Square: return binary(ir::FieldSem::Mul, x, x);
    case ir::FieldSem::ScaleConst: return binary(ir::FieldSem::Mul, x, constant(s));
    case ir::FieldSem::AddConst: return binary(ir::FieldSem::Add, x, constant(s));
    case ir::FieldSem::Uninterpreted:
      if (op == ir::OpCode::rsqrt) return inverse(oracle(static_cast<uint64_t>(ir::OpCode::sqrt), x));
      return oracle(static_cast<uint64_t>(op), x);
    default: break;
  }
  MG_CHECK(false, "FieldDomain::unary on " + std::string(ir::op_name(op)));
  return {};
}

}  // namespace morgana::verify
