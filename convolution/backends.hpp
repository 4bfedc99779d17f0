#pragma once
// Internal: one factory per backend, each defined in that backend's own file.
#include "convolution/convolution.hpp"

namespace gratingsim::conv::detail {

template <class Real>
using Plan = std::unique_ptr<Convolution<Real>>;
using Kernels = std::span<const std::complex<double>>;

template <class Real> Plan<Real> make_cpu_direct(const Geometry&, Kernels);
template <class Real> Plan<Real> make_cpu_fftw(const Geometry&, Kernels);
#ifdef GRATINGSIM_HAVE_CUDA
template <class Real> Plan<Real> make_gpu_cufft(const Geometry&, Kernels);
template <class Real> Plan<Real> make_gpu_fused(const Geometry&, Kernels);
template <class Real> Plan<Real> make_gpu_direct(const Geometry&, Kernels);
bool cuda_device_present();
#endif

/// Checks the kernel span against the geometry (slices · K1·K2 elements).
void check_kernels(const Geometry& geometry, Kernels kernels);

}  // namespace gratingsim::conv::detail
