// gpu-cufft: the unfused five-step FFT convolution written the way a cuFFT user would write it, the
// baseline every GPU speed-up is quoted against (see ../shared/design/convolution.md).
//
// Per field block b of slice p = b / per_slice, in an L1×L2 workspace w_b (row-major, axis 2 fast):
//   pad       w_b[m mod L] = in_b(m) for m ∈ [−M1, M1] × [−M2, M2], zero elsewhere   (pad kernel)
//   forward   w_b ← FFT₂(w_b), e^{−2πi jk/L}, all blocks in one batched cuFFT plan, in place
//   multiply  w_b ← w_b · Ŝ_p, Ŝ_p = FFT₂(χ_p placed at n mod L) / (L1·L2)    (multiply kernel)
//   inverse   w_b ← FFT₂⁻¹(w_b), e^{+2πi jk/L}, unnormalised (the 1/(L1·L2) is in Ŝ_p)
//   extract   out_b(m) = w_b[m mod L]                                             (extract kernel)
// L ≥ 2N − 1 keeps the kept outputs free of circular aliasing. Ŝ_p is made once per set_kernels with
// the same pad kernel (half-widths 2M, the scale folded in) and a slices-batched cuFFT plan.
//
// Axes of length 1 (N = 1 on that axis, L = 1) are left out of the cuFFT plans: the length-1 DFT is the
// identity, and dropping the axis makes 1D gratings (L2 = 1) plain batched 1D transforms of length L1.
// With L1 = L2 = 1 no transform is made at all (the convolution is out = χ(0)·in).
//
// Memory: the workspace holds the whole batch (batch·L1·L2 complex), the spectra slices·L1·L2; both
// and the cuFFT plans (with their own work areas) are made in the constructor. execute() allocates
// nothing; it enqueues five steps on the caller's stream (cufftSetStream) and does not synchronise.
// One execute per plan at a time: concurrent calls on different streams would share the workspace.
#include <cufft.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "convolution/backends.hpp"
#include "convolution/cuda_check.hpp"
#include "convolution/device_buffer.hpp"

namespace gratingsim::conv::detail {
namespace {

// float2 / double2 are the layouts of cufftComplex / cufftDoubleComplex and of std::complex<Real>.
template <class Real>
struct Cufft;
template <>
struct Cufft<float> {
  using Complex = cufftComplex;
  static constexpr cufftType type = CUFFT_C2C;
  static cufftResult exec(cufftHandle plan, Complex* data, int direction) {
    return cufftExecC2C(plan, data, data, direction);
  }
};
template <>
struct Cufft<double> {
  using Complex = cufftDoubleComplex;
  static constexpr cufftType type = CUFFT_Z2Z;
  static cufftResult exec(cufftHandle plan, Complex* data, int direction) {
    return cufftExecZ2Z(plan, data, data, direction);
  }
};

/// A cuFFT plan handle owned for the lifetime of the backend; empty where no transform is needed.
class CufftPlan {
 public:
  CufftPlan() = default;
  /// In-place batched C2C (Z2Z) transforms of the `batch` contiguous L1×L2 blocks, length-1 axes dropped.
  CufftPlan(int l1, int l2, std::size_t batch, cufftType type) {
    std::vector<long long> lengths;
    if (l1 > 1) lengths.push_back(l1);
    if (l2 > 1) lengths.push_back(l2);
    if (lengths.empty()) return;
    CUFFT_TRY(cufftCreate(&handle_));
    owned_ = true;
    const long long distance = static_cast<long long>(l1) * l2;
    std::size_t work_bytes = 0;
    CUFFT_TRY(cufftMakePlanMany64(handle_, static_cast<int>(lengths.size()), lengths.data(), nullptr, 1, distance,
                                  nullptr, 1, distance, type, static_cast<long long>(batch), &work_bytes));
  }
  CufftPlan(const CufftPlan&) = delete;
  CufftPlan& operator=(const CufftPlan&) = delete;
  ~CufftPlan() {
    if (owned_) cufftDestroy(handle_);  // no throw from a destructor
  }
  [[nodiscard]] bool empty() const { return !owned_; }
  [[nodiscard]] cufftHandle get() const { return handle_; }

 private:
  cufftHandle handle_{};
  bool owned_ = false;
};

template <class C>
__device__ C complex_multiply(C a, C b) {
  return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x};
}

// Grids: x runs over the elements of one block (padded or kept), y over the batch in a grid-stride
// loop (gridDim.y is capped at 65535).
constexpr int threads_per_block = 256;
constexpr unsigned max_grid_y = 65535;

dim3 grid_for(std::size_t elements_per_block, std::size_t batch) {
  return dim3(static_cast<unsigned>((elements_per_block + threads_per_block - 1) / threads_per_block),
              static_cast<unsigned>(std::min<std::size_t>(batch, max_grid_y)));
}

/// work_b[k] = scale · src_b(h), where k = h mod L per axis and src_b is a (2H1+1)×(2H2+1) block
/// centred on h = 0; zero at every other k. One thread per padded entry: the whole workspace is
/// rewritten, since the in-place FFTs left data everywhere. Fields: H = M, scale 1; kernels: H = 2M,
/// scale 1/(L1·L2).
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

/// work_b ← work_b · Ŝ_{b / per_slice}, elementwise over the L1·L2 spectrum.
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
        work_(g.input_blocks() * spectrum_size_),
        spectra_(std::size_t(g.slices) * spectrum_size_),
        kernels_device_(g.kernels_total()),
        kernels_host_(g.kernels_total()),
        fields_plan_(g.l1, g.l2, g.input_blocks(), Cufft<Real>::type),
        kernels_plan_(g.l1, g.l2, std::size_t(g.slices), Cufft<Real>::type) {
    set_kernels(kernels);
  }

