// PLACEHOLDER (being written by a helper session).
#include "convolution/backends.hpp"
#include "convolution/error.hpp"
namespace gratingsim::conv::detail {
template <class Real> Plan<Real> make_cpu_fftw(const Geometry&, Kernels) { SUPPORTS(false, "cpu-fftw not written yet"); }
template Plan<float> make_cpu_fftw<float>(const Geometry&, Kernels);
template Plan<double> make_cpu_fftw<double>(const Geometry&, Kernels);
}
