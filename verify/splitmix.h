// splitmix64: the one pseudo-random stream of verify/ (inputs, ω, oracle keys, samples). Fast, and the same stream
// on every platform, which std::uniform_real_distribution and friends are not.
#pragma once

#include <cstdint>

namespace morgana::verify {

inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// splitmix64's output function: a bijective mix of 64 bits. Applied to a counter it is a counter-based generator,
// so element i of a stream can be drawn without drawing the ones before it.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t splitmix64(uint64_t& state) { return mix64(state += kGoldenGamma); }

// wyrand's output function: one 64x64->128-bit multiply, folded. Applied to a counter stepped by kWyStep it is
// wyrand itself (which passes BigCrush and PractRand); about a third of mix64's cost, for the millions of random
// inputs an equivalence trial draws.
inline constexpr uint64_t kWyStep = 0xa0761d6478bd642fULL;
inline uint64_t wymix(uint64_t c) {
  __extension__ using u128 = unsigned __int128;
  u128 m = static_cast<u128>(c) * (c ^ 0xe7037ed1a0b428dbULL);
  return static_cast<uint64_t>(m >> 64) ^ static_cast<uint64_t>(m);
}

}  // namespace morgana::verify
