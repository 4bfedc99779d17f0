#pragma once
// Batched small 2D convolutions in the harmonic domain, described as a problem (CUTLASS-style): the
// library's one interface. It knows nothing of physics. (docs/convolution.md §1–2 describes it.)
//
// A problem has `slices` slices; each slice holds K kernels χ_{p,k} and `per_slice` groups (in physics:
// right-hand sides) of Q input and P output field blocks. A sparse P×Q pattern of terms (p_out, q_in, k)
// says which kernel connects which input to which output; for every group g of slice p
//     out_{g,o}(m) = Σ_{terms (o, q, k)} Σ_{m'} χ_{p,k}(m − m') in_{g,q}(m'),   m, m' ∈ [−M1, M1] × [−M2, M2],
// N_i = 2 M_i + 1: the central N1×N2 part of the linear convolutions. χ_{p,k} has (2N1−1)×(2N2−1)
// coefficients n ∈ [−2M1, 2M1] × [−2M2, 2M2]. The scalar convolution is K = P = Q = 1 with the one term
// (0, 0, 0); every kernel is shared by all groups of its slice.
//
// Layouts (all row-major, axis 1 slow, axis 2 fast; every block N1·N2):
//   inputs:  block (slice·per_slice + g)·Q + q; harmonic (m1, m2) at offset (m1+M1)·N2 + (m2+M2)
//   outputs: block (slice·per_slice + g)·P + o
//   kernels: block slice·K + k of K1·K2 (K_i = 2N_i − 1); χ(n1, n2) at offset (n1+2M1)·K2 + (n2+2M2).
//
// FFT backends use the circular convolution of length L_i ≥ 2N_i − 1 (no aliasing into the kept
// outputs), forward transform e^{−2πi jk/L}, the 1/(L1·L2) normalisation folded into the kernel
// spectra. Harmonic m sits at FFT index m mod L. Each input block is transformed once and each output
// block inverse-transformed once; the pattern's products are summed between the two.
//
// Plan once, execute many: make_convolution() builds FFT plans, workspaces and kernel spectra;
// execute() does only the work and allocates nothing. backend_table() says, per backend, whether it
// can implement a problem and how much workspace its plan takes, before anything is allocated.
#include <complex>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/vocabulary.hpp"

namespace gratingsim::conv {

enum class Backend {
  cpu_direct,  ///< the O(N⁴) sum, complex128 accumulation: the reference
  cpu_fftw,    ///< FFTW, OpenMP across slices, zero rows pruned
  gpu_cufft,   ///< unfused pad / cuFFT / multiply / cuFFT / extract: the baseline
  gpu_cufft_callbacks,  ///< cuFFT with pad, products and extract as load/store callbacks: the strongest baseline
  gpu_fused,   ///< one kernel for the whole FFT pipeline
  gpu_direct,  ///< direct-space GPU kernels for small N
};
inline constexpr Backend all_backends[] = {Backend::cpu_direct, Backend::cpu_fftw, Backend::gpu_cufft,
                                           Backend::gpu_cufft_callbacks,
                                           Backend::gpu_fused, Backend::gpu_direct};

std::string_view to_string(Backend backend);
/// Parses "cpu-direct", "cpu-fftw", "gpu-cufft", "gpu-cufft-callbacks", "gpu-fused", "gpu-direct"; throws
/// InvalidArgument otherwise.
Backend parse_backend(std::string_view name);

/// Where a backend's execute() expects its buffers.
Memory memory_of(Backend backend);

/// One term of a problem's pattern: output component `output` += kernel `kernel` ⊛ input component `input`.
struct Term {
  int output = 0, input = 0, kernel = 0;
  friend bool operator==(const Term&, const Term&) = default;
};

/// One batched convolution problem: sizes and pattern (layouts in the header comment).
struct Problem {
  int n1 = 1, n2 = 1;  ///< harmonics per axis, odd (N = 2M + 1); n2 = 1 for 1D gratings
  int l1 = 0, l2 = 0;  ///< FFT lengths; 0 picks the minimal admissible (smallest power of two ≥ 2N − 1)
  int slices = 1;      ///< slices; each has its own K kernels
  int per_slice = 1;   ///< groups per slice, each of Q input and P output blocks
  int kernels = 1;     ///< K: kernels per slice
  int inputs = 1;      ///< Q: input blocks per group
  int outputs = 1;     ///< P: output blocks per group
  /// The sparse P×Q pattern: each (output, input) pair at most once, every output at least once.
  std::vector<Term> pattern{Term{}};

