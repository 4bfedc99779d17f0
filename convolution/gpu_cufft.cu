// PLACEHOLDER (being written by a helper session).
#include "convolution/backends.hpp"
#include "convolution/error.hpp"
namespace gratingsim::conv::detail {
template <class Real> Plan<Real> make_gpu_cufft(const Geometry&, Kernels) { SUPPORTS(false, "gpu-cufft not written yet"); }
template Plan<float> make_gpu_cufft<float>(const Geometry&, Kernels);
template Plan<double> make_gpu_cufft<double>(const Geometry&, Kernels);
}
