// gpu-cufft: the unfused five-step FFT convolution written the way a cuFFT user would write it, the
// baseline every GPU speed-up is quoted against (docs/convolution.md §4, §6), for any pattern.
//
// Input block b = group·Q + q, output block b' = group·P + o, slice p = group / per_slice; L1×L2
// workspaces (row-major, axis 2 fast):
//   pad       x_b[m mod L] = in_b(m) for m ∈ [−M1, M1] × [−M2, M2], zero elsewhere      (pad kernel)
//   forward   x_b ← FFT₂(x_b), e^{−2πi jk/L}: all Q·groups input blocks in one batched cuFFT plan, in place
//   multiply  y_{b'} = Σ_{terms (o, q, k)} Ŝ_{p,k} · x_{group·Q+q}, Ŝ_{p,k} = FFT₂(χ_{p,k} placed at n mod L) / (L1·L2)
//                                                                                     (multiply kernel)
//   inverse   y_{b'} ← FFT₂⁻¹(y_{b'}), e^{+2πi jk/L}, unnormalised: all P·groups output blocks in one
//             batched plan, in place (the 1/(L1·L2) is in Ŝ)
//   extract   out_{b'}(m) = y_{b'}[m mod L]                                          (extract kernel)
// so each input is transformed once and each output once, whatever the number of terms. A scalar
// problem (K = P = Q = 1) multiplies in place (y = x) and runs both directions on one plan: the
// pipeline as before patterns, no extra memory.
// L ≥ 2N − 1 keeps the kept outputs free of circular aliasing. The Ŝ_{p,k} are made once per
// set_kernels with the same pad kernel (half-widths 2M, the scale folded in) and a (slices·K)-batched
// cuFFT plan.
//
// Axes of length 1 (N = 1 on that axis, L = 1) are left out of the cuFFT plans: the length-1 DFT is the
// identity, and dropping the axis makes 1D gratings (L2 = 1) plain batched 1D transforms of length L1.
// With L1 = L2 = 1 no transform is made at all (the convolution is out = Σ χ(0)·in).
//
// Memory: the input workspace holds all input blocks (Q·groups·L1·L2 complex), the output workspace
// all output blocks (P·groups·L1·L2; none for a scalar problem), the spectra slices·K·L1·L2; those and
// the cuFFT plans (with their own work areas) are made in the constructor. execute() allocates
// nothing; it enqueues five steps on the caller's stream (cufftSetStream) and does not synchronise.
// One execute per plan at a time: concurrent calls on different streams would share the workspaces.
// Limits: cuFFT's 64-bit plan interface takes any batch; the multiply kernel indexes an L1·L2 spectrum
// with int (L1·L2 < 2^31) and grid x covers L1·L2 / 256 blocks.
#include <cstdint>
#include <vector>

#include "convolution/backends.hpp"
#include "core/cuda_check.hpp"
#include "convolution/cufft_pipeline.cuh"
#include "core/device_buffer.hpp"

namespace gratingsim::conv::detail {
namespace {

/// work_b ← work_b · Ŝ_{b / per_slice}, elementwise over the L1·L2 spectrum: the scalar problem, in place.
template <class C>
__global__ void multiply_kernel(C* __restrict__ work, const C* __restrict__ spectra, int spectrum_size,
                                int per_slice, std::size_t batch) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= spectrum_size) return;
  for (std::size_t b = blockIdx.y; b < batch; b += gridDim.y) {
    C& w = work[b * spectrum_size + k];
    w = complex_multiply(w, spectra[(b / per_slice) * spectrum_size + k]);
  }
}

/// The pattern's sizes and terms for the multiply kernel: terms sorted by output, (input q, kernel k)
/// of output o at terms[term_begin[o] .. term_begin[o + 1]).
struct PatternView {
  const int2* terms;
  const int* term_begin;
  int kernels, inputs, outputs, per_slice;
};

