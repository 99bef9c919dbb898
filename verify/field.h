// The finite-field domain for probabilistic equivalence (paper §5, strengthened; docs/verification.md).
//
// A value is a pair (u mod p, v mod q) with q prime near 2^31 and p < 2^63 prime with q | p-1. add, sub, mul and
// div act on both parts; exp(u, v) = (ω^v mod p, h(v)) with ω of order q in Z_p; every function outside that
// fragment (sqrt, silu, gelu, relu, max, ...) is a keyed random oracle on its argument pairs. ω and the oracle key
// are fresh per trial. rsqrt(x) is 1/sqrt(x) so that the two spellings agree. A double constant is an exact dyadic
// rational and maps to its exact residue. A FieldDomain is not thread-safe (it caches the last inverse): use one
// per thread.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "ir/graph.h"
#include "verify/splitmix.h"

namespace morgana::verify {

struct FieldPrimes {
  uint64_t p;  // prime, p < 2^63, q | p - 1
  uint64_t q;  // prime near 2^31
};
// Chosen once: q = 2^31 - 1 and the largest prime p = k*q + 1 below 2^63.
const FieldPrimes& field_primes();

bool is_prime_u64(uint64_t n);  // deterministic Miller-Rabin for 64-bit n
uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m);
uint64_t powmod(uint64_t a, uint64_t e, uint64_t m);

struct FieldValue {
  uint64_t u = 0;  // mod p
  uint64_t v = 0;  // mod q
  bool operator==(const FieldValue&) const = default;
};

// Thrown when a program divides by a zero residue: reported, never mapped to some value.
class FieldDivisionByZero : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class FieldDomain {
 public:
  using Value = FieldValue;

  // All randomness of one trial (ω, the oracle key) derives from `trial_seed`.
  explicit FieldDomain(uint64_t trial_seed);

  Value constant(double c) const;
  Value unary(ir::OpCode op, Value x, double s) const;
  // add, sub and mul are the interpreter's inner loops: inline; the rest goes out of line.
  Value binary(ir::FieldSem f, Value a, Value b) const {
    switch (f) {
      case ir::FieldSem::Add: return {add_mod(a.u, b.u, p_), add_mod(a.v, b.v, q_)};
      case ir::FieldSem::Sub: return {sub_mod(a.u, b.u, p_), sub_mod(a.v, b.v, q_)};
      case ir::FieldSem::Mul: return {mont_mul(a.u, b.u), mul_q(a.v, b.v)};
      default: return binary_slow(f, a, b);
    }
  }

  // The same, computing the Z_p part only (v = 0), for values whose Z_q part cannot matter (exponent_use.h).
  // Only add, sub, mul, div, exp and the exact unary ops have a cheaper form; the rest compute both parts. Division
  // here checks only the Z_p part for zero, so a value made by a *_p form must only meet *_p forms.
  Value binary_p(ir::FieldSem f, Value a, Value b) const {
    switch (f) {
      case ir::FieldSem::Add: return {add_mod(a.u, b.u, p_), 0};
      case ir::FieldSem::Sub: return {sub_mod(a.u, b.u, p_), 0};
      case ir::FieldSem::Mul: return {mont_mul(a.u, b.u), 0};
      case ir::FieldSem::Div: return {mont_mul(a.u, inverse_p(b.u)), 0};
      default: return binary(f, a, b);
    }
  }
  Value unary_p(ir::OpCode op, Value x, double s) const;
  void dot_rows_p(Value* out, const Value* a, const Value* const* b, int64_t k, int64_t n,
                  const int32_t* cols = nullptr) const {
    dot_rows_impl<false>(out, a, b, k, n, cols);
  }

  // out[j] = sum_kk a[kk] * b[kk][j]. Products are summed unreduced (128 bits in Z_p, folded 64 bits in Z_q) and
  // reduced once per element, which halves the cost of a multiply-add; exact, so equal to any other order.
  // With `cols` (sorted), only out[cols[i]] for i < n, from columns cols[i] of B.
  void dot_rows(Value* out, const Value* a, const Value* const* b, int64_t k, int64_t n,
                const int32_t* cols = nullptr) const {
    dot_rows_impl<true>(out, a, b, k, n, cols);
  }

  // A uniformly random value (ω, keys, tests).
  Value random(uint64_t& state) const { return random_counter(splitmix64(state)); }
  // The random value at (stream, index): element `index` of input `stream`, the same however it is visited, and
  // cheap enough to draw a million inputs at a time. Without `with_q` the Z_q part is 0 (for inputs whose Z_q part
  // cannot matter, exponent_use.h); the Z_p part is the same either way.
  Value random_at(uint64_t seed, uint64_t stream, uint64_t index, bool with_q = true) const {
    return draw(counter(seed, stream, index), p_, q_, with_q);
  }
  // out[i] = random_at(seed, stream, first + i, with_q) for i < n, in a loop the compiler can keep tight.
  void random_fill(uint64_t seed, uint64_t stream, uint64_t first, Value* out, size_t n, bool with_q) const;
  uint64_t omega() const { return omega_; }

