// The finite-field domain for probabilistic equivalence (paper §5, strengthened; docs/verification.md).
//
// A value is a pair (u mod p, v mod q) with q prime near 2^31 and p < 2^63 prime with q | p-1. add, sub, mul and
// div act on both parts; exp(u, v) = (ω^v mod p, h(v)) with ω of order q in Z_p; every function outside that
// fragment (sqrt, silu, gelu, relu, max, ...) is a keyed random oracle on its argument pairs. ω and the oracle key
// are fresh per trial. rsqrt(x) is 1/sqrt(x) so that the two spellings agree. A double constant is an exact dyadic
// rational and maps to its exact residue.
#pragma once

#include <cstdint>
#include <stdexcept>

#include "ir/graph.h"

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
  Value binary(ir::FieldSem f, Value a, Value b) const;

  // A uniformly random value, for inputs.
  Value random(uint64_t& state) const;
  uint64_t omega() const { return omega_; }

 private:
  Value oracle(uint64_t tag, Value a, Value b = {}) const;
  Value inverse(Value a) const;

  uint64_t p_, q_, omega_, key_;
};

}  // namespace morgana::verify
