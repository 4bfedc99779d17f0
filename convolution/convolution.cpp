#include "convolution/convolution.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "convolution/backends.hpp"
#include "core/error.hpp"
#include "core/config.hpp"

namespace gratingsim::conv {
namespace {
constexpr std::array<std::pair<Backend, std::string_view>, 6> backend_names{{
    {Backend::cpu_direct, "cpu-direct"},
    {Backend::cpu_fftw, "cpu-fftw"},
    {Backend::gpu_cufft, "gpu-cufft"},
    {Backend::gpu_cufft_callbacks, "gpu-cufft-callbacks"},
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
  GS_EXPECTS(false, "unknown convolution backend '" + std::string(name) +
                     "' (expected cpu-direct, cpu-fftw, gpu-cufft, gpu-cufft-callbacks, gpu-fused or gpu-direct)");
}

Memory memory_of(Backend backend) {
  return (backend == Backend::cpu_direct || backend == Backend::cpu_fftw) ? Memory::host : Memory::device;
}

int minimal_fft_length(int n) {
  GS_EXPECTS(n >= 1, "harmonic count must be positive, got " + std::to_string(n));
  int l = 1;
  while (l < 2 * n - 1) l *= 2;
  return l;
}

Problem scalar_problem(int n1, int n2, int slices, int blocks_per_slice) {
  Problem p;
  p.n1 = n1;
  p.n2 = n2;
  p.slices = slices;
  p.per_slice = blocks_per_slice;
  return p;
}

Problem resolve(Problem g) {
  const auto check_axis = [](int n, int& l, const char* axis) {
    GS_EXPECTS(n >= 1 && n % 2 == 1,
            std::string("harmonic count N") + axis + " must be odd and positive, got " + std::to_string(n));
    if (l == 0) l = minimal_fft_length(n);
    GS_EXPECTS(l >= 2 * n - 1, std::string("FFT length L") + axis + " = " + std::to_string(l) +
                                " is below 2N" + axis + " - 1 = " + std::to_string(2 * n - 1) +
                                " (the kept outputs would alias)");
  };
  check_axis(g.n1, g.l1, "1");
  check_axis(g.n2, g.l2, "2");
  GS_EXPECTS(g.slices >= 1, "slice count must be positive, got " + std::to_string(g.slices));
  GS_EXPECTS(g.per_slice >= 1, "groups per slice must be positive, got " + std::to_string(g.per_slice));
  GS_EXPECTS(g.kernels >= 1 && g.inputs >= 1 && g.outputs >= 1,
          "kernel, input and output counts must be positive, got K = " + std::to_string(g.kernels) +
              ", Q = " + std::to_string(g.inputs) + ", P = " + std::to_string(g.outputs));
  std::vector<char> seen(std::size_t(g.outputs) * g.inputs, 0), reached(std::size_t(g.outputs), 0);
  for (const Term& t : g.pattern) {
    const std::string term = "pattern term (output " + std::to_string(t.output) + ", input " +
                             std::to_string(t.input) + ", kernel " + std::to_string(t.kernel) + ")";
    GS_EXPECTS(t.output >= 0 && t.output < g.outputs && t.input >= 0 && t.input < g.inputs && t.kernel >= 0 &&
                t.kernel < g.kernels,
            term + " is out of range (P = " + std::to_string(g.outputs) + ", Q = " + std::to_string(g.inputs) +
                ", K = " + std::to_string(g.kernels) + ")");
    char& s = seen[std::size_t(t.output) * g.inputs + t.input];
    GS_EXPECTS(!s, term + " repeats its (output, input) pair");
    s = 1;
    reached[t.output] = 1;
  }
  for (int o = 0; o < g.outputs; ++o)
    GS_EXPECTS(reached[o], "output " + std::to_string(o) + " has no term in the pattern");
  return g;
}

namespace detail {
void check_kernels(const Problem& g, Kernels kernels) {
  GS_EXPECTS(kernels.size() == g.kernels_total(),
          "expected " + std::to_string(g.kernels_total()) + " kernel coefficients (" + std::to_string(g.slices) +
              " slices × " + std::to_string(g.kernels) + " kernels of " + std::to_string(2 * g.n1 - 1) + "x" +
              std::to_string(2 * g.n2 - 1) + "), got " + std::to_string(kernels.size()));
}

void check_execute_buffers(const Problem& g, Backend backend, const void* in, const void* out,
                           std::size_t element_bytes) {
  const std::string name(to_string(backend));
  GS_EXPECTS(in != nullptr && out != nullptr, name + " execute: null buffer");
  const auto in_address = reinterpret_cast<std::uintptr_t>(in), out_address = reinterpret_cast<std::uintptr_t>(out);
  GS_EXPECTS(in_address + g.input_size() * element_bytes <= out_address ||
                 out_address + g.output_size() * element_bytes <= in_address,
             name + " execute: input and output buffers overlap");
}

Support unsupported(std::string reason) { return Support{false, std::move(reason)}; }

#if !GRATINGSIM_HAVE_CUDA
namespace {
Support no_cuda(const Problem&, Precision) { return unsupported("this build has no CUDA backends"); }
std::size_t no_workspace(const Problem&, Precision) { return 0; }
}  // namespace
#endif
}  // namespace detail

namespace {
constexpr BackendTraits table[] = {
    {Backend::cpu_direct, "cpu-direct", Memory::host, detail::can_implement_cpu_direct, detail::workspace_cpu_direct},
    {Backend::cpu_fftw, "cpu-fftw", Memory::host, detail::can_implement_cpu_fftw, detail::workspace_cpu_fftw},
#if GRATINGSIM_HAVE_CUDA
    {Backend::gpu_cufft, "gpu-cufft", Memory::device, detail::can_implement_gpu_cufft, detail::workspace_gpu_cufft},
    {Backend::gpu_cufft_callbacks, "gpu-cufft-callbacks", Memory::device, detail::can_implement_gpu_cufft_callbacks,
     detail::workspace_gpu_cufft_callbacks},
    {Backend::gpu_fused, "gpu-fused", Memory::device, detail::can_implement_gpu_fused, detail::workspace_gpu_fused},
    {Backend::gpu_direct, "gpu-direct", Memory::device, detail::can_implement_gpu_direct, detail::workspace_gpu_direct},
#else
    {Backend::gpu_cufft, "gpu-cufft", Memory::device, detail::no_cuda, detail::no_workspace},
    {Backend::gpu_cufft_callbacks, "gpu-cufft-callbacks", Memory::device, detail::no_cuda, detail::no_workspace},
    {Backend::gpu_fused, "gpu-fused", Memory::device, detail::no_cuda, detail::no_workspace},
    {Backend::gpu_direct, "gpu-direct", Memory::device, detail::no_cuda, detail::no_workspace},
#endif
};
static_assert(std::size(table) == std::size(all_backends));
}  // namespace

std::span<const BackendTraits> backend_table() { return table; }

const BackendTraits& traits(Backend backend) {
  for (const BackendTraits& t : table)
    if (t.backend == backend) return t;
  GS_EXPECTS(false, "unknown backend");
}

bool backend_available(Backend backend) {
  if (memory_of(backend) == Memory::host) return true;
#if GRATINGSIM_HAVE_CUDA
  // gpu-cufft-callbacks also needs one of its callback routes to work here (its can_implement probes
  // that once per process); N = 3 is the smallest problem it serves.
  if (backend == Backend::gpu_cufft_callbacks)
    return traits(backend).can_implement(Problem{.n1 = 3, .n2 = 3}, Precision::single).ok;
  return detail::cuda_device_present();
#else
  return false;
#endif
}

std::string cufft_callbacks_route(Precision precision) {
#if GRATINGSIM_HAVE_CUDA
  if (detail::cuda_device_present()) return detail::gpu_cufft_callbacks_route(precision);
#endif
  (void)precision;
  return "unavailable";
}

template <class Real>
std::unique_ptr<Convolution<Real>> make_convolution(Backend backend, const Problem& problem,
                                                    std::span<const std::complex<double>> kernels) {
  const Problem g = resolve(problem);
  detail::check_kernels(g, kernels);
  const Support support = traits(backend).can_implement(g, precision_of<Real>());
  GS_SUPPORTS(support.ok, "backend " + std::string(to_string(backend)) + ": " + support.reason);
  switch (backend) {
    case Backend::cpu_direct: return detail::make_cpu_direct<Real>(g, kernels);
    case Backend::cpu_fftw: return detail::make_cpu_fftw<Real>(g, kernels);
#if GRATINGSIM_HAVE_CUDA
    case Backend::gpu_cufft: return detail::make_gpu_cufft<Real>(g, kernels);
    case Backend::gpu_cufft_callbacks: return detail::make_gpu_cufft_callbacks<Real>(g, kernels);
    case Backend::gpu_fused: return detail::make_gpu_fused<Real>(g, kernels);
    case Backend::gpu_direct: return detail::make_gpu_direct<Real>(g, kernels);
#endif
    default: break;
  }
  GS_SUPPORTS(false, "backend " + std::string(to_string(backend)) + " is not in this build");
}

template std::unique_ptr<Convolution<float>> make_convolution<float>(Backend, const Problem&,
                                                                     std::span<const std::complex<double>>);
template std::unique_ptr<Convolution<double>> make_convolution<double>(Backend, const Problem&,
                                                                       std::span<const std::complex<double>>);
}  // namespace gratingsim::conv
