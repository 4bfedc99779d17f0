#include "convolution/convolution.hpp"

#include <array>
#include <utility>

#include "convolution/backends.hpp"
#include "convolution/error.hpp"

namespace gratingsim::conv {
namespace {
constexpr std::array<std::pair<Backend, std::string_view>, 5> backend_names{{
    {Backend::cpu_direct, "cpu-direct"},
    {Backend::cpu_fftw, "cpu-fftw"},
    {Backend::gpu_cufft, "gpu-cufft"},
    {Backend::gpu_fused, "gpu-fused"},
    {Backend::gpu_direct, "gpu-direct"},
}};
}  // namespace

std::string_view to_string(Backend backend) {
  for (auto [b, name] : backend_names)
    if (b == backend) return name;
  return "unknown";
}

Backend parse_backend(std::string_view name) {
  for (auto [b, n] : backend_names)
    if (n == name) return b;
  EXPECTS(false, "unknown convolution backend '" + std::string(name) +
                     "' (expected cpu-direct, cpu-fftw, gpu-cufft, gpu-fused or gpu-direct)");
}

std::string_view to_string(Precision precision) { return precision == Precision::single ? "single" : "double"; }

Precision parse_precision(std::string_view name) {
  if (name == "single") return Precision::single;
  if (name == "double") return Precision::double_;
  EXPECTS(false, "unknown precision '" + std::string(name) + "' (expected single or double)");
}

Memory memory_of(Backend backend) {
  return (backend == Backend::cpu_direct || backend == Backend::cpu_fftw) ? Memory::host : Memory::device;
}

int minimal_fft_length(int n) {
  EXPECTS(n >= 1, "harmonic count must be positive, got " + std::to_string(n));
  int l = 1;
  while (l < 2 * n - 1) l *= 2;
  return l;
}

Geometry resolve(Geometry g) {
  const auto check_axis = [](int n, int& l, const char* axis) {
    EXPECTS(n >= 1 && n % 2 == 1,
            std::string("harmonic count N") + axis + " must be odd and positive, got " + std::to_string(n));
    if (l == 0) l = minimal_fft_length(n);
    EXPECTS(l >= 2 * n - 1, std::string("FFT length L") + axis + " = " + std::to_string(l) +
                                " is below 2N" + axis + " - 1 = " + std::to_string(2 * n - 1) +
                                " (the kept outputs would alias)");
  };
  check_axis(g.n1, g.l1, "1");
  check_axis(g.n2, g.l2, "2");
  EXPECTS(g.slices >= 1, "slice count must be positive, got " + std::to_string(g.slices));
  EXPECTS(g.per_slice >= 1, "fields per slice must be positive, got " + std::to_string(g.per_slice));
  return g;
}

namespace detail {
void check_kernels(const Geometry& g, Kernels kernels) {
  EXPECTS(kernels.size() == g.kernels_total(),
          "expected " + std::to_string(g.kernels_total()) + " kernel coefficients (" + std::to_string(g.slices) +
              " slices of " + std::to_string(2 * g.n1 - 1) + "x" + std::to_string(2 * g.n2 - 1) + "), got " +
              std::to_string(kernels.size()));
}
}  // namespace detail

bool backend_available(Backend backend) {
  if (memory_of(backend) == Memory::host) return true;
#ifdef GRATINGSIM_HAVE_CUDA
  return detail::cuda_device_present();
#else
  return false;
#endif
}

template <class Real>
std::unique_ptr<Convolution<Real>> make_convolution(Backend backend, const Geometry& geometry,
                                                    std::span<const std::complex<double>> kernels) {
  const Geometry g = resolve(geometry);
  detail::check_kernels(g, kernels);
  switch (backend) {
    case Backend::cpu_direct: return detail::make_cpu_direct<Real>(g, kernels);
    case Backend::cpu_fftw: return detail::make_cpu_fftw<Real>(g, kernels);
    default: break;
  }
#ifdef GRATINGSIM_HAVE_CUDA
  SUPPORTS(detail::cuda_device_present(),
           "backend " + std::string(to_string(backend)) + " needs a CUDA device, and none is present");
  switch (backend) {
    case Backend::gpu_cufft: return detail::make_gpu_cufft<Real>(g, kernels);
    case Backend::gpu_fused: return detail::make_gpu_fused<Real>(g, kernels);
    case Backend::gpu_direct: return detail::make_gpu_direct<Real>(g, kernels);
    default: break;
  }
#endif
  SUPPORTS(false, "backend " + std::string(to_string(backend)) + " is not in this build (built without CUDA)");
}

template std::unique_ptr<Convolution<float>> make_convolution<float>(Backend, const Geometry&,
                                                                     std::span<const std::complex<double>>);
template std::unique_ptr<Convolution<double>> make_convolution<double>(Backend, const Geometry&,
                                                                       std::span<const std::complex<double>>);
}  // namespace gratingsim::conv
