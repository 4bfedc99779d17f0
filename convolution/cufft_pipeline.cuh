#pragma once
// Internal: the pieces gpu-cufft and gpu-cufft-callbacks share (docs/convolution.md §2, §4): the cuFFT
// types per precision, a batched plan handle (optionally with LTO callbacks), the pad kernel (of the
// fields in gpu-cufft, of the kernels χ into the spectra in both), the kernels' spectra, the pattern
// sorted by output (on the host and on the device), and the limits and workspace parts they share.
// Included by those two .cu files only.
//
// Layouts: L1×L2 workspaces per block, row-major (axis 2 fast); harmonic m at index m mod L.
#include <cufft.h>
#include <cufftXt.h>

#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "convolution/backends.hpp"
#include "convolution/cufft_plans.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"

namespace gratingsim::conv::detail {
namespace {

// float2 / double2 are the layouts of cufftComplex / cufftDoubleComplex and of std::complex<Real>.
template <class Real>
struct Cufft;
template <>
struct Cufft<float> {
  using Complex = cufftComplex;
  static constexpr cufftType type = CUFFT_C2C;
  static cufftResult exec(cufftHandle plan, Complex* in, Complex* out, int direction) {
    return cufftExecC2C(plan, in, out, direction);
  }
};
template <>
struct Cufft<double> {
  using Complex = cufftDoubleComplex;
  static constexpr cufftType type = CUFFT_Z2Z;
  static cufftResult exec(cufftHandle plan, Complex* in, Complex* out, int direction) {
    return cufftExecZ2Z(plan, in, out, direction);
  }
};

/// An LTO callback for cufftXtSetJITCallback: the device function `symbol` (extern "C") in a fatbin of
/// LTO-IR, and the device pointer cuFFT passes to it as callerInfo.
struct JitCallback {
  std::string symbol;
  const void* fatbin;
  std::size_t fatbin_bytes;
  cufftXtCallbackType type;
  void* caller_info;
};

/// A cuFFT plan held for the lifetime of the backend; empty where no transform is needed. Without callbacks it
/// comes from the process's idle plans (cufft_plans.hpp) and goes back to them, with a work area of its own
/// from the stream-ordered pool; with callbacks it is made and destroyed here (auto-allocated work area).
class CufftPlan {
 public:
  CufftPlan() = default;
  /// Batched C2C (Z2Z) transforms of the `batch` contiguous L1×L2 blocks, length-1 axes dropped (so
  /// the logical element offset is still block·L1·L2 + k1·L2 + k2); empty for batch 0 or L1 = L2 = 1.
  /// `callbacks` are attached between cufftCreate and planning, as cuFFT requires of LTO callbacks;
  /// cuFFT links them into its kernels while planning (nvJitLink), so a failure to do so surfaces here.
  CufftPlan(int l1, int l2, std::size_t batch, cufftType type, const std::vector<JitCallback>& callbacks = {}) {
    std::vector<long long> lengths;
    if (l1 > 1) lengths.push_back(l1);
    if (l2 > 1) lengths.push_back(l2);
    if (lengths.empty() || batch == 0) return;
    if (callbacks.empty()) {
      GS_CUDA_TRY(cudaGetDevice(&shape_.device));
      shape_.l1 = l1;
      shape_.l2 = l2;
      shape_.batch = static_cast<long long>(batch);
      shape_.type = static_cast<int>(type);
      std::size_t work_bytes = 0;
      handle_ = acquire_cufft_plan(shape_, work_bytes);
      try {
        work_area_ = DeviceBuffer<unsigned char>(work_bytes);
        if (work_bytes) GS_CUFFT_TRY(cufftSetWorkArea(handle_, work_area_.data()));
      } catch (...) {
        release_cufft_plan(shape_, handle_, work_bytes);  // no destructor runs for a constructor that throws
        throw;
      }
      pooled_ = owned_ = true;
      return;
    }
    GS_CUFFT_TRY(cufftCreate(&handle_));
    try {
      for (const JitCallback& c : callbacks) {
        void* caller_info = c.caller_info;
        GS_CUFFT_TRY(cufftXtSetJITCallback(handle_, c.symbol.c_str(), c.fatbin, c.fatbin_bytes, c.type, &caller_info));
      }
      const long long distance = static_cast<long long>(l1) * l2;
      std::size_t work_bytes = 0;
      GS_CUFFT_TRY(cufftMakePlanMany64(handle_, static_cast<int>(lengths.size()), lengths.data(), nullptr, 1, distance,
                                    nullptr, 1, distance, type, static_cast<long long>(batch), &work_bytes));
    } catch (...) {
      cufftDestroy(handle_);  // no destructor runs for a constructor that throws
      throw;
    }
    owned_ = true;
  }
  CufftPlan(const CufftPlan&) = delete;
  CufftPlan& operator=(const CufftPlan&) = delete;
  ~CufftPlan() {  // no throw from a destructor; the work area is freed after the plan has gone back
    if (!owned_) return;
    if (pooled_)
      release_cufft_plan(shape_, handle_, work_area_.size());
    else
      cufftDestroy(handle_);
  }
  [[nodiscard]] bool empty() const { return !owned_; }
  [[nodiscard]] cufftHandle get() const { return handle_; }

