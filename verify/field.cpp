#include "verify/field.h"

#include <algorithm>
#include <bit>
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

// The matmul inner loops stream four rows of B at a time along the columns. (Walking a tile of rows column by column
// kept sums in registers but read lines a whole row apart: rows a multiple of 4 KiB long, like K's 64 KiB, all fall
// into the same cache sets, and a 32-row tile thrashed L1 and L2.) With kGather, sum[i] is column cols[i] of B.
//
// Z_p: the R <= 4 products of a column (each < p^2 < 2^126) sum below 2^128 and join the column's 192-bit sum (128
// bits plus a carry word) with one add, add-with-carry, add-with-carry; it is reduced once at the end.
template <int R, bool kGather>
void dot_p_rows(u128* sum, uint64_t* carry, const FieldValue* a, const FieldValue* const* b, size_t n,
                const int32_t* cols) {
  static_assert(R >= 1 && R <= 4);
  const FieldValue *b0 = b[0], *b1 = b[R > 1 ? 1 : 0], *b2 = b[R > 2 ? 2 : 0], *b3 = b[R > 3 ? 3 : 0];
  const uint64_t a0 = a[0].u, a1 = a[R > 1 ? 1 : 0].u, a2 = a[R > 2 ? 2 : 0].u, a3 = a[R > 3 ? 3 : 0].u;
  for (size_t i = 0; i < n; ++i) {
    const size_t j = kGather ? static_cast<size_t>(cols[i]) : i;
    u128 s = static_cast<u128>(a0) * b0[j].u;
    if constexpr (R > 1) s += static_cast<u128>(a1) * b1[j].u;
    if constexpr (R > 2) s += static_cast<u128>(a2) * b2[j].u;
    if constexpr (R > 3) s += static_cast<u128>(a3) * b3[j].u;
    u128 t = sum[i] + s;
    carry[i] += t < s;
    sum[i] = t;
  }
}

// Z_q (q = 2^31 - 1): the R <= 4 products of a column (each < 2^62 - 2^32) sum below 2^64; folded ((x & q) +
// (x >> 31), the same residue, < 2^33 + 2^31) they join a 64-bit sum that fewer than 2^31 rows cannot overflow.
template <int R, bool kGather>
void dot_q_rows(uint64_t* sum, const FieldValue* a, const FieldValue* const* b, size_t n, const int32_t* cols) {
  static_assert(R >= 1 && R <= 4);
  const uint64_t q = (uint64_t{1} << 31) - 1;
  const FieldValue *b0 = b[0], *b1 = b[R > 1 ? 1 : 0], *b2 = b[R > 2 ? 2 : 0], *b3 = b[R > 3 ? 3 : 0];
  const uint64_t a0 = a[0].v, a1 = a[R > 1 ? 1 : 0].v, a2 = a[R > 2 ? 2 : 0].v, a3 = a[R > 3 ? 3 : 0].v;
  for (size_t i = 0; i < n; ++i) {
    const size_t j = kGather ? static_cast<size_t>(cols[i]) : i;
    uint64_t s = a0 * b0[j].v;
    if constexpr (R > 1) s += a1 * b1[j].v;
    if constexpr (R > 2) s += a2 * b2[j].v;
    if constexpr (R > 3) s += a3 * b3[j].v;
    sum[i] += (s & q) + (s >> 31);
  }
}

// Rows kk .. kk + R - 1 of B into the sums.
template <int R, bool kGather, bool kWithQ>
void dot_rows_step(u128* sp, uint64_t* carry, uint64_t* sq, const FieldValue* a, const FieldValue* const* b,
                   size_t n, const int32_t* cols) {
  dot_p_rows<R, kGather>(sp, carry, a, b, n, cols);
  if constexpr (kWithQ) dot_q_rows<R, kGather>(sq, a, b, n, cols);
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
  auto step = [&]<bool kGather>() {
    for (int64_t kk = 0; kk < k; kk += 4) {
      const Value* ak = a + kk;
      const Value* const* bk = b + kk;
      switch (std::min<int64_t>(4, k - kk)) {
        case 4: dot_rows_step<4, kGather, kWithQ>(sp, carry, sq, ak, bk, width, cols); break;
        case 3: dot_rows_step<3, kGather, kWithQ>(sp, carry, sq, ak, bk, width, cols); break;
        case 2: dot_rows_step<2, kGather, kWithQ>(sp, carry, sq, ak, bk, width, cols); break;
        default: dot_rows_step<1, kGather, kWithQ>(sp, carry, sq, ak, bk, width, cols); break;
      }
    }
  };
  if (cols)
    step.template operator()<true>();
  else
    step.template operator()<false>();
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
  uint64_t bits = std::bit_cast<uint64_t>(c);
  ConstantSlot& slot = constants_[(bits ^ bits >> 29 ^ bits >> 52) % constants_.size()];
  if (!slot.made || slot.bits != bits) slot = {bits, true, make_constant(c)};
  return slot.value;
}

FieldValue FieldDomain::make_constant(double c) const {
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
