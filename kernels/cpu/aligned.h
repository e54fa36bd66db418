// Storage for packed weights that SIMD kernels stream: std::vector with 64-byte aligned blocks, so
// that a packed row of a cache line's width is one cache line. Plain std::vector blocks of
// 128 KB and more come from mmap at page + 16 bytes, where every 64-byte load straddles two lines;
// whether a layer's weights landed there depended on the heap's history (the bundled MLP's first
// Gemm at batch 1 swung between 5.3 and 7.6 us with unrelated changes elsewhere).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace whittle::cpu {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: rebinding, as allocators do
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, kAlign); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace whittle::cpu
