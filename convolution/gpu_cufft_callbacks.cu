// gpu-cufft-callbacks: gpu-cufft's FFT route with everything but the transforms moved into cuFFT's own
// kernels as LTO callbacks, the strongest cuFFT baseline (docs/convolution.md §4, §6): what a cuFFT
// expert would write. Three launches per execute, for any pattern:
//   bind      CallbackParams.in, .out ← this execute's buffers (one thread; see callback_params.hpp)
//   forward   X̂_b = FFT₂(x_b padded), in place on X̂: the load callback (gratingsim_pad_load_*,
//             callbacks.cu) returns in_b(m) at index m mod L and 0 elsewhere, so no padded copy of the
//             inputs is ever written
//   inverse   FFT₂⁻¹(Ŷ), e^{+2πi jk/L}, in place on the Ŷ workspace (a scalar problem: on X̂), where the
//             load callback (gratingsim_products_load_*) computes Ŷ_{b'}[k] = Σ_{terms (o, q, k')}
//             Ŝ_{p,k'}[k] · X̂_{group·Q+q}[k] on the fly, and the store callback
//             (gratingsim_extract_store_*) writes only the N1×N2 kept outputs, times 1/(L1·L2), straight
//             to the caller's output
// with Ŝ_{p,k} = FFT₂(χ_{p,k} placed at n mod L), unnormalised, made once per set_kernels.
// Device traffic per scalar block (s bytes per complex, single-pass transforms): read N², write L²
// (forward), read L² and the shared Ŝ, write N² (inverse): s·(2N² + 2L²), against gpu-cufft's
// s·(3N² + 7L²) (pad N² + L², forward 2L², multiply 3L², inverse 2L², extract 2N²); case 3 (N 31, L 64):
// 32 % of the bytes.
//
// The callbacks reach the caller's buffers only through CallbackParams (every transform runs in place on
// the plan's own L1×L2 workspaces, never on the caller's compact blocks), so nothing depends on how cuFFT
// uses the buffers it is given; the price is the one-thread bind launch per execute.
//
// LTO callbacks: cufftXtSetJITCallback(plan, symbol, fatbin, size, type, &caller_info) between
// cufftCreate and cufftMakePlanMany64, with callbacks.cu compiled offline to an LTO-IR fatbin
// (convolution/CMakeLists.txt: nvcc -dc -fatbin -gencode arch=compute_XX,code=lto_XX, XX the lowest
// CUDA architecture of the build, which cuFFT JIT-links on every GPU of arch ≥ XX) and embedded as bytes;
// cuFFT links them into its kernels while planning (nvJitLink; CUDA ≥ 12.6). Planning therefore takes
// longer (a JIT link per plan) and can fail on a device or driver without LTO support: can_implement
// makes one small plan with each callback of the precision once per process and refuses, naming cuFFT's
// error, if that fails.
//
// Limits: L1 = L2 = 1 (N1 = N2 = 1) leaves no transform to attach callbacks to (refused; gpu-cufft
// serves it); L1·L2 < 2^31. Memory: X̂ (Q·groups·L1·L2), Ŷ (P·groups·L1·L2, patterns only: cuFFT's
// buffer for the inverse transforms, whose input comes from the load callback), the spectra
// (slices·K·L1·L2), the kernels, the sorted pattern, one CallbackParams and the cuFFT plans. execute()
// allocates nothing, enqueues its three launches on the caller's stream and does not synchronise; one
// execute per plan at a time (the workspaces and CallbackParams are the plan's).
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "convolution/backends.hpp"
#include "core/cuda_check.hpp"
#include "convolution/cufft_pipeline.cuh"
#include "core/device_buffer.hpp"
#include "convolution/gpu_cufft_callbacks/callback_params.hpp"
#include "gpu_cufft_callbacks_fatbin.h"  // generated: gratingsim_cufft_callbacks_fatbin[], the LTO-IR of callbacks.cu