/// y_{b'} = Σ_{terms (o, q, k)} Ŝ_{p,k} · x_{group·Q + q} elementwise, b' = group·P + o, p = group / per_slice.
template <class C>
__global__ void pattern_multiply_kernel(const C* __restrict__ x, const C* __restrict__ spectra, C* __restrict__ y,
                                        PatternView pattern, int spectrum_size, std::size_t output_blocks) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= spectrum_size) return;
  for (std::size_t b = blockIdx.y; b < output_blocks; b += gridDim.y) {
    const std::size_t group = b / pattern.outputs, slice = group / pattern.per_slice;
    const int o = static_cast<int>(b - group * pattern.outputs);
    C sum{0, 0};
    for (int t = pattern.term_begin[o]; t < pattern.term_begin[o + 1]; ++t) {
      const int2 term = pattern.terms[t];  // (input, kernel)
      const C product = complex_multiply(x[(group * pattern.inputs + term.x) * spectrum_size + k],
                                         spectra[(slice * pattern.kernels + term.y) * spectrum_size + k]);
      sum.x += product.x;
      sum.y += product.y;
    }
    y[b * spectrum_size + k] = sum;
  }
}

/// out_b(m) = work_b[m mod L]: the central N1×N2 outputs of the circular convolution.
template <class C>
__global__ void extract_kernel(const C* __restrict__ work, C* __restrict__ out, int n1, int n2, int l1, int l2,
                               std::size_t batch) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n1 * n2) return;
  const int i1 = i / n2, i2 = i - i1 * n2;
  const int m1 = i1 - n1 / 2, m2 = i2 - n2 / 2;
  const int k = (m1 < 0 ? m1 + l1 : m1) * l2 + (m2 < 0 ? m2 + l2 : m2);
  const std::size_t field_size = std::size_t(n1) * n2, work_size = std::size_t(l1) * l2;
  for (std::size_t b = blockIdx.y; b < batch; b += gridDim.y) out[b * field_size + i] = work[b * work_size + k];
}

template <class Real>
class GpuCufft final : public Convolution<Real> {
 public:
  using typename Convolution<Real>::Complex;
  using DeviceComplex = typename Cufft<Real>::Complex;

  GpuCufft(const Problem& g, Kernels kernels)
      : Convolution<Real>(g),
        spectrum_size_(std::size_t(g.l1) * g.l2),
        inputs_(g.input_blocks() * spectrum_size_),
        outputs_(g.scalar() ? 0 : g.output_blocks() * spectrum_size_),
        pattern_(g.scalar() ? DevicePattern() : DevicePattern(g)),
        spectra_(g),
        forward_plan_(g.l1, g.l2, g.input_blocks(), Cufft<Real>::type),
        inverse_plan_(g.l1, g.l2, g.scalar() ? 0 : g.output_blocks(), Cufft<Real>::type) {
    set_kernels(kernels);
  }

  /// Synchronises with the whole device before and after (KernelSpectra::set).
  void set_kernels(Kernels kernels) override { spectra_.set(this->problem_, kernels, Real(1) / Real(spectrum_size_)); }

