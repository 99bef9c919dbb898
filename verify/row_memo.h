// The lazy interpreter's memo of rows made inside blocks: a pointer per (frame, body tensor, row) key. A block
// iteration asks for a handful of the thousands of rows its tiles have (one row of each 256-row tile in attention), so
// a table per tile and frame was mostly zeros to write: an open-addressing hash map instead, a few bytes per row made.
#pragma once

#include <cstdint>
#include <vector>

namespace morgana::verify {

template <class V>
class RowMemo {
 public:
  // The row stored under `key`, or nullptr.
  const V* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return rows_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

  // Stores `row` under `key`, which must not be stored yet (and is not kEmpty).
  void insert(uint64_t key, const V* row) {
    if (2 * (count_ + 1) > keys_.size()) grow();
    size_t i = slot(key);
    while (keys_[i] != kEmpty) i = (i + 1) & mask_;
    keys_[i] = key;
    rows_[i] = row;
    ++count_;
  }

  static constexpr uint64_t kEmpty = ~uint64_t{0};

 private:
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_); }

  void grow() {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<const V*> rows = std::move(rows_);
    size_t capacity = keys.empty() ? 1024 : 2 * keys.size();
    keys_.assign(capacity, kEmpty);
    rows_.assign(capacity, nullptr);
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;  // slot() keeps the top log2(capacity) bits
    count_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != kEmpty) insert(keys[i], rows[i]);
  }

  std::vector<uint64_t> keys_;
  std::vector<const V*> rows_;
  size_t count_ = 0, mask_ = 0;
  int shift_ = 64;
};

}  // namespace morgana::verify
