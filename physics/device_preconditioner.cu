// The preconditioner P = L⁻¹ L̄ Ā⁻¹ (preconditioner.hpp) on the device, three launches on the
// problem's stream:
//   Ā⁻¹: one thread block per (incidence, order); its right-hand sides' n = 3·Nz values are gathered
//        into shared memory (complex128), then each thread forms rows i, i + blockDim, ... reading the
//        column-major inverse, so the threads of a warp read consecutive addresses;
//   L̄:   one thread per (slice, rhs, order), a 3×3 product;
//   L⁻¹: one thread block per (slice, rhs), the contiguous block of 3·orders values gathered into
//        shared memory, rows as for Ā⁻¹.
// Memory traffic per apply: every matrix once, three passes over the batched vector.
#include <complex>

#include "core/device_buffer.hpp"
#include "physics/device.hpp"
#include "physics/preconditioner.hpp"

namespace gratingsim::physics {
namespace {

template <class Real>
struct Vec2;
template <>
struct Vec2<float> {
  using type = float2;
};
template <>
struct Vec2<double> {
  using type = double2;
};

constexpr int threads = 128;

/// x, y: batched layout, element (slice p, rhs r, comp, order m) at (p·nr + r)·3·nm + comp·nm + m;
/// the rhs of incidence a are a·per .. a·per + per − 1.
template <class Real, int Per>
__global__ void __launch_bounds__(threads)
    apply_inverses(const typename Vec2<Real>::type* __restrict__ matrices, const typename Vec2<Real>::type* x,
                   typename Vec2<Real>::type* y, int nm, int nz, int nr) {
  extern __shared__ double2 gathered[];  // [Per][n]
  const int am = blockIdx.x, a = am / nm, m = am % nm;
  const int n = 3 * nz;
  const std::size_t block = 3 * std::size_t(nm);
  const auto at = [&](int i, int r) { return (std::size_t(i / 3) * nr + r) * block + std::size_t(i % 3) * nm + m; };
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    for (int k = 0; k < Per; ++k) {
      const auto v = x[at(i, a * Per + k)];
      gathered[k * n + i] = {double(v.x), double(v.y)};
    }
  __syncthreads();
  const auto* matrix = matrices + std::size_t(am) * n * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    double2 sum[Per];
    for (int k = 0; k < Per; ++k) sum[k] = {0, 0};
    for (int j = 0; j < n; ++j) {
      const auto mij = matrix[std::size_t(j) * n + i];
      const double re = mij.x, im = mij.y;
      for (int k = 0; k < Per; ++k) {
        const double2 v = gathered[k * n + j];
        sum[k].x += re * v.x - im * v.y;
        sum[k].y += re * v.y + im * v.x;
      }
    }
    for (int k = 0; k < Per; ++k) {
      using V = typename Vec2<Real>::type;
      y[at(i, a * Per + k)] = V{Real(sum[k].x), Real(sum[k].y)};
    }
  }
}

/// y ← L̄ x, one thread per (slice p, rhs r, order m); averaged[((a·nm + m)·nz + p)·9] row-major.
template <class Real>
__global__ void apply_local_averaged(const double2* __restrict__ averaged, const typename Vec2<Real>::type* x,
                                     typename Vec2<Real>::type* y, int nm, int nz, int nr, int per) {
  using V = typename Vec2<Real>::type;
  const std::size_t index = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= std::size_t(nz) * nr * nm) return;
  const int m = int(index % nm), r = int(index / nm % nr), p = int(index / nm / nr);
  const double2* l = averaged + ((std::size_t(r / per) * nm + m) * nz + p) * 9;
  const std::size_t base = (std::size_t(p) * nr + r) * 3 * nm + m;
  double2 v[3];
  for (int k = 0; k < 3; ++k) {
    const V e = x[base + k * std::size_t(nm)];
    v[k] = {double(e.x), double(e.y)};
  }
  for (int i = 0; i < 3; ++i) {
    double re = 0, im = 0;
    for (int k = 0; k < 3; ++k) {
      const double2 c = l[i * 3 + k];
      re += c.x * v[k].x - c.y * v[k].y;
      im += c.x * v[k].y + c.y * v[k].x;
    }
    y[base + i * std::size_t(nm)] = V{Real(re), Real(im)};
  }
}

/// y ← L⁻¹ x, one thread block per (slice p, rhs r): the contiguous block of n = 3·nm values;
/// inverses[((a·nz + p)·n + j)·n + i].
template <class Real>
__global__ void __launch_bounds__(threads)
    apply_local(const typename Vec2<Real>::type* __restrict__ inverses, const typename Vec2<Real>::type* x,
                typename Vec2<Real>::type* y, int nm, int nz, int nr, int per) {
  using V = typename Vec2<Real>::type;
  extern __shared__ double2 gathered[];  // [n]
  const int pr = blockIdx.x, p = pr / nr, r = pr % nr, n = 3 * nm;
  const V* in = x + std::size_t(pr) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) gathered[i] = {double(in[i].x), double(in[i].y)};
  __syncthreads();
  const V* matrix = inverses + (std::size_t(r / per) * nz + p) * n * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    double re = 0, im = 0;
    for (int j = 0; j < n; ++j) {
      const V c = matrix[std::size_t(j) * n + i];
      const double2 v = gathered[j];
      re += double(c.x) * v.x - double(c.y) * v.y;
      im += double(c.x) * v.y + double(c.y) * v.x;
    }
    y[std::size_t(pr) * n + i] = V{Real(re), Real(im)};
  }
}

