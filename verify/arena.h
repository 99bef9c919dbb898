// Memory for the lazy interpreter's rows and memo tables: bump allocation from chunks that never move while the arena
// lives, so a row is a plain pointer. reset() makes everything free again but keeps the chunks: an equivalence check
// makes a pair of interpreters per trial, and fresh memory costs a page fault per 4 KiB (a thousand a trial for a
// GQA check when each trial's interpreters had chunks of their own).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace morgana::verify {

class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // `n` uninitialized objects of a trivially copyable type.
  template <class T>
  T* alloc(int64_t n) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= kAlign);
    size_t want = (static_cast<size_t>(n) * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    if (left_ < want) next_chunk(want);
    auto* out = reinterpret_cast<T*>(next_);
    next_ += want;
    left_ -= want;
    return out;
  }

  // Everything allocated is free again (and must no longer be used); the chunks stay for the next allocations.
  void reset() {
    current_ = 0;
    next_ = chunks_.empty() ? nullptr : chunks_[0].data.get();
    left_ = chunks_.empty() ? 0 : chunks_[0].size;
  }

 private:
  static constexpr size_t kAlign = 16;
  // Chunks grow from 16 KiB (a check of small programs, as the search runs by the thousand, needs no more) to 1 MiB.
  static constexpr size_t kFirstChunk = size_t{16} << 10, kLargestChunk = size_t{1} << 20;

  // Moves to the next kept chunk that holds `want` bytes, or makes one there.
  void next_chunk(size_t want) {
    if (!chunks_.empty() && next_) ++current_;
    while (current_ < chunks_.size() && chunks_[current_].size < want) ++current_;
    if (current_ == chunks_.size()) {
      size_t size = std::max(want, chunks_.empty() ? kFirstChunk : std::min(2 * chunks_.back().size, kLargestChunk));
      chunks_.push_back({std::make_unique_for_overwrite<std::byte[]>(size), size});
    }
    next_ = chunks_[current_].data.get();
    left_ = chunks_[current_].size;
  }

  struct Chunk {
    std::unique_ptr<std::byte[]> data;
    size_t size;
  };
  std::vector<Chunk> chunks_;
  size_t current_ = 0;
  std::byte* next_ = nullptr;
  size_t left_ = 0;
};

}  // namespace morgana::verify
