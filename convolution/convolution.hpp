#pragma once
// Batched small 2D convolutions in the harmonic domain: the library's one interface.
//
// For every batch entry b (a field block) and its slice p = b / per_slice:
//     out_b(m) = Σ_{m'} χ_p(m − m') in_b(m'),      m, m' ∈ [−M1, M1] × [−M2, M2],  N_i = 2 M_i + 1,
// i.e. the central N1×N2 part of the linear convolution of in_b with the slice's kernel χ_p, which
// has (2N1−1)×(2N2−1) coefficients n ∈ [−2M1, 2M1] × [−2M2, 2M2]. The library knows nothing of
// physics: χ_p is any complex array.
//
// Layouts (all row-major, axis 1 slow, axis 2 fast):
//   fields:  batch() blocks of N1·N2; harmonic (m1, m2) of block b at  b·N1·N2 + (m1+M1)·N2 + (m2+M2).
//            Blocks sharing a kernel are adjacent: b = slice·per_slice + j (physics: j = rhs·3 + component).
//   kernels: slices blocks of K1·K2 (K_i = 2N_i − 1); χ_p(n1, n2) at  p·K1·K2 + (n1+2M1)·K2 + (n2+2M2).
//
// FFT backends use the circular convolution of length L_i ≥ 2N_i − 1 (no aliasing into the kept
// outputs), forward transform e^{−2πi jk/L}, the 1/(L1·L2) normalisation folded into the kernel
// spectrum. Harmonic m sits at FFT index m mod L.
//
// Plan once, execute many: make_convolution() builds FFT plans, workspaces and kernel spectra;
// execute() does only the work and allocates nothing.
#include <complex>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

struct CUstream_st;  // so that the interface needs no CUDA header

namespace gratingsim::conv {

/// A CUDA stream (cudaStream_t); nullptr is the legacy default stream. Ignored by CPU backends.
using Stream = CUstream_st*;

enum class Backend {
  cpu_direct,  ///< the O(N⁴) sum, complex128 accumulation: the reference
  cpu_fftw,    ///< FFTW, OpenMP across slices, zero rows pruned
  gpu_cufft,   ///< unfused pad / cuFFT / multiply / cuFFT / extract: the baseline
  gpu_fused,   ///< one kernel for the whole FFT pipeline
  gpu_direct,  ///< direct-space GPU kernels for small N
};
inline constexpr Backend all_backends[] = {Backend::cpu_direct, Backend::cpu_fftw, Backend::gpu_cufft,
                                           Backend::gpu_fused, Backend::gpu_direct};

std::string_view to_string(Backend backend);
/// Parses "cpu-direct", "cpu-fftw", "gpu-cufft", "gpu-fused", "gpu-direct"; throws InvalidArgument otherwise.
Backend parse_backend(std::string_view name);

enum class Precision { single, double_ };
std::string_view to_string(Precision precision);  ///< "single" / "double"
Precision parse_precision(std::string_view name);

template <class Real>
constexpr Precision precision_of() {
  static_assert(std::is_same_v<Real, float> || std::is_same_v<Real, double>);
  return std::is_same_v<Real, float> ? Precision::single : Precision::double_;
}

/// Where a backend's execute() expects its buffers.
enum class Memory { host, device };
Memory memory_of(Backend backend);

/// The sizes of one batched convolution problem.
struct Geometry {
  int n1 = 1, n2 = 1;  ///< harmonics per axis, odd (N = 2M + 1); n2 = 1 for 1D gratings
  int l1 = 0, l2 = 0;  ///< FFT lengths; 0 picks the minimal admissible (smallest power of two ≥ 2N − 1)
  int slices = 1;      ///< number of distinct kernels
  int per_slice = 1;   ///< field blocks convolved with each kernel

  [[nodiscard]] std::size_t field_size() const { return std::size_t(n1) * n2; }
  [[nodiscard]] std::size_t kernel_size() const { return std::size_t(2 * n1 - 1) * (2 * n2 - 1); }
  [[nodiscard]] std::size_t batch() const { return std::size_t(slices) * per_slice; }
  [[nodiscard]] std::size_t fields_total() const { return batch() * field_size(); }
  [[nodiscard]] std::size_t kernels_total() const { return std::size_t(slices) * kernel_size(); }
};

/// Smallest power of two ≥ 2n − 1 (1 for n = 1).
int minimal_fft_length(int n);

/// Checks the sizes (odd positive N, L ≥ 2N − 1, positive counts) and fills l1, l2 where 0.
/// Throws InvalidArgument naming the offending value.
Geometry resolve(Geometry geometry);

/// One planned batched convolution.
template <class Real>
class Convolution {
 public:
  using Complex = std::complex<Real>;
  virtual ~Convolution() = default;

  /// Replaces the kernels χ_p (layout above; always complex128 on the host, rounded to Real by the
  /// backend) and recomputes their spectra. Allocates nothing; for GPU backends it copies to the
  /// device and synchronises with the device before returning.
  virtual void set_kernels(std::span<const std::complex<double>> kernels) = 0;

  /// out ← χ ⊛ in for the whole batch. Buffers hold geometry().fields_total() elements each, in
  /// memory(); they must not overlap. GPU backends enqueue on `stream` and return without
  /// synchronising; CPU backends run to completion on the calling thread's OpenMP team.
  virtual void execute(const Complex* in, Complex* out, Stream stream = nullptr) = 0;

  [[nodiscard]] virtual Backend backend() const = 0;
  [[nodiscard]] Memory memory() const { return memory_of(backend()); }
  [[nodiscard]] const Geometry& geometry() const { return geometry_; }

 protected:
  explicit Convolution(const Geometry& geometry) : geometry_(resolve(geometry)) {}
  Geometry geometry_;
};

/// Whether this build has the backend and, for GPU backends, a CUDA device is present.
bool backend_available(Backend backend);

/// Builds a plan. Throws Unsupported (naming the limit) for shapes the backend cannot do, or when the
/// backend is not available in this build or on this machine.
template <class Real>
std::unique_ptr<Convolution<Real>> make_convolution(Backend backend, const Geometry& geometry,
                                                    std::span<const std::complex<double>> kernels);

}  // namespace gratingsim::conv