template <class Real>
class DevicePreconditioner final : public Preconditioner<Real> {
 public:
  using typename Preconditioner<Real>::Complex;
  using V = typename Vec2<Real>::type;

  DevicePreconditioner(const AveragedInverse& inverse, const LocalInverse& local, const std::vector<int>& rhs_incidence)
      : nm_(inverse.orders), nz_(inverse.slices), na_(inverse.incidences), nr_(int(rhs_incidence.size())) {
    GS_EXPECTS(local.incidences == na_ && local.orders == nm_ && local.slices == nz_,
            "device preconditioner: the averaged and local parts disagree in size");
    per_ = na_ > 0 ? nr_ / na_ : 0;
    GS_EXPECTS(per_ >= 1 && per_ <= 2 && per_ * na_ == nr_,
            "device preconditioner: expects one or two right-hand sides per incidence");
    for (int r = 0; r < nr_; ++r)
      GS_EXPECTS(rhs_incidence[r] == r / per_, "device preconditioner: right-hand sides must be grouped by incidence");
    shared_bytes_ = std::size_t(per_) * inverse.n() * sizeof(double2);
    GS_EXPECTS(shared_bytes_ <= 48 * 1024, "device preconditioner: " + std::to_string(inverse.slices) +
                                            " slices exceed the shared memory of one block; use preconditioner: none");
    local_shared_bytes_ = local.n() * sizeof(double2);
    GS_EXPECTS(local_shared_bytes_ <= 48 * 1024, "device preconditioner: " + std::to_string(nm_) +
                                                  " orders exceed the shared memory of one block; use preconditioner: none");
    const auto rounded = [](const std::vector<std::complex<double>>& v) {
      std::vector<V> out(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) out[i] = V{Real(v[i].real()), Real(v[i].imag())};
      return out;
    };
    matrices_ = DeviceBuffer<V>(inverse.matrices.size());
    matrices_.upload(rounded(inverse.matrices));
    local_ = DeviceBuffer<V>(local.inverses.size());
    local_.upload(rounded(local.inverses));
    std::vector<double2> averaged(local.averaged.size());
    for (std::size_t i = 0; i < averaged.size(); ++i) averaged[i] = {local.averaged[i].real(), local.averaged[i].imag()};
    local_averaged_ = DeviceBuffer<double2>(averaged.size());
    local_averaged_.upload(averaged);
    const std::size_t vector = std::size_t(nz_) * nr_ * 3 * nm_;
    t1_ = DeviceBuffer<V>(vector);
    t2_ = DeviceBuffer<V>(vector);
    GS_CUDA_TRY(cudaDeviceSynchronize());  // pageable uploads: wait once here (see device_z_operator.cu)
  }

  [[nodiscard]] conv::Memory memory() const override { return conv::Memory::device; }

  void apply(const Complex* x, Complex* y, conv::Stream stream) override {
    const auto* in = reinterpret_cast<const V*>(x);
    auto* out = reinterpret_cast<V*>(y);
    const unsigned blocks = unsigned(na_) * unsigned(nm_);
    if (per_ == 2)
      apply_inverses<Real, 2><<<blocks, threads, shared_bytes_, stream>>>(matrices_.data(), in, t1_.data(), nm_, nz_, nr_);
    else
      apply_inverses<Real, 1><<<blocks, threads, shared_bytes_, stream>>>(matrices_.data(), in, t1_.data(), nm_, nz_, nr_);
    GS_CUDA_CHECK_LAUNCH();
    const std::size_t elements = std::size_t(nz_) * nr_ * nm_;
    apply_local_averaged<Real><<<unsigned((elements + 255) / 256), 256, 0, stream>>>(local_averaged_.data(), t1_.data(),
                                                                                      t2_.data(), nm_, nz_, nr_, per_);
    GS_CUDA_CHECK_LAUNCH();
    apply_local<Real><<<unsigned(nz_) * unsigned(nr_), threads, local_shared_bytes_, stream>>>(local_.data(), t2_.data(),
                                                                                               out, nm_, nz_, nr_, per_);
    GS_CUDA_CHECK_LAUNCH();
  }

 private:
  int nm_, nz_, na_, nr_, per_ = 0;
  std::size_t shared_bytes_ = 0, local_shared_bytes_ = 0;
  DeviceBuffer<V> matrices_, local_, t1_, t2_;
  DeviceBuffer<double2> local_averaged_;
};

}  // namespace

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_preconditioner(const AveragedInverse& averaged,
                                                                 const LocalInverse& local,
                                                                 std::vector<int> rhs_incidence) {
  return std::make_unique<DevicePreconditioner<Real>>(averaged, local, rhs_incidence);
}
template std::unique_ptr<Preconditioner<float>> make_device_preconditioner<float>(const AveragedInverse&,
                                                                                  const LocalInverse&, std::vector<int>);
template std::unique_ptr<Preconditioner<double>> make_device_preconditioner<double>(const AveragedInverse&,
                                                                                    const LocalInverse&,
                                                                                    std::vector<int>);

}  // namespace gratingsim::physics
