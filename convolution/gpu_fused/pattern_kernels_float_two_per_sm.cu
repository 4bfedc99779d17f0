// The pattern gpu-fused kernel in complex64, two CTAs per SM (128 registers), for every pair of FFT lengths
// (kernel.cuh): one translation unit per kernel, precision and CTAs per SM, so that they compile in parallel.
#include "convolution/gpu_fused/kernel.cuh"

namespace gratingsim::conv::detail::fused {
template PatternKernel<float> select_pattern_kernel<float, 2>(int, int);
}  // namespace gratingsim::conv::detail::fused
