#pragma once
// Internal: per backend, its factory, its can_implement and its workspace_bytes, each defined in that
// backend's own file; convolution.cpp gathers them into the backend table.
#include "convolution/convolution.hpp"
#include "core/config.hpp"

namespace gratingsim::conv::detail {

template <class Real>
using Plan = std::unique_ptr<Convolution<Real>>;
using Kernels = std::span<const std::complex<double>>;

#define GRATINGSIM_DECLARE_BACKEND(name)                             \
  template <class Real> Plan<Real> make_##name(const Problem&, Kernels); \
  Support can_implement_##name(const Problem&, Precision);           \
  std::size_t workspace_##name(const Problem&, Precision);

GRATINGSIM_DECLARE_BACKEND(cpu_direct)
GRATINGSIM_DECLARE_BACKEND(cpu_fftw)
#if GRATINGSIM_HAVE_CUDA
GRATINGSIM_DECLARE_BACKEND(gpu_cufft)
GRATINGSIM_DECLARE_BACKEND(gpu_cufft_callbacks)
GRATINGSIM_DECLARE_BACKEND(gpu_fused)
GRATINGSIM_DECLARE_BACKEND(gpu_direct)
/// gpu-cufft-callbacks' route for `precision` (convolution.hpp, cufft_callbacks_route).
std::string gpu_cufft_callbacks_route(Precision precision);
/// Whether a CUDA device is present (cached after the first call).
bool cuda_device_present();
#endif
#undef GRATINGSIM_DECLARE_BACKEND

/// Checks the kernel span against the problem (slices · K · K1·K2 elements).
void check_kernels(const Problem& problem, Kernels kernels);

/// Checks execute()'s buffers (the GPU backends'): neither is null, and `in` (problem.input_size()
/// elements of `element_bytes`) and `out` (problem.output_size()) do not overlap; the messages name `backend`.
void check_execute_buffers(const Problem& problem, Backend backend, const void* in, const void* out,
                           std::size_t element_bytes);

/// A refusal with its reason.
Support unsupported(std::string reason);

}  // namespace gratingsim::conv::detail
