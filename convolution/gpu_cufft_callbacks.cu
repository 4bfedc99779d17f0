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
// Two routes to the same callbacks (callbacks.cuh), chosen once per process and precision by making one
// small plan with each (callbacks_route): the LTO route where cuFFT can JIT-link, else the legacy route
// where the build has it, else the backend is unavailable, with both reasons.
// - LTO: cufftXtSetJITCallback(plan, symbol, fatbin, size, type, &caller_info) between cufftCreate and
//   cufftMakePlanMany64, with callbacks.cu compiled offline to an LTO-IR fatbin (convolution/CMakeLists.txt:
//   nvcc -dc -fatbin -gencode arch=compute_XX,code=lto_XX, XX the lowest CUDA architecture of the build,
//   which cuFFT JIT-links on every GPU of arch ≥ XX) and embedded as bytes; cuFFT links them into its
//   kernels while planning (nvJitLink; CUDA ≥ 12.6), so planning takes longer (a JIT link per plan). On the
//   lent CUDA 13.0 hosts every such plan fails with CUFFT_INTERNAL_ERROR.
// - legacy: the callbacks as __device__ functions, device-linked at build time into the shared library
//   gratingsim_cufft_legacy_callbacks with its own static cuFFT (gpu_cufft_callbacks/legacy_plans.hpp;
//   built where the toolkit has libcufft_static.a), attached after planning with cufftXtSetCallback. It
//   runs on the lent hosts. cuFFT documents legacy callbacks as deprecated (since CUDA 11.4) but supported.
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
#if GRATINGSIM_CUFFT_LEGACY_CALLBACKS
#include "convolution/gpu_cufft_callbacks/legacy_plans.hpp"
#endif

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

enum class Route { lto, legacy };

#if GRATINGSIM_CUFFT_LEGACY_CALLBACKS
/// Throws CudaError for a failed call into the legacy library, naming cuFFT's status.
void check_legacy(int status, const char* call) {
  if (status == 0) return;
  throw CudaError(std::string(call) + " failed: " +
                      (status == legacy_cuda_error ? "a CUDA runtime call (reading a callback's device address)"
                                                   : ::gratingsim::detail::cufft_error_name(cufftResult(status))),
                  std::source_location::current());
}

/// A plan of the legacy library (legacy_plans.hpp) owned for the lifetime of the backend; empty where no
/// transform is needed (batch 0, L1 = L2 = 1).
class LegacyPlan {
 public:
  LegacyPlan() = default;
  LegacyPlan(int l1, int l2, std::size_t batch, bool double_precision, LegacyCallbackRole role, void* caller_info)
      : double_precision_(double_precision), role_(role) {
    if (batch == 0 || (l1 == 1 && l2 == 1)) return;
    check_legacy(gratingsim_legacy_callbacks_plan(l1, l2, (long long)batch, int(double_precision), int(role),
                                                  caller_info, &handle_),
                 "gratingsim_legacy_callbacks_plan");
    owned_ = true;
  }
  LegacyPlan(const LegacyPlan&) = delete;
  LegacyPlan& operator=(const LegacyPlan&) = delete;
  ~LegacyPlan() {
    if (owned_) gratingsim_legacy_callbacks_destroy(handle_);  // no throw from a destructor
  }
  /// In place on `data`, enqueued on `stream`.
  void execute(void* data, Stream stream) const {
    check_legacy(gratingsim_legacy_callbacks_execute(handle_, int(double_precision_), int(role_), data, stream),
                 "gratingsim_legacy_callbacks_execute");
  }

 private:
  int handle_ = 0;
  bool owned_ = false;
  bool double_precision_ = false;
  LegacyCallbackRole role_ = legacy_forward_pad;
};
#endif

/// The backend's two batched transforms with their callbacks, by one route, in place on L1×L2 blocks:
/// forward (pad load) on `forward_batch` blocks, inverse (products load, extract store) on
/// `inverse_batch`; callerInfo `params` (device memory; null for a probe whose plans never run).
/// Only the route's plans are made (C++17: each member initialised straight from its prvalue).
template <class Real>
class CallbackTransforms {
 public:
  static constexpr bool single = std::is_same_v<Real, float>;
  using DeviceComplex = typename Cufft<Real>::Complex;

  CallbackTransforms(Route route, int l1, int l2, std::size_t forward_batch, std::size_t inverse_batch,
                     CallbackParams* params)
      : route_(route),
        lto_forward_(route == Route::lto ? CufftPlan(l1, l2, forward_batch, Cufft<Real>::type,
                                                     {callback("gratingsim_pad_load", single, true, params)})
                                         : CufftPlan()),
        lto_inverse_(route == Route::lto
                         ? CufftPlan(l1, l2, inverse_batch, Cufft<Real>::type,
                                     {callback("gratingsim_products_load", single, true, params),
                                      callback("gratingsim_extract_store", single, false, params)})
                         : CufftPlan())
#if GRATINGSIM_CUFFT_LEGACY_CALLBACKS
        ,
        legacy_forward_(route == Route::legacy
                            ? LegacyPlan(l1, l2, forward_batch, !single, legacy_forward_pad, params)
                            : LegacyPlan()),
        legacy_inverse_(route == Route::legacy
                            ? LegacyPlan(l1, l2, inverse_batch, !single, legacy_inverse_products, params)
                            : LegacyPlan())
#endif
  {
  }

