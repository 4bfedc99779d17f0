// gpu-cufft-callbacks' cuFFT LTO callbacks (docs/convolution.md §4): the pad as the forward transform's
// load callback, the pattern's products as the inverse transform's load callback, the extraction and
// the 1/(L1·L2) scaling as its store callback. Compiled on its own to an LTO-IR fatbin (nvcc -dc
// -fatbin, code=lto_XX; convolution/CMakeLists.txt), embedded in the library as a byte array and handed
// to cufftXtSetJITCallback, which links these functions into cuFFT's own kernels at plan time
// (nvJitLink). extern "C": cuFFT finds them by their plain names.
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

using gratingsim::conv::detail::CallbackParams;

namespace {
/// Block and in-block index of a logical offset; 32-bit division where the offset allows (every batch
/// of Table 1's cases), 64-bit beyond.
struct Position {
  unsigned long long block;
  unsigned k;
};
__device__ __forceinline__ Position position_of(unsigned long long offset, unsigned area) {
  if (offset <= 0xffffffffull) {
    const unsigned o = unsigned(offset), block = o / area;
    return {block, o - block * area};
  }
  const unsigned long long block = offset / area;
  return {block, unsigned(offset - block * area)};
}

/// The offset in the caller's compact N1×N2 blocks of the harmonic at `offset`, or −1 for padding.
__device__ __forceinline__ long long field_offset(unsigned long long offset, const CallbackParams& p) {
  const Position at = position_of(offset, unsigned(p.l1) * unsigned(p.l2));
  const int k1 = int(at.k / unsigned(p.l2)), k2 = int(at.k - unsigned(k1) * unsigned(p.l2));
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
}  // namespace

/// Forward transform, load: the padded L1×L2 input block, read straight from the caller's N1×N2 block.
extern "C" __device__ cufftComplex gratingsim_pad_load_c(void*, unsigned long long offset, void* callerInfo, void*) {
  return pad_load<cufftComplex>(offset, params(callerInfo));
}
extern "C" __device__ cufftDoubleComplex gratingsim_pad_load_z(void*, unsigned long long offset, void* callerInfo,
                                                               void*) {
  return pad_load<cufftDoubleComplex>(offset, params(callerInfo));
}

/// Inverse transform, load: the output spectrum, the pattern's products summed, never stored.
extern "C" __device__ cufftComplex gratingsim_products_load_c(void*, unsigned long long offset, void* callerInfo,
                                                              void*) {
  return products_load<cufftComplex>(offset, params(callerInfo));
}
extern "C" __device__ cufftDoubleComplex gratingsim_products_load_z(void*, unsigned long long offset,
                                                                    void* callerInfo, void*) {
  return products_load<cufftDoubleComplex>(offset, params(callerInfo));
}

/// Inverse transform, store: the kept N1×N2 outputs, scaled, written to the caller's output block (a
/// buffer distinct from the transform's own, as cuFFT allows of an in-place transform's store callback);
/// the rest of the L1×L2 block is never written.
extern "C" __device__ void gratingsim_extract_store_c(void*, unsigned long long offset, cufftComplex element,
                                                      void* callerInfo, void*) {
  extract_store(offset, element, params(callerInfo));
}
extern "C" __device__ void gratingsim_extract_store_z(void*, unsigned long long offset, cufftDoubleComplex element,
                                                      void* callerInfo, void*) {
  extract_store(offset, element, params(callerInfo));
}
