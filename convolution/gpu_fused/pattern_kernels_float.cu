// The pattern gpu-fused kernel in complex64 for every pair of FFT lengths (kernel.cuh): one translation unit
// per kernel and precision, so that they compile in parallel.
#include "convolution/gpu_fused/kernel.cuh"

namespace gratingsim::conv::detail::fused {
template PatternKernel<float> select_pattern_kernel<float>(int, int);
}  // namespace gratingsim::conv::detail::fused
