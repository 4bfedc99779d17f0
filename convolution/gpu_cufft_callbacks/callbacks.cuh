#pragma once
// gpu-cufft-callbacks' callback bodies (docs/convolution.md §4), shared by its two routes: the LTO entry
// points (callbacks.cu, compiled on its own to LTO-IR) and the legacy ones (legacy_plans.cu, linked against
// the static cuFFT). Plain CUDA C++ on cuFFT's types; no project header but callback_params.hpp.
//
// cuFFT calls a load callback once per input element and a store callback once per output element,
// with the element's offset in the plan's logical layout: block b = offset / (L1·L2), index
// k = k1·L2 + k2 within it (axes of length 1 dropped from the plan leave this unchanged). Harmonic m
// sits at index k = m mod L: index k holds m = k for k ≤ M and m = k − L for k ≥ L − M; the indices
// between are the zero padding (L ≥ 2N − 1 > 2M + 1). Every transform runs in place on the plan's own
// L1×L2 workspaces; the callbacks read and write the caller's compact N1×N2 blocks through
// CallbackParams, never through cuFFT's data pointer (the products' load reads its own element of X̂).
#include <cufft.h>

#include "convolution/gpu_cufft_callbacks/callback_params.hpp"

namespace gratingsim::conv::detail::callbacks {
/// Block and in-block index of a logical offset: a shift and a mask where the area is a power of two (every
/// L of Table 1's cases: a callback runs once per element, and a division costs tens of instructions),
/// else 32-bit division where the offset allows, 64-bit beyond.
struct Position {
  unsigned long long block;
  unsigned k;
};
__device__ __forceinline__ Position position_of(unsigned long long offset, unsigned area) {
  if ((area & (area - 1)) == 0) return {offset >> (__ffs(int(area)) - 1), unsigned(offset) & (area - 1)};
  if (offset <= 0xffffffffull) {
    const unsigned o = unsigned(offset), block = o / area;
    return {block, o - block * area};
  }
  const unsigned long long block = offset / area;
  return {block, unsigned(offset - block * area)};
}

/// k = k1·l2 + k2 split, by a shift and a mask where l2 is a power of two.
__device__ __forceinline__ void split(unsigned k, unsigned l2, int& k1, int& k2) {
  if ((l2 & (l2 - 1)) == 0) {
    k1 = int(k >> (__ffs(int(l2)) - 1));
    k2 = int(k & (l2 - 1));
  } else {
    k1 = int(k / l2);
    k2 = int(k - unsigned(k1) * l2);
  }
}

/// The offset in the caller's compact N1×N2 blocks of the harmonic at `offset`, or −1 for padding.
__device__ __forceinline__ long long field_offset(unsigned long long offset, const CallbackParams& p) {
  const Position at = position_of(offset, unsigned(p.l1) * unsigned(p.l2));
  int k1, k2;
  split(at.k, unsigned(p.l2), k1, k2);
  const int h1 = p.n1 / 2, h2 = p.n2 / 2;
  const int m1 = k1 <= h1 ? k1 : k1 - p.l1, m2 = k2 <= h2 ? k2 : k2 - p.l2;
  if (m1 < -h1 || m2 < -h2) return -1;
  return (long long)(at.block * unsigned(p.n1 * p.n2)) + (m1 + h1) * p.n2 + (m2 + h2);
}

template <class C>
__device__ __forceinline__ C pad_load(unsigned long long offset, const CallbackParams& p) {
  const long long i = field_offset(offset, p);
  return i < 0 ? C{0, 0} : static_cast<const C*>(p.in)[i];
}

/// Ŷ_{b'}[k] = Σ_{terms (o, q, kernel)} Ŝ_{slice·K + kernel}[k] · X̂_{group·Q + q}[k], b' = group·P + o,
/// slice = group / per_slice (a scalar problem: the one term, Ŝ_slice[k] · X̂_b[k]).
template <class C>
__device__ __forceinline__ C products_load(unsigned long long offset, const CallbackParams& p) {
  const unsigned area = unsigned(p.l1) * unsigned(p.l2);
  const Position at = position_of(offset, area);
  const unsigned long long group = at.block / unsigned(p.outputs), slice = group / unsigned(p.per_slice);
  const int o = int(at.block - group * unsigned(p.outputs));
  const C* x = static_cast<const C*>(p.input_spectra);
  const C* s = static_cast<const C*>(p.kernel_spectra);
  C sum{0, 0};
  for (int t = p.term_begin[o]; t < p.term_begin[o + 1]; ++t) {
    const C a = x[(group * unsigned(p.inputs) + unsigned(p.terms[2 * t])) * area + at.k];
    const C b = s[(slice * unsigned(p.kernels) + unsigned(p.terms[2 * t + 1])) * area + at.k];
    sum.x += a.x * b.x - a.y * b.y;
    sum.y += a.x * b.y + a.y * b.x;
  }
  return sum;
}

template <class C>
__device__ __forceinline__ void extract_store(unsigned long long offset, C element, const CallbackParams& p) {
  const long long i = field_offset(offset, p);
  if (i < 0) return;  // the discarded part of the circular convolution
  using Real = decltype(element.x);
  const Real scale = Real(p.scale);
  static_cast<C*>(p.out)[i] = C{element.x * scale, element.y * scale};
}

__device__ __forceinline__ const CallbackParams& params(void* caller_info) {
  return *static_cast<const CallbackParams*>(caller_info);
}

}  // namespace gratingsim::conv::detail::callbacks
