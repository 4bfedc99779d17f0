#pragma once
// Allocators for large arrays that are filled in parallel after they are sized: value-initialisation writes
// nothing, so `std::vector<T, A> v; v.resize(n);` makes no serial pass over the n elements, and each page is first
// touched by the thread that fills it. BlockAllocator is the interface over a source of blocks; ZeroedAllocator's
// blocks come zeroed from calloc (large ones straight from the kernel, whose pages are faulted in when first
// written), so such a vector holds n zeros; core/block_pool.hpp's RecycledAllocator reuses freed blocks.
// For T whose zero is all bits zero (double, std::complex<double>). A vector that shrinks and then grows
// again within its capacity would keep the old values there instead of zeros: size such vectors once, from
// empty.
#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

namespace gratingsim {

/// std::allocator's interface over Source::take(bytes) and Source::give(block, bytes), constructing nothing on
/// value-initialisation.
template <class T, class Source>
struct BlockAllocator {
  static_assert(std::is_trivially_copyable_v<T>, "BlockAllocator: for arrays of plain numbers");
  using value_type = T;
  BlockAllocator() = default;
  template <class U>
  BlockAllocator(const BlockAllocator<U, Source>&) noexcept {}  // NOLINT: implicit, as std::allocator's
  T* allocate(std::size_t n) { return static_cast<T*>(Source::take(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { Source::give(p, n * sizeof(T)); }
  template <class U>
  void construct(U*) noexcept {}  // value-initialisation: what the block holds
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(const BlockAllocator&, const BlockAllocator&) noexcept { return true; }
};

/// Zeroed blocks from calloc.
struct CallocBlocks {
  static void* take(std::size_t bytes) {
    if (void* p = std::calloc(bytes == 0 ? 1 : bytes, 1)) return p;
    throw std::bad_alloc();
  }
  static void give(void* block, std::size_t) noexcept { std::free(block); }
};

template <class T>
using ZeroedAllocator = BlockAllocator<T, CallocBlocks>;

}  // namespace gratingsim
