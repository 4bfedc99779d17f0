// The sweep preconditioner P = A⁻¹ (sweep_preconditioner.hpp) on the device.
//
// Set-up: the host builds the sweep's matrices in complex128 (sweep_matrices); they are uploaded here
// rounded to Real. Application: one launch on the problem's stream, one thread block per (right-hand
// side, group of its incidence). The block runs the rhs's sweep up (v_p = N_p⁻¹ b_p − K_p g, then
// g ← s_p (g + Γ_p v_p), from the bottom slice) and down (x_p = v_p − H_p a, then a ← s_{p+1} (a + Φ_p x_p));
// v_p is kept in y between the two. Each product reads a slice matrix column-major, thread i forming rows
// i, i + blockDim, ... (a warp reads consecutive addresses); the vectors (the slice's n values, g and a)
// sit in shared memory in complex128 and every product sums in complex128. Three block-wide
// synchronisations per slice and sweep: the depth is serial in the slices, as the z-operator's
// unchunked sweeps were; the solves this preconditions take one or two iterations.
#include <complex>
#include <string>
#include <vector>

#include "core/device_buffer.hpp"
#include "core/device_complex.cuh"
#include "physics/device.hpp"
#include "physics/sweep_preconditioner.hpp"

namespace gratingsim::physics {
namespace {

constexpr int sweep_threads = 256;

/// A group (SweepGroup) as the kernel reads it.
struct DeviceGroup {
  int nc = 0, np = 0;
  int components[3] = {0, 0, 0};
  std::size_t matrices = 0, gains = 0;
};

/// Σ_j M(i, j) v[j] for the column-major rows × columns matrix M, in complex128.
template <class V>
__device__ double2 row_product(const V* __restrict__ matrix, int rows, int columns, int i, const double2* v) {
  double re = 0, im = 0;
  for (int j = 0; j < columns; ++j) {
    const V c = matrix[std::size_t(j) * rows + i];
    const double2 w = v[j];
    re += double(c.x) * w.x - double(c.y) * w.y;
    im += double(c.x) * w.y + double(c.y) * w.x;
  }
  return {re, im};
}

__device__ double2 times(double2 a, double2 b) { return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; }

/// x, y: batched layout, element (slice p, rhs r, component c, order m) at (p·nr + r)·3·nm + c·nm + m.
template <class Real>
__global__ void __launch_bounds__(sweep_threads)
    apply_sweep(const DeviceGroup* __restrict__ groups, const int* __restrict__ first_group,
                const int* __restrict__ rhs_incidence, const Complex2<Real>* __restrict__ inverse,
                const Complex2<Real>* __restrict__ gain_g, const Complex2<Real>* __restrict__ gain_a,
                const Complex2<Real>* __restrict__ up, const Complex2<Real>* __restrict__ down,
                const Complex2<Real>* __restrict__ step, const Complex2<Real>* x, Complex2<Real>* y, int nm, int nz,
                int nr) {
  using V = Complex2<Real>;
  extern __shared__ double2 shared[];  // b [n], v or x_p [n], g [h], a [h]
  const int r = blockIdx.x, a = rhs_incidence[r], k = first_group[a] + int(blockIdx.y);
  if (k >= first_group[a + 1]) return;
  const DeviceGroup group = groups[k];
  const int n = group.nc * nm, h = group.np * nm;
  double2 *b = shared, *v = shared + n, *g = v + n, *amplitude = g + h;
  const auto element = [&](int p, int i) {
    return (std::size_t(p) * nr + r) * 3 * std::size_t(nm) + std::size_t(group.components[i / nm]) * nm + i % nm;
  };
  const auto step_at = [&](int p, int i) {
    const V s = step[(std::size_t(a) * nz + p) * nm + i % nm];
    return double2{double(s.x), double(s.y)};
  };
  for (int i = threadIdx.x; i < h; i += blockDim.x) g[i] = amplitude[i] = double2{0, 0};
  for (int p = nz - 1; p >= 0; --p) {  // up: v_p, then g
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const V e = x[element(p, i)];
      b[i] = {double(e.x), double(e.y)};
    }
    __syncthreads();
    const std::size_t at = group.gains + std::size_t(p) * n * h;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const double2 t = row_product(inverse + group.matrices + std::size_t(p) * n * n, n, n, i, b);
      const double2 c = row_product(gain_g + at, n, h, i, g);
      v[i] = {t.x - c.x, t.y - c.y};
      y[element(p, i)] = V{Real(v[i].x), Real(v[i].y)};
    }
    __syncthreads();
    if (p > 0)
      for (int i = threadIdx.x; i < h; i += blockDim.x) {
        const double2 c = row_product(up + at, h, n, i, v);
        g[i] = times(step_at(p, i), {g[i].x + c.x, g[i].y + c.y});
      }
    __syncthreads();
  }
  for (int p = 0; p < nz; ++p) {  // down: x_p, then a
    const std::size_t at = group.gains + std::size_t(p) * n * h;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const V e = y[element(p, i)];  // v_p, written by this block above
      const double2 c = row_product(gain_a + at, n, h, i, amplitude);
      v[i] = {double(e.x) - c.x, double(e.y) - c.y};
      y[element(p, i)] = V{Real(v[i].x), Real(v[i].y)};
    }
    __syncthreads();
    if (p + 1 < nz)
      for (int i = threadIdx.x; i < h; i += blockDim.x) {
        const double2 c = row_product(down + at, h, n, i, v);
        amplitude[i] = times(step_at(p + 1, i), {amplitude[i].x + c.x, amplitude[i].y + c.y});
      }
    __syncthreads();
  }
}