  /// Synchronises with the whole device before and after: no execute still in flight on any stream
  /// reads the spectra being replaced, and they are complete on return. Runs on the legacy stream.
  void set_kernels(Kernels kernels) override {
    const Problem& g = this->problem_;
    check_kernels(g, kernels);
    for (std::size_t i = 0; i < kernels.size(); ++i) kernels_host_[i] = Complex(kernels[i]);
    CUDA_TRY(cudaDeviceSynchronize());
    kernels_device_.upload(kernels_host_);
    pad_kernel<<<grid_for(spectrum_size_, g.slices), threads_per_block>>>(
        device(kernels_device_.data()), spectra_.data(), g.n1 - 1, g.n2 - 1, g.l1, g.l2, std::size_t(g.slices),
        Real(1) / Real(spectrum_size_));
    CUDA_CHECK_LAUNCH();
    if (!kernels_plan_.empty()) {
      CUFFT_TRY(cufftSetStream(kernels_plan_.get(), nullptr));
      CUFFT_TRY(Cufft<Real>::exec(kernels_plan_.get(), spectra_.data(), CUFFT_FORWARD));
    }
    CUDA_TRY(cudaDeviceSynchronize());
  }

  void execute(const Complex* in, Complex* out, Stream stream) override {
    const Problem& g = this->problem_;
    const std::size_t batch = g.input_blocks();
    EXPECTS(in != nullptr && out != nullptr, "gpu-cufft execute: null buffer");
    const auto bytes = g.input_size() * sizeof(Complex);
    const auto in_address = reinterpret_cast<std::uintptr_t>(in), out_address = reinterpret_cast<std::uintptr_t>(out);
    EXPECTS(in_address + bytes <= out_address || out_address + bytes <= in_address,
            "gpu-cufft execute: input and output buffers overlap");

    pad_kernel<<<grid_for(spectrum_size_, batch), threads_per_block, 0, stream>>>(
        device(in), work_.data(), g.n1 / 2, g.n2 / 2, g.l1, g.l2, batch, Real(1));
    CUDA_CHECK_LAUNCH();
    transform(stream, CUFFT_FORWARD);
    multiply_kernel<<<grid_for(spectrum_size_, batch), threads_per_block, 0, stream>>>(
        work_.data(), spectra_.data(), static_cast<int>(spectrum_size_), g.per_slice, batch);
    CUDA_CHECK_LAUNCH();
    transform(stream, CUFFT_INVERSE);
    extract_kernel<<<grid_for(g.field_size(), batch), threads_per_block, 0, stream>>>(
        work_.data(), device(out), g.n1, g.n2, g.l1, g.l2, batch);
    CUDA_CHECK_LAUNCH();
  }

  [[nodiscard]] Backend backend() const override { return Backend::gpu_cufft; }

 private:
  static const DeviceComplex* device(const Complex* p) { return reinterpret_cast<const DeviceComplex*>(p); }
  static DeviceComplex* device(Complex* p) { return reinterpret_cast<DeviceComplex*>(p); }

  void transform(Stream stream, int direction) {
    if (fields_plan_.empty()) return;
    CUFFT_TRY(cufftSetStream(fields_plan_.get(), stream));
    CUFFT_TRY(Cufft<Real>::exec(fields_plan_.get(), work_.data(), direction));
  }

  std::size_t spectrum_size_;                   // L1·L2
  DeviceBuffer<DeviceComplex> work_;            // batch × L1×L2, padded fields and their spectra, in place
  DeviceBuffer<DeviceComplex> spectra_;         // slices × L1×L2, Ŝ_p with 1/(L1·L2) folded in
  DeviceBuffer<Complex> kernels_device_;        // slices × K1×K2, χ_p rounded to Real, input of the spectra
  std::vector<Complex> kernels_host_;           // staging for the rounding, so set_kernels allocates nothing
  CufftPlan fields_plan_;                       // batch transforms of the workspace, both directions
  CufftPlan kernels_plan_;                      // slices transforms of the spectra, forward
};

}  // namespace

// Until gpu-cufft transforms each input once for a whole pattern, it serves scalar problems only.
Support can_implement_gpu_cufft(const Problem& g, Precision) {
  if (!cuda_device_present()) return unsupported("needs a CUDA device, and none is present");
  if (!g.scalar()) return unsupported("serves scalar problems only (K = P = Q = 1)");
  return {};
}
std::size_t workspace_gpu_cufft(const Problem& g, Precision precision) {
  const std::size_t c = precision == Precision::single ? 8 : 16, area = std::size_t(g.l1) * g.l2;
  // work area of every block, spectra, kernels (the cuFFT plans' own work areas are not counted)
  return g.input_blocks() * area * c + g.slices * g.kernels * area * c + g.kernels_total() * c;
}

template <class Real>
Plan<Real> make_gpu_cufft(const Problem& g, Kernels kernels) {
  return std::make_unique<GpuCufft<Real>>(g, kernels);
}
template Plan<float> make_gpu_cufft<float>(const Problem&, Kernels);
template Plan<double> make_gpu_cufft<double>(const Problem&, Kernels);
}  // namespace gratingsim::conv::detail
