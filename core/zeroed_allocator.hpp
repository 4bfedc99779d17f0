#pragma once
// An allocator for large arrays that are filled in parallel after they are sized: its memory comes zeroed
// from calloc (a large block straight from the kernel, whose pages are faulted in when first written) and
// value-initialisation writes nothing. So `std::vector<T, ZeroedAllocator<T>> v; v.resize(n);` holds n
// zeros without a serial pass over them, and each page is first touched by the thread that fills it.
// For T whose zero is all bits zero (double, std::complex<double>). A vector that shrinks and then grows
// again within its capacity would keep the old values there instead of zeros: size such vectors once, from
// empty.
#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

namespace gratingsim {

template <class T>
struct ZeroedAllocator {
  static_assert(std::is_trivially_copyable_v<T>, "ZeroedAllocator: for arrays of plain numbers");
  using value_type = T;
  ZeroedAllocator() = default;
  template <class U>
  ZeroedAllocator(const ZeroedAllocator<U>&) noexcept {}  // NOLINT: implicit, as std::allocator's
  T* allocate(std::size_t n) {
    if (void* p = std::calloc(n, sizeof(T))) return static_cast<T*>(p);
    throw std::bad_alloc();
  }
  void deallocate(T* p, std::size_t) noexcept { std::free(p); }
  template <class U>
  void construct(U*) noexcept {}  // value-initialisation: calloc's zeros already
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(const ZeroedAllocator&, const ZeroedAllocator&) noexcept { return true; }
};

}  // namespace gratingsim