template <class V>
DeviceBuffer<V> rounded(const std::vector<std::complex<double>>& values) {
  std::vector<V> host(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    host[i] = V{decltype(V::x)(values[i].real()), decltype(V::x)(values[i].imag())};
  DeviceBuffer<V> out(host.size());
  out.upload(host);
  return out;
}

template <class Real>
class DeviceSweepPreconditioner final : public Preconditioner<Real> {
 public:
  using typename Preconditioner<Real>::Complex;
  using V = Complex2<Real>;

  DeviceSweepPreconditioner(const SweepMatrices& sweep, const std::vector<int>& rhs_incidence)
      : nm_(sweep.orders), nz_(sweep.slices), nr_(int(rhs_incidence.size())) {
    std::vector<DeviceGroup> groups;
    std::vector<int> first(std::size_t(sweep.incidences) + 1, 0);
    std::size_t largest = 0;
    for (const SweepGroup& s : sweep.groups) {
      DeviceGroup d;
      d.nc = int(s.components.size());
      d.np = int(s.polarisations.size());
      for (int i = 0; i < d.nc; ++i) d.components[i] = s.components[std::size_t(i)];
      d.matrices = s.matrices;
      d.gains = s.gains;
      groups.push_back(d);
      ++first[std::size_t(s.incidence) + 1];
      max_groups_ = std::max(max_groups_, first[std::size_t(s.incidence) + 1]);
      largest = std::max(largest, 2 * (s.n(nm_) + s.h(nm_)));
    }
    for (std::size_t a = 0; a < std::size_t(sweep.incidences); ++a) first[a + 1] += first[a];
    for (int a : rhs_incidence)
      GS_EXPECTS(a >= 0 && a < sweep.incidences, "device sweep preconditioner: a right-hand side's incidence is out of range");
    shared_bytes_ = largest * sizeof(double2);
    int device = 0, limit = 0;
    GS_CUDA_TRY(cudaGetDevice(&device));
    GS_CUDA_TRY(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    GS_EXPECTS(shared_bytes_ <= std::size_t(limit),
               "the sweep preconditioner on the device: " + std::to_string(nm_) + " orders need " +
                   std::to_string(shared_bytes_) + " bytes of shared memory per block, the device allows " +
                   std::to_string(limit) + "; choose preconditioner: averaged or none, or a host backend");
    GS_CUDA_TRY(cudaFuncSetAttribute(apply_sweep<Real>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes_)));
    groups_ = DeviceBuffer<DeviceGroup>(groups.size());
    groups_.upload(groups);
    first_group_ = DeviceBuffer<int>(first.size());
    first_group_.upload(first);
    rhs_incidence_ = DeviceBuffer<int>(rhs_incidence.size());
    rhs_incidence_.upload(rhs_incidence);
    inverse_ = rounded<V>(sweep.inverse);
    gain_g_ = rounded<V>(sweep.gain_g);
    gain_a_ = rounded<V>(sweep.gain_a);
    up_ = rounded<V>(sweep.up);
    down_ = rounded<V>(sweep.down);
    step_ = rounded<V>(sweep.step);
  }

  [[nodiscard]] Memory memory() const override { return Memory::device; }

  void apply(const Complex* x, Complex* y, Stream stream) override {
    const dim3 grid{unsigned(nr_), unsigned(max_groups_)};
    apply_sweep<Real><<<grid, sweep_threads, shared_bytes_, stream>>>(
        groups_.data(), first_group_.data(), rhs_incidence_.data(), inverse_.data(), gain_g_.data(), gain_a_.data(),
        up_.data(), down_.data(), step_.data(), reinterpret_cast<const V*>(x), reinterpret_cast<V*>(y), nm_, nz_, nr_);
    GS_CUDA_CHECK_LAUNCH();
  }

 private:
  int nm_, nz_, nr_, max_groups_ = 1;
  std::size_t shared_bytes_ = 0;
  DeviceBuffer<DeviceGroup> groups_;
  DeviceBuffer<int> first_group_, rhs_incidence_;
  DeviceBuffer<V> inverse_, gain_g_, gain_a_, up_, down_, step_;
};

}  // namespace

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_sweep_preconditioner(const SweepMatrices& sweep,
                                                                       std::vector<int> rhs_incidence) {
  return std::make_unique<DeviceSweepPreconditioner<Real>>(sweep, rhs_incidence);
}
template std::unique_ptr<Preconditioner<float>> make_device_sweep_preconditioner<float>(const SweepMatrices&,
                                                                                        std::vector<int>);
template std::unique_ptr<Preconditioner<double>> make_device_sweep_preconditioner<double>(const SweepMatrices&,
                                                                                          std::vector<int>);

}  // namespace gratingsim::physics
