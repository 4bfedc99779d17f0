#pragma once
// Internal: gpu-cufft-callbacks' legacy route (docs/convolution.md §4), the shared library
// gratingsim_cufft_legacy_callbacks built where the toolkit has the static cuFFT (libcufft_static.a).
// Legacy (non-LTO) callbacks are __device__ functions whose addresses cuFFT takes after planning
// (cufftXtSetCallback); cuFFT's static library links them into its kernels at device-link time, so this
// library holds its own copy of cuFFT, with every cuFFT symbol kept local to it (-Wl,--exclude-libs,ALL):
// the handles below belong to that copy and are used only through these functions. The legacy route is
// the one that works where cuFFT's LTO callbacks cannot be JIT-linked (the lent CUDA 13.0 hosts).
// A C interface without exceptions across the library boundary: every function returns a cufftResult
// value (0 = CUFFT_SUCCESS), or legacy_cuda_error when a CUDA runtime call failed.
#include <cstddef>

extern "C" {

/// A CUDA runtime call inside the library failed (not a cufftResult value).
inline constexpr int legacy_cuda_error = 1000;

/// Which transform of the backend a plan is, with its callbacks.
enum LegacyCallbackRole : int {
  legacy_forward_pad = 0,       ///< forward transform, load callback: pad
  legacy_inverse_products = 1,  ///< inverse transform, load callback: products; store callback: extract
};

/// Plans `batch` C2C (double_precision: Z2Z) transforms of contiguous L1×L2 blocks (length-1 axes
/// dropped) and attaches the role's callbacks with `caller_info` (a device pointer to CallbackParams).
/// *handle is valid only when 0 is returned.
__attribute__((visibility("default"))) int gratingsim_legacy_callbacks_plan(int l1, int l2, long long batch,
                                                                           int double_precision, int role,
                                                                           void* caller_info, int* handle);
/// Executes a plan in place on `data` on `stream` (a cudaStream_t), forward or inverse as its role says.
__attribute__((visibility("default"))) int gratingsim_legacy_callbacks_execute(int handle, int double_precision,
                                                                              int role, void* data, void* stream);
__attribute__((visibility("default"))) int gratingsim_legacy_callbacks_destroy(int handle);
}
