// gpu-cufft-callbacks' cuFFT LTO callbacks (docs/convolution.md §4): the pad as the forward transform's
// load callback, the pattern's products as the inverse transform's load callback, the extraction and
// the 1/(L1·L2) scaling as its store callback (bodies in callbacks.cuh). Compiled on its own to an LTO-IR
// fatbin (nvcc -dc -fatbin, code=lto_XX; convolution/CMakeLists.txt), embedded in the library as a byte
// array and handed to cufftXtSetJITCallback, which links these functions into cuFFT's own kernels at plan
// time (nvJitLink). extern "C": cuFFT finds them by their plain names.
#include "convolution/gpu_cufft_callbacks/callbacks.cuh"

using namespace gratingsim::conv::detail::callbacks;

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
