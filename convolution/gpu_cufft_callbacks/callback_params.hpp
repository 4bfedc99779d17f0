#pragma once
// Internal: what gpu-cufft-callbacks' callbacks (callbacks.cuh; LTO or legacy) receive as cuFFT's callerInfo: one
// struct per plan in device memory, shared by its three callbacks. Used by the host side
// (gpu_cufft_callbacks.cu) and by the callback source, which is compiled on its own to LTO-IR: plain
// C++, no CUDA header. Complex arrays are of the plan's precision (float2 or double2 layout).
namespace gratingsim::conv::detail {

struct CallbackParams {
  // The caller's buffers of the execute in flight, written on the device by a one-thread kernel at the
  // start of every execute (stream-ordered before the transforms that read them).
  const void* in;  ///< input blocks × N1·N2: read by the forward transform's load callback
  void* out;       ///< output blocks × N1·N2: written by the inverse transform's store callback
  // The plan's own arrays, fixed at plan time.
  const void* input_spectra;   ///< X̂: input blocks × L1·L2, the forward transforms' results
  const void* kernel_spectra;  ///< Ŝ: slices·K × L1·L2, FFT₂ of the kernels, unnormalised
  const int* terms;            ///< the pattern sorted by output: (input q, kernel k) pairs, flattened
  const int* term_begin;       ///< P + 1 offsets: output o's terms are pairs term_begin[o] .. term_begin[o+1)
  int n1, n2;                  ///< harmonics per axis, N = 2M + 1
  int l1, l2;                  ///< FFT lengths per axis, L ≥ 2N − 1
  int kernels, inputs, outputs, per_slice;  ///< K, Q, P and groups per slice
  double scale;                ///< 1/(L1·L2): the normalisation of the unnormalised inverse transform
};

}  // namespace gratingsim::conv::detail
