// Storage for the large, short-lived arrays of an equivalence check (random inputs: 16 MB for attention). On Linux it
// asks for transparent huge pages, so touching such an array costs a handful of page faults instead of thousands
// (measured: the first trial of a GQA check spent ~25 ms faulting in 4 KiB pages). Elsewhere, or when the kernel
// declines, it is an ordinary aligned allocation. The elements are left uninitialized: the arrays are drawn into, and
// zeroing 16 MB first cost as much as drawing a quarter of it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace morgana::verify {

struct HugePageFree {
  void operator()(void* p) const { std::free(p); }
};

// `n` uninitialized objects of an implicit-lifetime type (an aggregate of scalars such as FieldValue).
template <class T>
std::unique_ptr<T[], HugePageFree> huge_page_array(size_t n) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  constexpr size_t kHuge = size_t{2} << 20;  // the x86-64 and arm64 huge page; only a hint to the kernel
  size_t bytes = n * sizeof(T), align = bytes < kHuge ? alignof(std::max_align_t) : kHuge;
  size_t rounded = std::max(align, (bytes + align - 1) / align * align);  // aligned_alloc wants a multiple
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure leaves ordinary pages
#endif
  return std::unique_ptr<T[], HugePageFree>(static_cast<T*>(p));
}

}  // namespace morgana::verify
