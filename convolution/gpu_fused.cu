// PLACEHOLDER (being written by a helper session).
#include "convolution/backends.hpp"
#include "convolution/error.hpp"
namespace gratingsim::conv::detail {
template <class Real> Plan<Real> make_gpu_fused(const Geometry&, Kernels) { SUPPORTS(false, "gpu-fused not written yet"); }
template Plan<float> make_gpu_fused<float>(const Geometry&, Kernels);
template Plan<double> make_gpu_fused<double>(const Geometry&, Kernels);
}
