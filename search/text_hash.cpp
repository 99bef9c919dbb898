#include "search/text_hash.h"

#include "ir/graph.h"

namespace morgana::search {

uint64_t hash_text(std::string_view bytes, uint64_t seed) {
  uint64_t h = ir::hash_mix(0x6d6f7267616e61ULL, seed);
  size_t i = 0;
  // Eight bytes at a time, assembled little-endian by hand so the value is the same on every machine.
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w = 0;
    for (size_t k = 0; k < 8; ++k)
      w |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i + k])) << (8 * k);
    h = ir::hash_mix(h, w);
  }
  uint64_t tail = 0;
  for (size_t k = 0; i + k < bytes.size(); ++k)
    tail |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i + k])) << (8 * k);
  h = ir::hash_mix(h, tail);
  return ir::hash_mix(h, bytes.size());  // "ab" and "ab\0" differ
}

std::string hex64(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kDigits[v & 15];
  return s;
}

}  // namespace morgana::search