  /// The forward transforms, then the inverse ones on `inverse_data`, enqueued on `stream`.
  void execute(DeviceComplex* forward_data, DeviceComplex* inverse_data, Stream stream) const {
#if GRATINGSIM_CUFFT_LEGACY_CALLBACKS
    if (route_ == Route::legacy) {
      legacy_forward_.execute(forward_data, stream);
      legacy_inverse_.execute(inverse_data, stream);
      return;
    }
#endif
    GS_CUFFT_TRY(cufftSetStream(lto_forward_.get(), stream));
    GS_CUFFT_TRY(Cufft<Real>::exec(lto_forward_.get(), forward_data, forward_data, CUFFT_FORWARD));
    GS_CUFFT_TRY(cufftSetStream(lto_inverse_.get(), stream));
    GS_CUFFT_TRY(Cufft<Real>::exec(lto_inverse_.get(), inverse_data, inverse_data, CUFFT_INVERSE));
  }

 private:
  Route route_;
  CufftPlan lto_forward_, lto_inverse_;
#if GRATINGSIM_CUFFT_LEGACY_CALLBACKS
  LegacyPlan legacy_forward_, legacy_inverse_;
#endif
};

/// The route this process uses for `precision` (one small plan with each callback, per route, once per
/// process), or the reasons neither works.
struct RouteVerdict {
  std::optional<Route> route;
  std::string reason;
};
const RouteVerdict& callbacks_route(Precision precision);
/// The route, or Unsupported with both reasons.
Route usable_route(Precision precision) {
  const RouteVerdict& v = callbacks_route(precision);
  if (!v.route) throw Unsupported("gpu-cufft-callbacks: " + v.reason);
  return *v.route;
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
        transforms_(usable_route(single ? Precision::single : Precision::double_), g.l1, g.l2, g.input_blocks(),
                    g.scalar() ? g.input_blocks() : g.output_blocks(), params_.data()) {
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
    DeviceComplex* y = g.scalar() ? x_.data() : y_.data();  // its input comes from the load callback
    transforms_.execute(x_.data(), y, stream);
  }

  [[nodiscard]] Backend backend() const override { return Backend::gpu_cufft_callbacks; }

 private:
  std::size_t spectrum_size_;             // L1·L2
  DeviceBuffer<DeviceComplex> x_;         // input blocks × L1×L2: X̂ (a scalar problem's inverse in place too)
  DeviceBuffer<DeviceComplex> y_;         // output blocks × L1×L2: the inverse transforms' buffer (patterns)
  KernelSpectra<Real> spectra_;           // Ŝ_{p,k} unnormalised
  DevicePattern pattern_;                 // the pattern sorted by output (scalar: the one term)
  DeviceBuffer<CallbackParams> params_;   // the callbacks' callerInfo (before the plans, which point to it)
  CallbackTransforms<Real> transforms_;  // input blocks' forward and output blocks' inverse transforms
};

const RouteVerdict& callbacks_route(Precision precision) {
  static std::mutex mutex;
  static std::optional<RouteVerdict> verdict[2];
  const std::lock_guard lock(mutex);
  const bool single = precision == Precision::single;
  std::optional<RouteVerdict>& v = verdict[single ? 0 : 1];
  if (v) return *v;
  v = RouteVerdict{};
  // callerInfo is only dereferenced when a transform runs; the probe plans never run.
  const auto probe = [&](Route route) {
    if (single)
      CallbackTransforms<float>(route, 16, 16, 1, 1, nullptr);
    else
      CallbackTransforms<double>(route, 16, 16, 1, 1, nullptr);
  };
  try {
    probe(Route::lto);
    v->route = Route::lto;
    return *v;
  } catch (const CudaError& e) {
    v->reason = std::string("cuFFT cannot JIT-link its LTO callbacks on this device (needs CUDA >= 12.6 and "
                            "nvJitLink): ") +
                e.what();
  }
#if GRATINGSIM_CUFFT_LEGACY_CALLBACKS
  try {
    probe(Route::legacy);
    v->route = Route::legacy;
  } catch (const CudaError& e) {
    v->reason += std::string("; and its legacy callbacks (static cuFFT) failed: ") + e.what();
  }
#else
  v->reason += "; and this build has no legacy route (the toolkit had no libcufft_static.a at configuration)";
#endif
  return *v;
}

}  // namespace

Support can_implement_gpu_cufft_callbacks(const Problem& g, Precision precision) {
  if (Support limits = check_cufft_limits(g); !limits.ok) return limits;
  if (g.l1 == 1 && g.l2 == 1)
    return unsupported("L1 = L2 = 1 (N1 = N2 = 1) makes no transform to attach the callbacks to (gpu-cufft "
                       "serves it)");
  const RouteVerdict& v = callbacks_route(precision);
  return v.route ? Support{} : unsupported(v.reason);
}

std::string gpu_cufft_callbacks_route(Precision precision) {
  const RouteVerdict& v = callbacks_route(precision);
  if (!v.route) return "unavailable";
  return *v.route == Route::lto ? "LTO callbacks (nvJitLink)" : "legacy callbacks (static cuFFT)";
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