namespace gratingsim::conv::detail {
namespace {

/// The LTO callback `name` (of callbacks.cu, "_c" or "_z" appended for the precision) as
/// cufftXtSetJITCallback takes it, with `params` as its callerInfo.
JitCallback callback(const char* name, bool single, bool load, CallbackParams* params) {
  const cufftXtCallbackType type = load ? (single ? CUFFT_CB_LD_COMPLEX : CUFFT_CB_LD_COMPLEX_DOUBLE)
                                        : (single ? CUFFT_CB_ST_COMPLEX : CUFFT_CB_ST_COMPLEX_DOUBLE);
  return {std::string(name) + (single ? "_c" : "_z"), gratingsim_cufft_callbacks_fatbin,
          sizeof gratingsim_cufft_callbacks_fatbin, type, params};
}

/// CallbackParams.in, .out ← this execute's buffers, in stream order before its transforms.
__global__ void bind_buffers(CallbackParams* params, const void* in, void* out) {
  params->in = in;
  params->out = out;
}

template <class Real>
class GpuCufftCallbacks final : public Convolution<Real> {
 public:
  using typename Convolution<Real>::Complex;
  using DeviceComplex = typename Cufft<Real>::Complex;
  static constexpr bool single = std::is_same_v<Real, float>;

  GpuCufftCallbacks(const Problem& g, Kernels kernels)
      : Convolution<Real>(g),
        spectrum_size_(std::size_t(g.l1) * g.l2),
        x_(g.input_blocks() * spectrum_size_),
        y_(g.scalar() ? 0 : g.output_blocks() * spectrum_size_),
        spectra_(g),
        pattern_(g),
        params_(1),
        forward_plan_(g.l1, g.l2, g.input_blocks(), Cufft<Real>::type,
                      {callback("gratingsim_pad_load", single, true, params_.data())}),
        inverse_plan_(g.l1, g.l2, g.scalar() ? g.input_blocks() : g.output_blocks(), Cufft<Real>::type,
                      {callback("gratingsim_products_load", single, true, params_.data()),
                       callback("gratingsim_extract_store", single, false, params_.data())}) {
    CallbackParams params{};
    params.input_spectra = x_.data();
    params.kernel_spectra = spectra_.data();
    params.terms = reinterpret_cast<const int*>(pattern_.terms.data());  // int2: (input, kernel) pairs
    params.term_begin = pattern_.term_begin.data();
    params.n1 = g.n1;
    params.n2 = g.n2;
    params.l1 = g.l1;
    params.l2 = g.l2;
    params.kernels = g.kernels;
    params.inputs = g.inputs;
    params.outputs = g.outputs;
    params.per_slice = g.per_slice;
    params.scale = 1.0 / double(spectrum_size_);
    params_.upload(std::vector<CallbackParams>{params});
    set_kernels(kernels);
  }

  /// Synchronises with the whole device before and after (KernelSpectra::set), as gpu-cufft's.
  void set_kernels(Kernels kernels) override {
    spectra_.set(this->problem_, kernels, Real(1));  // unnormalised: the store callback scales
  }

  void execute(const Complex* in, Complex* out, Stream stream) override {
    const Problem& g = this->problem_;
    check_execute_buffers(g, backend(), in, out, sizeof(Complex));
    bind_buffers<<<1, 1, 0, stream>>>(params_.data(), in, out);
    GS_CUDA_CHECK_LAUNCH();
    GS_CUFFT_TRY(cufftSetStream(forward_plan_.get(), stream));
    GS_CUFFT_TRY(Cufft<Real>::exec(forward_plan_.get(), x_.data(), x_.data(), CUFFT_FORWARD));
    DeviceComplex* y = g.scalar() ? x_.data() : y_.data();  // its input comes from the load callback
    GS_CUFFT_TRY(cufftSetStream(inverse_plan_.get(), stream));
    GS_CUFFT_TRY(Cufft<Real>::exec(inverse_plan_.get(), y, y, CUFFT_INVERSE));
  }

  [[nodiscard]] Backend backend() const override { return Backend::gpu_cufft_callbacks; }

