// splitmix64: the one pseudo-random stream of verify/ (inputs, ω, oracle keys, samples). Fast, and the same stream
// on every platform, which std::uniform_real_distribution and friends are not.
#pragma once

#include <cstdint>

namespace morgana::verify {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace morgana::verify