 private:
  cufftHandle handle_{};
  bool owned_ = false, pooled_ = false;
  CufftPlanShape shape_;                      // a pooled plan's
  DeviceBuffer<unsigned char> work_area_;     // a pooled plan's work area
};

template <class C>
__device__ C complex_multiply(C a, C b) {
  return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x};
}

// Grids: x runs over the elements of one block (padded or kept), y over the batch in a grid-stride
// loop (gridDim.y is capped at 65535).
constexpr int threads_per_block = 256;
constexpr unsigned max_grid_y = 65535;

inline dim3 grid_for(std::size_t elements_per_block, std::size_t batch) {
  return dim3(static_cast<unsigned>((elements_per_block + threads_per_block - 1) / threads_per_block),
              static_cast<unsigned>(std::min<std::size_t>(batch, max_grid_y)));
}

/// work_b[k] = scale · src_b(h), where k = h mod L per axis and src_b is a (2H1+1)×(2H2+1) block
/// centred on h = 0; zero at every other k. One thread per padded entry: the whole workspace is
/// rewritten, since the in-place FFTs left data everywhere. Fields: H = M, scale 1; kernels: H = 2M.
template <class C, class Real>
__global__ void pad_kernel(const C* __restrict__ src, C* __restrict__ work, int h1, int h2, int l1, int l2,
                           std::size_t batch, Real scale) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= l1 * l2) return;
  const int k1 = k / l2, k2 = k - k1 * l2;
  const int m1 = k1 <= h1 ? k1 : k1 - l1;  // the harmonic stored at index k1 (L ≥ 2H + 1: no overlap)
  const int m2 = k2 <= h2 ? k2 : k2 - l2;
  const bool inside = m1 >= -h1 && m2 >= -h2;
  const int w2 = 2 * h2 + 1;
  const std::size_t src_size = std::size_t(2 * h1 + 1) * w2, work_size = std::size_t(l1) * l2;
  const int src_index = (m1 + h1) * w2 + (m2 + h2);
  for (std::size_t b = blockIdx.y; b < batch; b += gridDim.y) {
    C value{0, 0};
    if (inside) {
      value = src[b * src_size + src_index];
      value.x *= scale;
      value.y *= scale;
    }
    work[b * work_size + k] = value;
  }
}

/// The pattern sorted by output: (input, kernel) pairs and the P + 1 offsets of each output's terms.
struct SortedPattern {
  std::vector<int2> terms;
  std::vector<int> term_begin;
};

inline SortedPattern sort_by_output(const Problem& g) {
  SortedPattern s;
  for (int o = 0; o < g.outputs; ++o) {
    s.term_begin.push_back(static_cast<int>(s.terms.size()));
    for (const Term& t : g.pattern)
      if (t.output == o) s.terms.push_back(int2{t.input, t.kernel});
  }
  s.term_begin.push_back(static_cast<int>(s.terms.size()));
  return s;
}

/// cuFFT's estimate of one plan's work area (cufftEstimateMany, default plan settings); 0 where no
/// transform is made or the batch exceeds the int the estimate takes.
inline std::size_t cufft_work_estimate(int l1, int l2, std::size_t batch, Precision precision) {
  int lengths[2], rank = 0;
  if (l1 > 1) lengths[rank++] = l1;
  if (l2 > 1) lengths[rank++] = l2;
  if (rank == 0 || batch == 0 || batch > std::size_t(INT32_MAX)) return 0;
  const int distance = l1 * l2;
  std::size_t bytes = 0;
  if (cufftEstimateMany(rank, lengths, nullptr, 1, distance, nullptr, 1, distance,
                        precision == Precision::single ? CUFFT_C2C : CUFFT_Z2Z, static_cast<int>(batch),
                        &bytes) != CUFFT_SUCCESS)
    return 0;
  return bytes;
}