 private:
  std::size_t spectrum_size_;             // L1·L2
  DeviceBuffer<DeviceComplex> x_;         // input blocks × L1×L2: X̂ (a scalar problem's inverse in place too)
  DeviceBuffer<DeviceComplex> y_;         // output blocks × L1×L2: the inverse transforms' buffer (patterns)
  KernelSpectra<Real> spectra_;           // Ŝ_{p,k} unnormalised
  DevicePattern pattern_;                 // the pattern sorted by output (scalar: the one term)
  DeviceBuffer<CallbackParams> params_;   // the callbacks' callerInfo (before the plans, which point to it)
  CufftPlan forward_plan_;                // input blocks' transforms: pad load callback
  CufftPlan inverse_plan_;                // output blocks' inverse transforms: products load, extract store
};

/// Whether cuFFT can JIT-link this backend's callbacks on the current device: a 16×16 plan with each
/// of the precision's callbacks, made once per process; the failure, with cuFFT's error, as the reason.
Support lto_callbacks_work(Precision precision) {
  static std::mutex mutex;
  static std::optional<Support> verdict[2];
  const std::lock_guard lock(mutex);
  const bool single = precision == Precision::single;
  std::optional<Support>& v = verdict[single ? 0 : 1];
  if (!v) {
    try {
      // callerInfo is only dereferenced when a transform runs; the probe plans never run.
      const cufftType type = single ? CUFFT_C2C : CUFFT_Z2Z;
      const CufftPlan forward(16, 16, 1, type, {callback("gratingsim_pad_load", single, true, nullptr)});
      const CufftPlan inverse(16, 16, 1, type,
                              {callback("gratingsim_products_load", single, true, nullptr),
                               callback("gratingsim_extract_store", single, false, nullptr)});
      v = Support{};
    } catch (const CudaError& e) {
      v = unsupported(std::string("cuFFT cannot JIT-link its LTO callbacks on this device (needs cuFFT with LTO "
                                  "callbacks, CUDA >= 12.6, and nvJitLink): ") +
                      e.what());
    }
  }
  return *v;
}

}  // namespace

Support can_implement_gpu_cufft_callbacks(const Problem& g, Precision precision) {
  if (Support limits = check_cufft_limits(g); !limits.ok) return limits;
  if (g.l1 == 1 && g.l2 == 1)
    return unsupported("L1 = L2 = 1 (N1 = N2 = 1) makes no transform to attach the callbacks to (gpu-cufft "
                       "serves it)");
  return lto_callbacks_work(precision);
}

// Device bytes: X̂, Ŷ (patterns), the spectra, the kernels, the sorted pattern, the callback
// parameters and cuFFT's estimate of its plans' work areas (without callbacks: cuFFT gives no estimate
// of a callback plan before it is made).
std::size_t workspace_gpu_cufft_callbacks(const Problem& g, Precision precision) {
  const std::size_t c = precision == Precision::single ? 8 : 16, area = std::size_t(g.l1) * g.l2;
  const std::size_t transformed = g.scalar() ? g.input_blocks() : g.output_blocks();
  std::size_t bytes = g.input_blocks() * area * c + kernel_spectra_bytes(g, precision) + sizeof(CallbackParams) +
                      g.pattern.size() * 2 * sizeof(int) + (g.outputs + 1) * sizeof(int);
  bytes += cufft_work_estimate(g.l1, g.l2, g.input_blocks(), precision);
  bytes += cufft_work_estimate(g.l1, g.l2, transformed, precision);
  if (!g.scalar()) bytes += g.output_blocks() * area * c;
  return bytes;
}

template <class Real>
Plan<Real> make_gpu_cufft_callbacks(const Problem& g, Kernels kernels) {
  return std::make_unique<GpuCufftCallbacks<Real>>(g, kernels);
}
template Plan<float> make_gpu_cufft_callbacks<float>(const Problem&, Kernels);
template Plan<double> make_gpu_cufft_callbacks<double>(const Problem&, Kernels);
}  // namespace gratingsim::conv::detail