  void execute(const Complex* in, Complex* out, Stream stream) override {
    const Problem& g = this->problem_;
    check_execute_buffers(g, backend(), in, out, sizeof(Complex));

    const std::size_t input_blocks = g.input_blocks(), output_blocks = g.output_blocks();
    pad_kernel<<<grid_for(spectrum_size_, input_blocks), threads_per_block, 0, stream>>>(
        device(in), inputs_.data(), g.n1 / 2, g.n2 / 2, g.l1, g.l2, input_blocks, Real(1));
    GS_CUDA_CHECK_LAUNCH();
    transform(forward_plan_, inputs_.data(), stream, CUFFT_FORWARD);
    DeviceComplex* y = inputs_.data();
    if (g.scalar()) {
      multiply_kernel<<<grid_for(spectrum_size_, input_blocks), threads_per_block, 0, stream>>>(
          inputs_.data(), spectra_.data(), static_cast<int>(spectrum_size_), g.per_slice, input_blocks);
      GS_CUDA_CHECK_LAUNCH();
      transform(forward_plan_, y, stream, CUFFT_INVERSE);
    } else {
      y = outputs_.data();
      const PatternView pattern{pattern_.terms.data(), pattern_.term_begin.data(), g.kernels, g.inputs, g.outputs,
                                g.per_slice};
      pattern_multiply_kernel<<<grid_for(spectrum_size_, output_blocks), threads_per_block, 0, stream>>>(
          inputs_.data(), spectra_.data(), y, pattern, static_cast<int>(spectrum_size_), output_blocks);
      GS_CUDA_CHECK_LAUNCH();
      transform(inverse_plan_, y, stream, CUFFT_INVERSE);
    }
    extract_kernel<<<grid_for(g.field_size(), output_blocks), threads_per_block, 0, stream>>>(
        y, device(out), g.n1, g.n2, g.l1, g.l2, output_blocks);
    GS_CUDA_CHECK_LAUNCH();
  }

  [[nodiscard]] Backend backend() const override { return Backend::gpu_cufft; }

 private:
  static const DeviceComplex* device(const Complex* p) { return reinterpret_cast<const DeviceComplex*>(p); }
  static DeviceComplex* device(Complex* p) { return reinterpret_cast<DeviceComplex*>(p); }

  static void transform(const CufftPlan& plan, DeviceComplex* data, Stream stream, int direction) {
    if (plan.empty()) return;
    GS_CUFFT_TRY(cufftSetStream(plan.get(), stream));
    GS_CUFFT_TRY(Cufft<Real>::exec(plan.get(), data, data, direction));
  }

  std::size_t spectrum_size_;             // L1·L2
  DeviceBuffer<DeviceComplex> inputs_;    // input blocks × L1×L2: padded inputs, their spectra in place
                                          // (a scalar problem's product and inverse too)
  DeviceBuffer<DeviceComplex> outputs_;   // output blocks × L1×L2: output spectra, inverted in place (patterns only)
  DevicePattern pattern_;                 // the pattern sorted by output (patterns only)
  KernelSpectra<Real> spectra_;           // Ŝ_{p,k} with 1/(L1·L2) folded in
  CufftPlan forward_plan_;                // input blocks' transforms (a scalar problem's inverse too)
  CufftPlan inverse_plan_;                // output blocks' inverse transforms (patterns only)
};

}  // namespace

// Any pattern, any N and L ≥ 2N − 1 (cuFFT plans every length); the kernels index a spectrum with int.
Support can_implement_gpu_cufft(const Problem& g, Precision) { return check_cufft_limits(g); }

// Device bytes: the input workspace, the output workspace (patterns), the spectra, the kernels, the
// pattern's term lists, and cuFFT's estimate of its plans' work areas.
std::size_t workspace_gpu_cufft(const Problem& g, Precision precision) {
  const std::size_t c = precision == Precision::single ? 8 : 16, area = std::size_t(g.l1) * g.l2;
  std::size_t bytes = g.input_blocks() * area * c + kernel_spectra_bytes(g, precision);
  bytes += cufft_work_estimate(g.l1, g.l2, g.input_blocks(), precision);
  if (!g.scalar()) {
    bytes += g.output_blocks() * area * c + g.pattern.size() * sizeof(int2) + (g.outputs + 1) * sizeof(int);
    bytes += cufft_work_estimate(g.l1, g.l2, g.output_blocks(), precision);
  }
  return bytes;
}

template <class Real>
Plan<Real> make_gpu_cufft(const Problem& g, Kernels kernels) {
  return std::make_unique<GpuCufft<Real>>(g, kernels);
}
template Plan<float> make_gpu_cufft<float>(const Problem&, Kernels);
template Plan<double> make_gpu_cufft<double>(const Problem&, Kernels);
}  // namespace gratingsim::conv::detail