  [[nodiscard]] std::size_t field_size() const { return std::size_t(n1) * n2; }
  [[nodiscard]] std::size_t kernel_size() const { return std::size_t(2 * n1 - 1) * (2 * n2 - 1); }
  [[nodiscard]] std::size_t groups() const { return std::size_t(slices) * per_slice; }
  [[nodiscard]] std::size_t input_blocks() const { return groups() * inputs; }
  [[nodiscard]] std::size_t output_blocks() const { return groups() * outputs; }
  [[nodiscard]] std::size_t input_size() const { return input_blocks() * field_size(); }
  [[nodiscard]] std::size_t output_size() const { return output_blocks() * field_size(); }
  [[nodiscard]] std::size_t kernels_total() const { return std::size_t(slices) * kernels * kernel_size(); }
  /// K = P = Q = 1 with the one term (0, 0, 0): the plain batched convolution.
  [[nodiscard]] bool scalar() const { return kernels == 1 && inputs == 1 && outputs == 1; }
};

/// The scalar problem of `blocks_per_slice` blocks per slice (K = P = Q = 1).
Problem scalar_problem(int n1, int n2, int slices, int blocks_per_slice);

/// Smallest power of two ≥ 2n − 1 (1 for n = 1).
int minimal_fft_length(int n);

/// Checks the sizes (odd positive N, L ≥ 2N − 1, positive counts) and the pattern (indices in range,
/// no repeated (output, input) pair, every output reached), and fills l1, l2 where 0.
/// Throws InvalidArgument naming the offending value.
Problem resolve(Problem problem);

/// One planned batched convolution.
template <class Real>
class Convolution {
 public:
  using Complex = std::complex<Real>;
  virtual ~Convolution() = default;

  /// Replaces the kernels χ_{p,k} (layout above; always complex128 on the host, rounded to Real by
  /// the backend) and recomputes their spectra. Allocates nothing; GPU backends copy and transform on
  /// the calling thread's default stream and wait for it before returning. Executes still in flight
  /// that read the old kernels must have been waited for by the caller (their streams are its own).
  virtual void set_kernels(std::span<const std::complex<double>> kernels) = 0;

  /// out ← the pattern's convolutions of in, for the whole batch. `in` holds problem().input_size()
  /// elements and `out` problem().output_size(), in memory(); they must not overlap. GPU backends
  /// enqueue on `stream` and return without synchronising; CPU backends run to completion on the
  /// calling thread's OpenMP team.
  virtual void execute(const Complex* in, Complex* out, Stream stream = nullptr) = 0;

  [[nodiscard]] virtual Backend backend() const = 0;
  [[nodiscard]] Memory memory() const { return memory_of(backend()); }
  /// Whether execute() may be captured in a CUDA graph and replayed (physics' GMRES does, krylov.hpp
  /// KrylovSettings::cuda_graphs): it enqueues only kernels on `stream`, whose arguments are fixed by the
  /// plan and the buffers, allocates nothing, waits for nothing and reads no host memory. True for gpu-fused
  /// and gpu-direct (one kernel launch each). False for the CPU backends (no stream work) and for the cuFFT
  /// backends: cuFFT supports capturing single-GPU plans, but not every callback configuration (out-of-place
  /// load callbacks since CUDA 11.8, cuFFT's deprecated-functionality notes), their captured library work was
  /// not checked on a device, and they serve the larger problems, where launch cost is a small share.
  [[nodiscard]] virtual bool capturable() const { return false; }
  [[nodiscard]] const Problem& problem() const { return problem_; }

 protected:
  explicit Convolution(const Problem& problem) : problem_(resolve(problem)) {}
  Problem problem_;
};

/// Whether a backend can serve a problem, and why not.
struct Support {
  bool ok = true;
  std::string reason;  ///< empty when ok
  explicit operator bool() const { return ok; }
};

/// One row of the backend table: what a backend is and what it can do, asked before any allocation.
struct BackendTraits {
  Backend backend;
  std::string_view name;  ///< as parse_backend() reads it
  Memory memory;
  /// Whether this backend can plan `problem` (resolved) in `precision` in this build on this
  /// machine (a CUDA device present for GPU backends); the reason, naming the limit, when not.
  Support (*can_implement)(const Problem& problem, Precision precision);
  /// Bytes a plan of `problem` allocates in `memory` beyond the caller's input and output buffers:
  /// kernels, spectra, FFT work areas, FFT library plans where known.
  std::size_t (*workspace_bytes)(const Problem& problem, Precision precision);
};

/// Every backend of the library, in the order of `all_backends`.
std::span<const BackendTraits> backend_table();
const BackendTraits& traits(Backend backend);

/// Whether this build has the backend and, for GPU backends, a CUDA device is present (and, for
/// gpu-cufft-callbacks, one of its callback routes works on it: cufft_callbacks_route).
bool backend_available(Backend backend);
/// How gpu-cufft-callbacks attaches its callbacks on this machine for `precision` (docs/convolution.md §4):
/// "LTO callbacks (nvJitLink)", "legacy callbacks (static cuFFT)", or "unavailable" (also without a device).
std::string cufft_callbacks_route(Precision precision);

/// Builds a plan. Throws Unsupported (with can_implement's reason) for problems the backend cannot
/// serve, InvalidArgument for an invalid problem or kernel array.
template <class Real>
std::unique_ptr<Convolution<Real>> make_convolution(Backend backend, const Problem& problem,
                                                    std::span<const std::complex<double>> kernels);

}  // namespace gratingsim::conv