/// The pattern sorted by output (sort_by_output) in device memory.
struct DevicePattern {
  DevicePattern() = default;
  explicit DevicePattern(const Problem& g) {
    const SortedPattern sorted = sort_by_output(g);
    terms = DeviceBuffer<int2>(sorted.terms.size());
    term_begin = DeviceBuffer<int>(sorted.term_begin.size());
    terms.upload(sorted.terms);
    term_begin.upload(sorted.term_begin);
  }
  DeviceBuffer<int2> terms;     // (input, kernel) pairs, output by output
  DeviceBuffer<int> term_begin;  // P + 1 offsets into terms
};

/// The kernels' spectra Ŝ_{p,k} = scale · FFT₂(χ_{p,k} placed at n mod L), unnormalised for scale 1:
/// slices·K blocks of L1×L2, kernel k of slice p at block p·K + k, made with the pad kernel (half-widths
/// 2M) and a (slices·K)-batched forward plan. Everything is allocated at construction; set() allocates
/// nothing.
template <class Real>
class KernelSpectra {
 public:
  using DeviceComplex = typename Cufft<Real>::Complex;

  explicit KernelSpectra(const Problem& g)
      : spectra_(std::size_t(g.slices) * g.kernels * g.l1 * g.l2),
        kernels_device_(g.kernels_total()),
        kernels_host_(g.kernels_total()),
        plan_(g.l1, g.l2, std::size_t(g.slices) * g.kernels, Cufft<Real>::type) {}

  /// Runs on the calling thread's default stream and waits for it: the spectra are complete on return.
  /// Executes still in flight that read the spectra being replaced must have been waited for by the caller.
  void set(const Problem& g, Kernels kernels, Real scale) {
    check_kernels(g, kernels);
    for (std::size_t i = 0; i < kernels.size(); ++i) kernels_host_[i] = std::complex<Real>(kernels[i]);
    kernels_device_.upload(kernels_host_);
    const std::size_t count = std::size_t(g.slices) * g.kernels, spectrum_size = std::size_t(g.l1) * g.l2;
    pad_kernel<<<grid_for(spectrum_size, count), threads_per_block, 0, cudaStreamPerThread>>>(
        reinterpret_cast<const DeviceComplex*>(kernels_device_.data()), spectra_.data(), g.n1 - 1, g.n2 - 1, g.l1,
        g.l2, count, scale);
    GS_CUDA_CHECK_LAUNCH();
    if (!plan_.empty()) {
      GS_CUFFT_TRY(cufftSetStream(plan_.get(), cudaStreamPerThread));
      GS_CUFFT_TRY(Cufft<Real>::exec(plan_.get(), spectra_.data(), spectra_.data(), CUFFT_FORWARD));
    }
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));
  }

  [[nodiscard]] DeviceComplex* data() { return spectra_.data(); }

 private:
  DeviceBuffer<DeviceComplex> spectra_;              // slices·K × L1×L2
  DeviceBuffer<std::complex<Real>> kernels_device_;  // slices·K × K1×K2, χ_{p,k} rounded to Real
  std::vector<std::complex<Real>> kernels_host_;     // staging for the rounding, so set() allocates nothing
  CufftPlan plan_;                                   // slices·K forward transforms
};

/// Device bytes of KernelSpectra: the spectra, the kernels and cuFFT's estimate of its plan's work area.
inline std::size_t kernel_spectra_bytes(const Problem& g, Precision precision) {
  const std::size_t c = precision == Precision::single ? 8 : 16, count = std::size_t(g.slices) * g.kernels;
  return count * g.l1 * g.l2 * c + g.kernels_total() * c + cufft_work_estimate(g.l1, g.l2, count, precision);
}

/// The limits both pipelines share: a CUDA device, and L1·L2 < 2^31 (kernels index a spectrum with int).
inline Support check_cufft_limits(const Problem& g) {
  if (!cuda_device_present()) return unsupported("needs a CUDA device, and none is present");
  if (std::size_t(g.l1) * g.l2 > std::size_t(INT32_MAX))
    return unsupported("needs L1*L2 < 2^31, got " + std::to_string(g.l1) + "*" + std::to_string(g.l2));
  return {};
}

}  // namespace
}  // namespace gratingsim::conv::detail
