// A 64-bit hash of bytes, for the result files' checksum and the cache key. Not cryptographic: it detects
// truncation and accidental edits, and two seeds give the cache key 128 bits against collisions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace morgana::search {

uint64_t hash_text(std::string_view bytes, uint64_t seed = 0);

// 16 lowercase hex digits.
std::string hex64(uint64_t v);

}  // namespace morgana::search
