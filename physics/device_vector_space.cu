// Batched Krylov vectors in device memory (device.hpp), the problem's CUDA stream, its capture query and
// the device memory query.
//
// Layout as vector_space.hpp: element (slice p, rhs r, j) at (p·n_rhs + r)·block + j. A "row" is one
// (p, r) pair: `block` contiguous elements of one rhs. Element-wise kernels give each thread block one
// row (grid.x = slices, grid.y = rhs of the launch), so the rhs and its coefficient are uniform per
// block. Reductions give each block a strided set of slices of one rhs and write one complex128
// partial sum per block.
#include <algorithm>
#include <cmath>
#include <complex>
#include <optional>
#include <utility>
#include <vector>

#include "core/device_buffer.hpp"
#include "core/idle_handles.hpp"
#include "core/device_complex.cuh"
#include "physics/device.hpp"

namespace gratingsim::physics {

namespace {
/// The process's idle streams (core/idle_handles.hpp), by device: cudaStreamCreate and cudaStreamDestroy took 7.9 and
/// 3.3 ms a call where 8 workers shared an H200 (configs/si_lines_metrology.yaml, 113 problems: 1.3 s summed,
/// session 35), so a problem takes the stream its predecessor left. Never destroyed: at exit the streams go with the
/// CUDA context.
IdleHandles<int, cudaStream_t>& idle_streams() {
  static auto* const instance = new IdleHandles<int, cudaStream_t>(64);
  return *instance;
}
}  // namespace

DeviceStream::DeviceStream() {
  GS_CUDA_TRY(cudaGetDevice(&device_));
  if (const std::optional<cudaStream_t> taken = idle_streams().take(device_)) {
    stream_ = *taken;
    return;
  }
  cudaStream_t s = nullptr;
  GS_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}
DeviceStream::~DeviceStream() {
  // Waits first: buffers are freed in the order of their freeing thread's default stream only
  // (core/device_buffer.hpp), so no work of this stream may still run on memory freed around it.
  if (!stream_) return;
  cudaStreamSynchronize(stream_);  // no throw from a destructor
  if (const std::optional<cudaStream_t> evicted = idle_streams().give(device_, stream_)) cudaStreamDestroy(*evicted);
}
void DeviceStream::synchronize() const { GS_CUDA_TRY(cudaStreamSynchronize(stream_)); }

bool stream_capturing(Stream stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  GS_CUDA_TRY(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;  // active, or invalidated and not yet ended
}

DeviceMemoryInfo device_memory_info() {
  DeviceMemoryInfo info;
  GS_CUDA_TRY(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

namespace {

constexpr int threads_per_block = 256;
/// Per-rhs coefficients travel as a kernel argument (by value: no host buffer can be overwritten
/// before an asynchronous copy reads it); more rhs than this take several launches.
constexpr int rhs_per_launch = 128;
struct RhsCoefficients {
  double2 a[rhs_per_launch];
};

/// y_r += a_r x_r (axpy, rows with a_r = 0 untouched, as on the host) or x_r *= a_r (scale), in Real.
template <class Real, bool is_axpy>
__global__ void rowwise(const Complex2<Real>* x, Complex2<Real>* y, RhsCoefficients coefficients, int rhs_offset,
                        int rhs, int block) {
  const int r = rhs_offset + int(blockIdx.y);
  const double2 a = coefficients.a[blockIdx.y];
  if (is_axpy && a.x == 0 && a.y == 0) return;
  const Real ar = Real(a.x), ai = Real(a.y);
  const std::size_t row = (std::size_t(blockIdx.x) * rhs + r) * block;
  for (int j = threadIdx.x; j < block; j += blockDim.x) {
    const std::size_t i = row + j;
    if constexpr (is_axpy) {
      const auto u = x[i];
      auto v = y[i];
      v.x += ar * u.x - ai * u.y;
      v.y += ar * u.y + ai * u.x;
      y[i] = v;
    } else {
      const auto v = y[i];
      y[i] = {ar * v.x - ai * v.y, ar * v.y + ai * v.x};
    }
  }
}

/// partial[r·gridDim.x + blockIdx.x] = Σ conj(a)·b (or Σ |a|² when is_norm, in .x) over the slices
/// p ≡ blockIdx.x (mod gridDim.x) of rhs r = blockIdx.y, accumulated in double.
/// With gridDim.z > 1 (the basis pass of dots()), a is the first of gridDim.z vectors `stride` apart and
/// block z reduces vector z against b into partial[(z·rhs + r)·gridDim.x + blockIdx.x].
template <class Real, bool is_norm>
__global__ void reduce_rows(const Complex2<Real>* __restrict__ a, const Complex2<Real>* __restrict__ b,
                            double2* __restrict__ partial, int slices, int rhs, int block, std::size_t stride) {
  a += std::size_t(blockIdx.z) * stride;
  partial += std::size_t(blockIdx.z) * rhs * gridDim.x;
  const int r = int(blockIdx.y);
  double re = 0, im = 0;
  for (int p = int(blockIdx.x); p < slices; p += int(gridDim.x)) {
    const std::size_t row = (std::size_t(p) * rhs + r) * block;
    for (int j = threadIdx.x; j < block; j += blockDim.x) {
      const auto u = a[row + j];
      const double ux = u.x, uy = u.y;
      if constexpr (is_norm) {
        re += ux * ux + uy * uy;
      } else {
        const auto v = b[row + j];
        const double vx = v.x, vy = v.y;
        re += ux * vx + uy * vy;  // conj(u)·v
        im += ux * vy - uy * vx;
      }
    }
  }
  // Warp shuffles, then one value per warp through shared memory.
  for (int offset = 16; offset > 0; offset /= 2) {
    re += __shfl_down_sync(0xffffffffu, re, offset);
    im += __shfl_down_sync(0xffffffffu, im, offset);
  }
  __shared__ double2 warp_sums[threads_per_block / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = {re, im};
  __syncthreads();
  if (threadIdx.x == 0) {
    double2 sum{0, 0};
    for (int w = 0; w < int(blockDim.x / 32); ++w) {
      sum.x += warp_sums[w].x;
      sum.y += warp_sums[w].y;
    }
    partial[std::size_t(r) * gridDim.x + blockIdx.x] = sum;
  }
}

/// y_r += Σ_{i<count} a_{i,r} V_{i,r} for the launch's rhs r = rhs_offset + blockIdx.y, V_i = basis + i·stride:
/// coefficients a_{i,r} at coefficients.a[i·n + blockIdx.y] (n = gridDim.y); y read and written once.
template <class Real>
__global__ void combine_rows(const Complex2<Real>* __restrict__ basis, Complex2<Real>* y,
                             RhsCoefficients coefficients, int count, std::size_t stride, int rhs_offset, int rhs,
                             int block) {
  const int r = rhs_offset + int(blockIdx.y), n = int(gridDim.y);
  const std::size_t row = (std::size_t(blockIdx.x) * rhs + r) * block;
  for (int j = threadIdx.x; j < block; j += blockDim.x) {
    auto v = y[row + j];
    for (int i = 0; i < count; ++i) {
      const double2 a = coefficients.a[i * n + int(blockIdx.y)];
      const Real ar = Real(a.x), ai = Real(a.y);
      const auto u = basis[std::size_t(i) * stride + row + j];
      v.x += ar * u.x - ai * u.y;
      v.y += ar * u.y + ai * u.x;
    }
    y[row + j] = v;
  }
}

/// y[offset + k·stride] = values[k], k < count (upload_strided's scatter; y zeroed before).
template <class Real>
__global__ void scatter_strided(const Complex2<Real>* __restrict__ values, std::size_t count, std::size_t offset,
                                std::size_t stride, Complex2<Real>* y) {
  const std::size_t k = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < count) y[offset + k * stride] = values[k];
}

template <class Real>
class DeviceVectorSpace final : public VectorSpace<Real> {
 public:
  using typename VectorSpace<Real>::Complex;
  using typename VectorSpace<Real>::Scalar;
  using V = Complex2<Real>;
  static_assert(sizeof(V) == sizeof(Complex));

  DeviceVectorSpace(const BatchLayout& layout, int count, Stream stream)
      : VectorSpace<Real>(layout, count),
        stream_(stream),
        // Enough blocks per rhs that rhs·blocks fills the device a few times over, never more than slices.
        reduce_blocks_(int(std::clamp<std::size_t>(1024 / std::max<std::size_t>(layout.rhs, 1), 1, layout.slices))),
        storage_(layout.size() * std::size_t(count)),
        partial_device_(std::size_t(count) * layout.rhs * std::size_t(reduce_blocks_)),
        partial_host_(std::size_t(count) * layout.rhs * std::size_t(reduce_blocks_)) {
    GS_EXPECTS(layout.slices <= 0x7fffffffu && layout.block <= 0x7fffffffu, "device vector space: layout too large");
    GS_EXPECTS(layout.rhs <= 65535, "device vector space: at most 65535 right-hand sides per problem");
  }
  /// Waits for the stream first: the vectors are freed in the order of the freeing thread's default
  /// stream only (core/device_buffer.hpp), and work enqueued on `stream` may still use them.
  ~DeviceVectorSpace() override { cudaStreamSynchronize(stream_); }  // no throw from a destructor
  DeviceVectorSpace(const DeviceVectorSpace&) = delete;
  DeviceVectorSpace& operator=(const DeviceVectorSpace&) = delete;

  Complex* data(int i) override {
    GS_EXPECTS(i >= 0 && i < this->count_, "device vector space: no vector " + std::to_string(i));
    return reinterpret_cast<Complex*>(storage_.data()) + std::size_t(i) * this->layout_.size();
  }
  [[nodiscard]] Memory memory() const override { return Memory::device; }
  [[nodiscard]] Stream stream() const override { return stream_; }

  void norm(int x, std::span<double> out) override {
    reduce<true>(x, 1, x);
    for (std::size_t r = 0; r < this->layout_.rhs; ++r) out[r] = std::sqrt(partial_sum(r).real());
  }

  void dots(int first, int count, int y, std::span<Scalar> out) override {
    const std::size_t n = std::size_t(count) * this->layout_.rhs;
    GS_EXPECTS(out.size() >= n, "vector space: one dot per basis vector and right-hand side");
    reduce<false>(first, count, y);
    for (std::size_t k = 0; k < n; ++k) out[k] = partial_sum(k);
  }

  /// In launches of at most rhs_per_launch (basis vector, rhs) coefficients: rhs in groups of up to
  /// rhs_per_launch, basis vectors in groups of rhs_per_launch / group size; all-zero groups skipped.
  void combine(std::span<const Scalar> a, int first, int count, int y) override {
    const BatchLayout& l = this->layout_;
    GS_EXPECTS(a.size() >= std::size_t(count) * l.rhs, "vector space: one coefficient per basis vector and right-hand side");
    GS_EXPECTS(y < first || y >= first + count, "vector space: combine into one of its own basis vectors");
    V* target = reinterpret_cast<V*>(data(y));
    for (std::size_t r0 = 0; r0 < l.rhs; r0 += rhs_per_launch) {
      const std::size_t n = std::min<std::size_t>(rhs_per_launch, l.rhs - r0);
      const int per_launch = int(rhs_per_launch / n);
      for (int i0 = 0; i0 < count; i0 += per_launch) {
        const int m = std::min(per_launch, count - i0);
        RhsCoefficients c{};
        bool any = false;
        for (int i = 0; i < m; ++i)
          for (std::size_t k = 0; k < n; ++k) {
            const Scalar v = a[std::size_t(i0 + i) * l.rhs + r0 + k];
            c.a[std::size_t(i) * n + k] = {v.real(), v.imag()};
            any = any || v != Scalar(0);
          }
        if (!any) continue;
        const dim3 grid(unsigned(l.slices), unsigned(n));
        combine_rows<Real><<<grid, threads_per_block, 0, stream_>>>(vec(first + i0), target, c, m, l.size(), int(r0),
                                                                    int(l.rhs), int(l.block));
        GS_CUDA_CHECK_LAUNCH();
      }
    }
  }

  void axpy(std::span<const Scalar> a, int x, int y) override { rowwise_launch<true>(a, x, y); }
  void scale(std::span<const Scalar> a, int x) override { rowwise_launch<false>(a, x, x); }

  void copy(int x, int y) override {
    if (x == y) return;
    GS_CUDA_TRY(cudaMemcpyAsync(data(y), data(x), this->layout_.size() * sizeof(Complex), cudaMemcpyDeviceToDevice,
                             stream_));
  }

  void upload(std::span<const Complex> host, int i) override {
    GS_EXPECTS(host.size() == this->layout_.size(), "upload: size mismatch");
    GS_CUDA_TRY(cudaMemcpyAsync(data(i), host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream_));
    GS_CUDA_TRY(cudaStreamSynchronize(stream_));  // the caller may reuse `host` when this returns
  }
  void download(int i, std::span<Complex> host) override {
    GS_EXPECTS(host.size() == this->layout_.size(), "download: size mismatch");
    GS_CUDA_TRY(cudaMemcpyAsync(host.data(), data(i), host.size_bytes(), cudaMemcpyDeviceToHost, stream_));
    GS_CUDA_TRY(cudaStreamSynchronize(stream_));
  }
  void upload_strided(std::span<const Complex> values, std::size_t offset, std::size_t stride, int i) override {
    GS_EXPECTS(values.empty() || offset + (values.size() - 1) * stride < this->layout_.size(),
               "upload_strided: beyond the vector");
    GS_CUDA_TRY(cudaMemsetAsync(data(i), 0, this->layout_.size() * sizeof(Complex), stream_));  // all-zero bits: 0
    DeviceBuffer<V> staged(values.size());  // freed after the wait below
    if (!values.empty()) {
      GS_CUDA_TRY(cudaMemcpyAsync(staged.data(), values.data(), values.size_bytes(),
                                  cudaMemcpyHostToDevice, stream_));
      const unsigned blocks = unsigned((values.size() + threads_per_block - 1) / threads_per_block);
      scatter_strided<Real><<<blocks, threads_per_block, 0, stream_>>>(staged.data(), values.size(), offset, stride,
                                                                       reinterpret_cast<V*>(data(i)));
      GS_CUDA_CHECK_LAUNCH();
    }
    GS_CUDA_TRY(cudaStreamSynchronize(stream_));
  }

 private:
  [[nodiscard]] const V* vec(int i) { return reinterpret_cast<const V*>(data(i)); }

  /// Partial sums of vectors first..first+count−1 against y (or the norm of `first`), copied to the
  /// host; synchronises with the stream.
  template <bool is_norm>
  void reduce(int first, int count, int y) {
    const BatchLayout& l = this->layout_;
    GS_EXPECTS(count >= 1 && first >= 0 && first + count <= this->count_, "vector space: basis out of range");
    const dim3 grid(unsigned(reduce_blocks_), unsigned(l.rhs), unsigned(count));
    reduce_rows<Real, is_norm><<<grid, threads_per_block, 0, stream_>>>(
        vec(first), vec(y), partial_device_.data(), int(l.slices), int(l.rhs), int(l.block), l.size());
    GS_CUDA_CHECK_LAUNCH();
    const std::size_t used = std::size_t(count) * l.rhs * std::size_t(reduce_blocks_);
    GS_CUDA_TRY(cudaMemcpyAsync(partial_host_.data(), partial_device_.data(), used * sizeof(double2),
                             cudaMemcpyDeviceToHost, stream_));
    GS_CUDA_TRY(cudaStreamSynchronize(stream_));
  }

  /// The partial sums of result k (= i·rhs + r), added in block order.
  Scalar partial_sum(std::size_t k) {
    Scalar sum = 0;
    const double2* p = partial_host_.data() + k * std::size_t(reduce_blocks_);
    for (int b = 0; b < reduce_blocks_; ++b) sum += Scalar(p[b].x, p[b].y);
    return sum;
  }

  template <bool is_axpy>
  void rowwise_launch(std::span<const Scalar> a, int x, int y) {
    const BatchLayout& l = this->layout_;
    GS_EXPECTS(a.size() >= l.rhs, "vector space: one coefficient per right-hand side");
    V* target = reinterpret_cast<V*>(data(y));
    for (std::size_t r0 = 0; r0 < l.rhs; r0 += rhs_per_launch) {
      const std::size_t n = std::min<std::size_t>(rhs_per_launch, l.rhs - r0);
      RhsCoefficients c{};
      bool any = false;
      for (std::size_t k = 0; k < n; ++k) {
        c.a[k] = {a[r0 + k].real(), a[r0 + k].imag()};
        any = any || a[r0 + k] != Scalar(0);
      }
      if (is_axpy && !any) continue;
      const dim3 grid(unsigned(l.slices), unsigned(n));
      rowwise<Real, is_axpy><<<grid, threads_per_block, 0, stream_>>>(vec(x), target, c, int(r0), int(l.rhs),
                                                                      int(l.block));
      GS_CUDA_CHECK_LAUNCH();
    }
  }

  cudaStream_t stream_;
  int reduce_blocks_;
  DeviceBuffer<V> storage_;
  DeviceBuffer<double2> partial_device_;
  PinnedBuffer<double2> partial_host_;
};

}  // namespace

template <class Real>
std::unique_ptr<VectorSpace<Real>> make_device_vector_space(const BatchLayout& layout, int count, Stream stream) {
  GS_EXPECTS(count >= 1 && layout.size() > 0, "vector space: empty layout or count");
  return std::make_unique<DeviceVectorSpace<Real>>(layout, count, stream);
}
template std::unique_ptr<VectorSpace<float>> make_device_vector_space<float>(const BatchLayout&, int, Stream);
template std::unique_ptr<VectorSpace<double>> make_device_vector_space<double>(const BatchLayout&, int, Stream);

}  // namespace gratingsim::physics