 private:
  Value oracle(uint64_t tag, Value a, Value b = {}) const;
  static uint64_t counter(uint64_t seed, uint64_t stream, uint64_t index) {
    return (seed ^ (stream * 0xd1b54a32d192ed03ULL)) + index * (2 * kWyStep);
  }
  // u and v from wyrand outputs at two counters; rejection (rare: p is just below 2^63, q = 2^31 - 1) re-mixes
  // with a salt. Static, with p and q passed in: a loop that stores draws through a Value* must not reload them
  // from the domain (the stores could alias its members).
  static Value draw(uint64_t c, uint64_t p, uint64_t q, bool with_q) {
    uint64_t u = wymix(c + kWyStep) >> 1, v = 0;
    if (u >= p) [[unlikely]]
      u = redraw(c + kWyStep, p, 1);
    if (with_q) {
      v = wymix(c + 2 * kWyStep) >> 33;
      if (v >= q) [[unlikely]]
        v = redraw(c + 2 * kWyStep, q, 33);
    }
    return {u, v};
  }
  // Out of line, so that the loops of draw() keep their registers for the common case.
  [[gnu::cold, gnu::noinline]] static uint64_t redraw(uint64_t c, uint64_t bound, int shift) {
    uint64_t x = bound;
    for (uint64_t salt = 1; x >= bound; ++salt) x = mix64(c + salt * 0x632be59bd9b4e019ULL) >> shift;
    return x;
  }
  Value random_counter(uint64_t c) const { return draw(c, p_, q_, true); }
  Value inverse(Value a) const;
  uint64_t inverse_p(uint64_t u) const;
  template <bool kWithQ>
  void dot_rows_impl(Value* out, const Value* a, const Value* const* b, int64_t k, int64_t n,
                     const int32_t* cols) const;

  // Z_p in Montgomery form (R = 2^64): u holds x·R mod p. The map is a bijection, so equality, uniform sampling and
  // oracle keys work on the stored form directly; only constants and printing convert.
  Value binary_slow(ir::FieldSem f, Value a, Value b) const;
  static uint64_t add_mod(uint64_t a, uint64_t b, uint64_t m) {
    uint64_t s = a + b;  // a, b < m < 2^63: no overflow
    return s >= m ? s - m : s;
  }
  static uint64_t sub_mod(uint64_t a, uint64_t b, uint64_t m) { return a >= b ? a - b : a + m - b; }
  __extension__ using u128 = unsigned __int128;
  uint64_t mont_mul(uint64_t a, uint64_t b) const { return mont_reduce(static_cast<u128>(a) * b); }
  // t·R^-1 mod p for t < p·R (Montgomery's REDC).
  uint64_t mont_reduce(u128 t) const {
    uint64_t m = static_cast<uint64_t>(t) * p_inv_neg_;
    u128 sum = t + static_cast<u128>(m) * p_;  // < 2pR < 2^128
    auto u = static_cast<uint64_t>(sum >> 64);
    return u >= p_ ? u - p_ : u;
  }
  uint64_t mont_pow(uint64_t a, uint64_t e) const;
  uint64_t to_mont(uint64_t x) const { return mont_mul(x, r2_); }
  // Z_q with q = 2^31 - 1: reduction by folding.
  uint64_t mul_q(uint64_t a, uint64_t b) const {
    uint64_t x = a * b;  // < 2^62
    x = (x & q_) + (x >> 31);
    x = (x & q_) + (x >> 31);
    return x >= q_ ? x - q_ : x;
  }
  uint64_t pow_q(uint64_t a, uint64_t e) const;

  uint64_t p_, q_, omega_, key_;
  // ω^(d·256^w) for w = 0..3 and every byte d: exp costs three multiplications (v < 2^32).
  std::array<std::array<uint64_t, 256>, 4> omega_pow_{};
  uint64_t omega_to(uint64_t v) const {
    uint64_t r = omega_pow_[0][v & 255];
    r = mont_mul(r, omega_pow_[1][(v >> 8) & 255]);
    r = mont_mul(r, omega_pow_[2][(v >> 16) & 255]);
    return mont_mul(r, omega_pow_[3][(v >> 24) & 255]);
  }
  // constant()'s recent results, direct-mapped by the double's bits: a norm's 1/n and eps would otherwise cost two
  // modular exponentiations per row or column normalized.
  struct ConstantSlot {
    uint64_t bits = 0;
    bool made = false;
    Value value{};
  };
  mutable std::array<ConstantSlot, 8> constants_{};
  Value make_constant(double c) const;
  // One-entry cache of inverse(): a domain is used by one thread at a time.
  mutable Value last_inverted_{}, last_inverse_{};
  mutable uint64_t last_inverted_p_ = 0, last_inverse_p_ = 0;
  // dot_rows' accumulators, kept to save an allocation per call.
  mutable std::vector<u128> acc_p_;
  mutable std::vector<uint64_t> acc_carry_, acc_q_;
  uint64_t p_inv_neg_;  // -p^-1 mod 2^64
  uint64_t r2_;         // R^2 mod p
  uint64_t one_;        // R mod p (1 in Montgomery form)

 public:
  // The canonical residue of a stored u (for printing evidence).
  uint64_t canonical(uint64_t u) const { return mont_mul(u, 1); }
};

}  // namespace morgana::verify
