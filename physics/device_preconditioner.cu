// The preconditioner P = L⁻¹ L̄ Ā⁻¹ (preconditioner.hpp) on the device.
//
// Set-up: the host builds Ā's sweep (AveragedSweep, complex128, uploaded as it is); L_p is assembled here
// from its parts (LocalParts: kernels, G_pp; assemble_local_group), or uploaded where the host assembled
// it (LocalMatrices: the tests' random matrices), and inverted by cuBLAS's batched LU (cublasZgetrfBatched, partial
// pivoting, then cublasZgetriBatched into a second array), in complex128; the singularity test is the
// host's (expect_regular_local: the largest |A_ij| per matrix before, the smallest pivot |U_ii| after the
// factorisation, computed by two small kernels and checked on the host). The inverses are kept rounded
// to Real.
//
// Application, three launches on the problem's stream:
//   Ā⁻¹: one thread per (rhs, order) runs the averaged sweep up and down the slices (complex128, v_p in
//        a complex128 scratch vector; consecutive orders read consecutive addresses);
//   L̄:   one thread per (slice, rhs, order), a 3×3 product;
//   L⁻¹: per group of components that no element of L_p couples (y | x, z for 1D gratings without
//        conical incidence: the groups are inverted alone), one thread block per (slice, rhs), the
//        group's values of the block gathered into shared memory, each thread forming rows i,
//        i + blockDim, ... of the group's column-major inverse.
// Memory traffic per apply: every matrix once, about five passes over the batched vector.
// With an empty LocalMatrices only the first launch runs, into y (Ā⁻¹ alone: the coarse
// preconditioner's outer part). The coarse preconditioner adds one launch after it (apply_coarse).
#include <array>
#include <cmath>
#include <complex>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "core/device_buffer.hpp"
#include "core/device_complex.cuh"
#include "physics/device.hpp"
#include "physics/device_dense.cuh"
#include "physics/preconditioner.hpp"

namespace gratingsim::physics {
namespace {

constexpr int threads = 128;

__device__ inline double2 multiply_add(double2 acc, double2 a, double2 b) {
  return {acc.x + a.x * b.x - a.y * b.y, acc.y + a.x * b.y + a.y * b.x};
}
__device__ inline double2 multiply(double2 a, double2 b) { return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; }

/// y ← Ā⁻¹ x by the averaged sweep (AveragedSweep), one thread per (rhs r, order m): v_p = N⁻¹ b_p − K g
/// from the bottom slice up (into `v`, complex128, at (p·3 + c)·nr·nm + r·nm + m), then x_p = v_p − H a
/// from the top down. x, y: batched layout, element (slice p, rhs r, comp, order m) at
/// (p·nr + r)·3·nm + comp·nm + m; values at ((a·nz + p)·entries + e)·nm + m, a = rhs_incidence[r].
template <class Real>
__global__ void apply_averaged_sweep(const double2* __restrict__ values, const int* __restrict__ rhs_incidence,
                                     const Complex2<Real>* x, Complex2<Real>* y, double2* v, int nm, int nz, int nr) {
  using S = AveragedSweep;
  using V = Complex2<Real>;
  const std::size_t index = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= std::size_t(nr) * nm) return;
  const int m = int(index % nm), r = int(index / nm), a = rhs_incidence[r];
  const std::size_t lanes = std::size_t(nr) * nm;
  const auto value = [&](int p, int entry) {
    return values[((std::size_t(a) * nz + p) * S::entries + entry) * nm + m];
  };
  const auto element = [&](int p, int c) { return (std::size_t(p) * nr + r) * 3 * std::size_t(nm) + std::size_t(c) * nm + m; };
  // Row i of the 3×2 matrix at `entry` of slice p times the amplitudes w.
  const auto row_times = [&](int p, int entry, int i, const double2 (&w)[2]) {
    return multiply_add(multiply(value(p, entry + 2 * i), w[0]), value(p, entry + 2 * i + 1), w[1]);
  };
  // w ← s (w + M u), M the 2×3 matrix at `entry` of slice p: the amplitudes carried to the next slice.
  const auto carry = [&](double2 (&w)[2], int p, int entry, const double2 (&u)[3], double2 s) {
    for (int k = 0; k < 2; ++k) {
      double2 sum = w[k];
      for (int c = 0; c < 3; ++c) sum = multiply_add(sum, value(p, entry + 3 * k + c), u[c]);
      w[k] = multiply(s, sum);
    }
  };
  double2 g[2] = {{0, 0}, {0, 0}};
  for (int p = nz - 1; p >= 0; --p) {
    double2 b[3], vp[3];
    for (int c = 0; c < 3; ++c) {
      const V e = x[element(p, c)];
      b[c] = {double(e.x), double(e.y)};
    }
    for (int i = 0; i < 3; ++i) {
      double2 sum = multiply(value(p, S::inverse + 3 * i), b[0]);
      sum = multiply_add(sum, value(p, S::inverse + 3 * i + 1), b[1]);
      sum = multiply_add(sum, value(p, S::inverse + 3 * i + 2), b[2]);
      const double2 kg = row_times(p, S::gain_g, i, g);
      vp[i] = {sum.x - kg.x, sum.y - kg.y};
      v[(std::size_t(p) * 3 + i) * lanes + index] = vp[i];
    }
    if (p > 0) carry(g, p, S::up, vp, value(p, S::step));
  }
  double2 amplitude[2] = {{0, 0}, {0, 0}};
  for (int p = 0; p < nz; ++p) {
    double2 xp[3];
    for (int i = 0; i < 3; ++i) {
      const double2 ha = row_times(p, S::gain_a, i, amplitude);
      const double2 vi = v[(std::size_t(p) * 3 + i) * lanes + index];
      xp[i] = {vi.x - ha.x, vi.y - ha.y};
      y[element(p, i)] = V{Real(xp[i].x), Real(xp[i].y)};
    }
    if (p + 1 < nz) carry(amplitude, p, S::down, xp, value(p + 1, S::step));
  }
}

/// y ← L̄ x, one thread per (slice p, rhs r, order m); averaged[((a·nm + m)·nz + p)·9] row-major.
template <class Real>
__global__ void apply_local_averaged(const double2* __restrict__ averaged, const Complex2<Real>* x, Complex2<Real>* y,
                                     int nm, int nz, int nr, int per) {
  using V = Complex2<Real>;
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

/// y ← L⁻¹ x on one group of components (coupled_components), one thread block per (slice p, rhs r):
/// the group's n values of the contiguous block of 3·nm (at members[i], i < n) gathered into shared
/// memory, each thread forming rows i, i + blockDim, ... of the group's column-major inverse
/// inverses[((a·nz + p)·n + j)·n + i]. The groups partition the block, so their launches write all of y.
template <class Real>
__global__ void __launch_bounds__(threads)
    apply_local(const Complex2<Real>* __restrict__ inverses, const int* __restrict__ members, const Complex2<Real>* x,
                Complex2<Real>* y, int n, int nm, int nz, int nr, int per) {
  using V = Complex2<Real>;
  extern __shared__ double2 gathered[];  // [n]
  const int pr = blockIdx.x, p = pr / nr, r = pr % nr;
  const V* in = x + std::size_t(pr) * 3 * nm;
  V* out = y + std::size_t(pr) * 3 * nm;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const V v = in[members[i]];
    gathered[i] = {double(v.x), double(v.y)};
  }
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
    out[members[i]] = V{Real(re), Real(im)};
  }
}

/// largest[k] = max |A_ij| of matrix k (count × size values of matrices), infinite where an element is
/// not finite (expect_regular_*); one block of `threads` per matrix.
__global__ void __launch_bounds__(threads) largest_elements(const double2* matrices, std::size_t size, double* largest) {
  __shared__ double partial[threads];
  const double2* a = matrices + std::size_t(blockIdx.x) * size;
  double most = 0;
  for (std::size_t i = threadIdx.x; i < size; i += blockDim.x) {
    const double v = hypot(a[i].x, a[i].y);
    most = isfinite(v) ? fmax(most, v) : INFINITY;
  }
  partial[threadIdx.x] = most;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) partial[threadIdx.x] = fmax(partial[threadIdx.x], partial[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) largest[blockIdx.x] = partial[0];
}

/// smallest[k] = min |U_ii| of the LU factors of matrix k (n×n, column-major); NaN counts as 0.
__global__ void __launch_bounds__(threads) smallest_pivots(const double2* factors, int n, double* smallest) {
  __shared__ double partial[threads];
  const double2* a = factors + std::size_t(blockIdx.x) * n * n;
  double least = INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = hypot(a[std::size_t(i) * n + i].x, a[std::size_t(i) * n + i].y);
    least = isnan(v) ? 0.0 : fmin(least, v);
  }
  partial[threadIdx.x] = least;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) partial[threadIdx.x] = fmin(partial[threadIdx.x], partial[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) smallest[blockIdx.x] = partial[0];
}

/// The inverses of `count` n×n complex128 matrices (column-major, one after another), inverted on the
/// device and returned rounded to Real (V). `expect_regular(largest, smallest_pivot)` checks them
/// before the inversion, on the host. Everything runs on the calling thread's default stream
/// (cudaStreamPerThread): each copy (DeviceBuffer's) waits for the work before it on that stream (the
/// download of the check arrays for the factorisation); the kernels and the two cuBLAS calls are
/// asynchronous, and the caller waits for the stream before the inverses are used elsewhere.
/// Device memory while it runs: the matrices twice in complex128 (factors, inverses), and the result.
/// `factors` holds the matrices on the device already (overwritten by their LU factors).
template <class V, class Check>
DeviceBuffer<V> invert_on_device(DeviceBuffer<double2>& factors, std::size_t n, std::size_t count, Check expect_regular) {
  GS_EXPECTS(factors.size() == n * n * count && count > 0, "invert_on_device: matrix sizes");
  GS_SUPPORTS(n * n <= std::size_t(std::numeric_limits<int>::max()) && count <= std::size_t(std::numeric_limits<int>::max()),
           "invert_on_device: matrices beyond cuBLAS's int sizes");
  const std::size_t total = factors.size();
  DeviceBuffer<double> largest(count), smallest(count);
  largest_elements<<<unsigned(count), threads, 0, cudaStreamPerThread>>>(factors.data(), n * n, largest.data());
  GS_CUDA_CHECK_LAUNCH();
  // cuBLAS takes arrays of device pointers to the matrices.
  std::vector<cuDoubleComplex*> pointers(count);
  for (std::size_t k = 0; k < count; ++k) pointers[k] = reinterpret_cast<cuDoubleComplex*>(factors.data() + k * n * n);
  DeviceBuffer<cuDoubleComplex*> factor_pointers(count);
  factor_pointers.upload(pointers);
  DeviceBuffer<int> pivots(n * count), info(count);
  // info[k] > 0 where a pivot is exactly zero: the smallest-pivot test below includes that case.
  GS_CUBLAS_TRY(cublasZgetrfBatched(CublasHandle::get(), int(n), factor_pointers.data(), int(n), pivots.data(), info.data(),
                                 int(count)));
  smallest_pivots<<<unsigned(count), threads, 0, cudaStreamPerThread>>>(factors.data(), int(n), smallest.data());
  GS_CUDA_CHECK_LAUNCH();
  std::vector<double> largest_host(count), smallest_host(count);
  largest.download(largest_host);  // waits for the factorisation
  smallest.download(smallest_host);
  expect_regular(std::span<const double>(largest_host), std::span<const double>(smallest_host));
  // getri writes the inverses out of place: into the result when Real is double, else into complex128
  // scratch rounded afterwards.
  DeviceBuffer<V> result(total);
  DeviceBuffer<double2> scratch;
  double2* inverses = nullptr;
  if constexpr (std::is_same_v<V, double2>) {
    inverses = result.data();
  } else {
    scratch = DeviceBuffer<double2>(total);
    inverses = scratch.data();
  }
  for (std::size_t k = 0; k < count; ++k) pointers[k] = reinterpret_cast<cuDoubleComplex*>(inverses + k * n * n);
  DeviceBuffer<cuDoubleComplex*> inverse_pointers(count);
  inverse_pointers.upload(pointers);
  GS_CUBLAS_TRY(cublasZgetriBatched(CublasHandle::get(), int(n), factor_pointers.data(), int(n), pivots.data(),
                                 inverse_pointers.data(), int(n), info.data(), int(count)));
  if constexpr (!std::is_same_v<V, double2>) {
    round_to<V><<<unsigned((total + 255) / 256), 256, 0, cudaStreamPerThread>>>(scratch.data(), result.data(), total);
    GS_CUDA_CHECK_LAUNCH();
  }
  return result;
}

/// The same for matrices on the host (uploaded first).
template <class V, class Check>
DeviceBuffer<V> invert_on_device(const std::vector<std::complex<double>>& matrices, std::size_t n, std::size_t count,
                                 Check expect_regular) {
  DeviceBuffer<double2> factors = upload_complex128(matrices);
  return invert_on_device<V>(factors, n, count, expect_regular);
}

/// One group of every L_p assembled from LocalParts (the formula there), one thread per element:
/// factors[(k·n + j)·n + i] = L_k(members[i], members[j]), k = a·nz + p; the kernels of engine slice
/// p·slice_members + member[a], kernel κ at ((slice·K + κ)·k1 + d1 + n1 − 1)·k2 + d2 + n2 − 1, k_i = 2n_i − 1.
__global__ void assemble_local_group(double2* __restrict__ factors, const int* __restrict__ members, int n,
                                     const double2* __restrict__ green, const double2* __restrict__ kernels,
                                     const int* __restrict__ member, int slice_members, int nm, int nz, int n1, int n2,
                                     int kernels_per_slice, DeviceTerms source, DeviceTerms d, std::size_t total) {
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int i = int(e % n), j = int(e / n % n);
  const std::size_t k = e / (std::size_t(n) * n);
  const int a = int(k / nz), p = int(k % nz);
  const int ci = members[i] / nm, m = members[i] % nm, cj = members[j] / nm, mp = members[j] % nm;
  const std::size_t k1 = 2 * n1 - 1, k2 = 2 * n2 - 1;
  const std::size_t at = std::size_t(m / n2 - mp / n2 + n1 - 1) * k2 + std::size_t(m % n2 - mp % n2 + n2 - 1);
  const double2* slice = kernels + (std::size_t(p) * slice_members + member[a]) * kernels_per_slice * k1 * k2;
  const double2* g = green + ((std::size_t(a) * nm + m) * nz + p) * 9 + ci * 3;  // row ci of G_pp(m)
  double2 v = {i == j ? 1.0 : 0.0, 0.0};
  for (int t = 0; t < d.count; ++t)
    if (d.output[t] == ci && d.input[t] == cj) {
      const double2 c = slice[std::size_t(d.kernel[t]) * k1 * k2 + at];
      v = {v.x + c.x, v.y + c.y};
    }
  for (int t = 0; t < source.count; ++t)
    if (source.input[t] == cj) v = multiply_add(v, g[source.output[t]], slice[std::size_t(source.kernel[t]) * k1 * k2 + at]);
  factors[e] = v;
}

template <class Real>
class DevicePreconditioner final : public Preconditioner<Real> {
 public:
  using typename Preconditioner<Real>::Complex;
  using V = Complex2<Real>;

  /// L_p assembled on the host (its groups uploaded; the tests' random matrices come this way).
  DevicePreconditioner(const AveragedSweep& averaged, const LocalMatrices& local, const std::vector<int>& rhs_incidence)
      : DevicePreconditioner(averaged, rhs_incidence, local.matrices.empty()) {
    GS_EXPECTS(local.incidences == na_ && local.orders == nm_ && local.slices == nz_,
            "device preconditioner: the averaged and local parts disagree in size");
    if (!averaged_only_) {
      const std::size_t n = local.n(), count = local.count();
      for_each_group(coupled_components(local), [&](const std::vector<int>& members) {
        const std::size_t ng = members.size();
        std::vector<std::complex<double>> sub(ng * ng * count);
        for (std::size_t k = 0; k < count; ++k)
          for (std::size_t j = 0; j < ng; ++j)
            for (std::size_t i = 0; i < ng; ++i)
              sub[(k * ng + j) * ng + i] = local.matrices[(k * n + std::size_t(members[j])) * n + std::size_t(members[i])];
        return invert_on_device<V>(sub, ng, count, [&](auto largest, auto pivots) { expect_regular_local(largest, pivots, nz_); });
      });
      finish_local(local.averaged);
    }
    // The inversions ran on this thread's default stream; apply uses the problem's: wait for the former
    // (alone: not for other workers sharing the device).
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));
  }

  /// L_p assembled here from its parts: only the kernels, G_pp and L̄ cross the bus (the dense L_p was
  /// (3·orders)² complex128 per slice and incidence: 430 MB per wavelength of configs/default.yaml).
  DevicePreconditioner(const AveragedSweep& averaged, const LocalParts& local, const std::vector<int>& rhs_incidence)
      : DevicePreconditioner(averaged, rhs_incidence, false) {
    GS_EXPECTS(local.incidences == na_ && local.orders == nm_ && local.slices == nz_ && int(local.member.size()) == na_ &&
                   local.kernels.size() == std::size_t(nz_) * local.members * local.kernels_per_slice *
                                               (2 * local.n1 - 1) * (2 * local.n2 - 1) &&
                   local.green.size() == std::size_t(na_) * nm_ * nz_ * 9,
               "device preconditioner: the averaged and local parts disagree in size");
    const DeviceBuffer<double2> green = upload_complex128(local.green), kernels = upload_complex128(local.kernels);
    DeviceBuffer<int> member(local.member.size());
    member.upload(local.member);
    const DeviceTerms source = device_terms(local.source), d = device_terms(local.d);
    const std::size_t count = std::size_t(na_) * nz_;
    for_each_group(local.groups, [&](const std::vector<int>& members) {
      const std::size_t ng = members.size(), total = ng * ng * count;
      DeviceBuffer<int> at(ng);
      at.upload(members);
      DeviceBuffer<double2> factors(total);
      assemble_local_group<<<unsigned((total + 255) / 256), 256, 0, cudaStreamPerThread>>>(
          factors.data(), at.data(), int(ng), green.data(), kernels.data(), member.data(), local.members, nm_, nz_,
          local.n1, local.n2, local.kernels_per_slice, source, d, total);
      GS_CUDA_CHECK_LAUNCH();
      return invert_on_device<V>(factors, ng, count, [&](auto largest, auto pivots) { expect_regular_local(largest, pivots, nz_); });
    });
    finish_local(local.averaged);
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));
  }

  [[nodiscard]] Memory memory() const override { return Memory::device; }

  void apply(const Complex* x, Complex* y, Stream stream) override {
    const auto* in = reinterpret_cast<const V*>(x);
    auto* out = reinterpret_cast<V*>(y);
    V* averaged_out = averaged_only_ ? out : t1_.data();
    const std::size_t lanes = std::size_t(nr_) * nm_;
    apply_averaged_sweep<Real><<<unsigned((lanes + threads - 1) / threads), threads, 0, stream>>>(
        sweep_.data(), rhs_incidence_.data(), in, averaged_out, sweep_scratch_.data(), nm_, nz_, nr_);
    GS_CUDA_CHECK_LAUNCH();
    if (averaged_only_) return;
    const std::size_t elements = std::size_t(nz_) * nr_ * nm_;
    apply_local_averaged<Real><<<unsigned((elements + 255) / 256), 256, 0, stream>>>(local_averaged_.data(), t1_.data(),
                                                                                      t2_.data(), nm_, nz_, nr_, per_);
    GS_CUDA_CHECK_LAUNCH();
    for (const LocalGroup& part : local_) {
      apply_local<Real><<<unsigned(nz_) * unsigned(nr_), threads, std::size_t(part.n) * sizeof(double2), stream>>>(
          part.inverses.data(), part.members.data(), t2_.data(), out, part.n, nm_, nz_, nr_, per_);
      GS_CUDA_CHECK_LAUNCH();
    }
  }

 private:
  /// What both constructors share: sizes, the rhs's incidences, Ā's sweep (uploaded as it is).
  DevicePreconditioner(const AveragedSweep& averaged, const std::vector<int>& rhs_incidence, bool averaged_only)
      : nm_(averaged.orders), nz_(averaged.slices), na_(averaged.incidences), nr_(int(rhs_incidence.size())),
        averaged_only_(averaged_only) {
    per_ = na_ > 0 ? nr_ / na_ : 0;
    GS_EXPECTS(per_ >= 1 && per_ <= 2 && per_ * na_ == nr_,
            "device preconditioner: expects one or two right-hand sides per incidence");
    for (int r = 0; r < nr_; ++r)
      GS_EXPECTS(rhs_incidence[r] == r / per_, "device preconditioner: right-hand sides must be grouped by incidence");
    // Uploads on this thread's default stream (DeviceBuffer's copies), like the inversions.
    sweep_ = upload_complex128(averaged.values);
    rhs_incidence_ = DeviceBuffer<int>(rhs_incidence.size());
    rhs_incidence_.upload(rhs_incidence);
    sweep_scratch_ = DeviceBuffer<double2>(std::size_t(nz_) * 3 * nr_ * nm_);
  }

  /// Each group of components that no element couples (y | x, z without conical incidence in 1D) is
  /// inverted alone: (1/27 + 8/27) of the LU flops and 5/9 of the memory of the whole 3·nm blocks.
  /// invert(members) returns the group's inverses; apply_local gathers one group's values of a block into
  /// shared memory, so the largest group must fit one block's.
  template <class Invert>
  void for_each_group(const std::array<int, 3>& group, Invert invert) {
    for (int g = 0; g < 3; ++g) {
      std::vector<int> members;  // the group's unknowns c·nm + m within a block, ascending
      for (int c = 0; c < 3; ++c)
        if (group[c] == g)
          for (int m = 0; m < nm_; ++m) members.push_back(c * nm_ + m);
      if (members.empty()) continue;
      GS_EXPECTS(members.size() * sizeof(double2) <= 48 * 1024,
                 "device preconditioner: " + std::to_string(nm_) + " orders exceed the shared memory of one block (" +
                     std::to_string(members.size()) + " coupled unknowns per slice); use preconditioner: none");
      LocalGroup part;
      part.n = int(members.size());
      part.inverses = invert(members);
      part.members = DeviceBuffer<int>(members.size());
      part.members.upload(members);
      local_.push_back(std::move(part));
    }
  }

  void finish_local(const std::vector<std::complex<double>>& averaged) {
    local_averaged_ = upload_complex128(averaged);
    const std::size_t vector = std::size_t(nz_) * nr_ * 3 * nm_;
    t1_ = DeviceBuffer<V>(vector);
    t2_ = DeviceBuffer<V>(vector);
  }

  int nm_, nz_, na_, nr_, per_ = 0;
  bool averaged_only_ = false;
  DeviceBuffer<double2> sweep_, sweep_scratch_;
  DeviceBuffer<int> rhs_incidence_;
  struct LocalGroup {  // one group of components of every L_p: its inverses and its unknowns in a block
    int n = 0;
    DeviceBuffer<V> inverses;
    DeviceBuffer<int> members;
  };
  std::vector<LocalGroup> local_;
  DeviceBuffer<V> t1_, t2_;
  DeviceBuffer<double2> local_averaged_;
};

constexpr int coarse_threads = 256, coarse_rows_per_block = 32;  // 8 warps, 4 rows each

/// y_c ← A_c⁻¹ x_c: one block per (rhs r = blockIdx.y, coarse_rows_per_block rows); the rhs's coarse
/// vector x_c (n values, gathered from the batched layout) in shared memory, then one warp per row:
/// a dot product of the row (inverses row-major per incidence: row i of incidence a at (a·n + i)·n, so
/// a warp reads consecutive addresses) with x_c, summed in double and reduced by shuffles.
/// Coarse unknown u = (p·3 + comp)·nc + mc sits at (p·nr + r)·3·nm + comp·nm + orders[mc].
template <class Real>
__global__ void __launch_bounds__(coarse_threads)
    apply_coarse(const Complex2<Real>* __restrict__ inverses, const int* __restrict__ orders,
                 const Complex2<Real>* x, Complex2<Real>* y, int n, int nc, int nm, int nr,
                 int per) {
  using V = Complex2<Real>;
  extern __shared__ double2 gathered[];  // [n]
  const int r = blockIdx.y, a = r / per;
  const auto at = [&](int u) {
    const int pc = u / nc;
    return (std::size_t(pc / 3) * nr + r) * 3 * std::size_t(nm) + std::size_t(pc % 3) * nm + orders[u % nc];
  };
  for (int u = threadIdx.x; u < n; u += blockDim.x) {
    const V v = x[at(u)];
    gathered[u] = {double(v.x), double(v.y)};
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int first = int(blockIdx.x) * coarse_rows_per_block, end = min(n, first + coarse_rows_per_block);
  for (int i = first + warp; i < end; i += warps) {
    const V* row = inverses + (std::size_t(a) * n + i) * n;
    double re = 0, im = 0;
    for (int j = lane; j < n; j += 32) {
      const V c = row[j];
      const double2 v = gathered[j];
      re += double(c.x) * v.x - double(c.y) * v.y;
      im += double(c.x) * v.y + double(c.y) * v.x;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      re += __shfl_down_sync(0xffffffffu, re, offset);
      im += __shfl_down_sync(0xffffffffu, im, offset);
    }
    if (lane == 0) y[at(i)] = V{Real(re), Real(im)};
  }
}

/// The coarse preconditioner on the device (make_device_coarse_preconditioner).
template <class Real>
class DeviceCoarsePreconditioner final : public Preconditioner<Real> {
 public:
  using typename Preconditioner<Real>::Complex;
  using V = Complex2<Real>;

  DeviceCoarsePreconditioner(std::unique_ptr<Preconditioner<Real>> averaged, const CoarseMatrices& coarse,
                             const std::vector<int>& rhs_incidence, int orders)
      : averaged_(std::move(averaged)), n_(int(coarse.n())), nc_(int(coarse.orders.size())), nm_(orders),
        nr_(int(rhs_incidence.size())) {
    GS_EXPECTS(averaged_->memory() == Memory::device, "device coarse preconditioner: the outer part is on the host");
    per_ = coarse.incidences > 0 ? nr_ / coarse.incidences : 0;
    GS_EXPECTS(per_ >= 1 && per_ * coarse.incidences == nr_,
               "device coarse preconditioner: expects the same number of right-hand sides per incidence");
    for (int r = 0; r < nr_; ++r)
      GS_EXPECTS(rhs_incidence[r] == r / per_, "device coarse preconditioner: right-hand sides must be grouped by incidence");
    shared_bytes_ = coarse.n() * sizeof(double2);
    GS_EXPECTS(shared_bytes_ <= 48 * 1024, "device coarse preconditioner: " + std::to_string(coarse.n()) +
                                               " coarse unknowns exceed the shared memory of one block");
    // A_c is column-major; the kernel reads A_c⁻¹ row-major, which is the column-major (A_cᵀ)⁻¹: invert
    // the transposes (the same pivots' magnitudes up to the pivoting order, the same singularity test).
    const std::size_t n = coarse.n();
    std::vector<std::complex<double>> transposed(coarse.matrices.size());
    for (std::size_t a = 0; a < std::size_t(coarse.incidences); ++a)
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = 0; i < n; ++i) transposed[(a * n + i) * n + j] = coarse.matrices[(a * n + j) * n + i];
    inverses_ = invert_on_device<V>(transposed, n, std::size_t(coarse.incidences),
                                    [](auto largest, auto pivots) { expect_regular_coarse(largest, pivots); });
    orders_ = DeviceBuffer<int>(coarse.orders.size());
    orders_.upload(coarse.orders);
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));  // the inversion ran on this thread's default stream
  }

  [[nodiscard]] Memory memory() const override { return Memory::device; }

  void apply(const Complex* x, Complex* y, Stream stream) override {
    averaged_->apply(x, y, stream);  // every order, then the coarse ones overwritten (same stream)
    const dim3 grid(unsigned((n_ + coarse_rows_per_block - 1) / coarse_rows_per_block), unsigned(nr_));
    apply_coarse<Real><<<grid, coarse_threads, shared_bytes_, stream>>>(
        inverses_.data(), orders_.data(), reinterpret_cast<const V*>(x), reinterpret_cast<V*>(y), n_, nc_, nm_, nr_, per_);
    GS_CUDA_CHECK_LAUNCH();
  }

 private:
  std::unique_ptr<Preconditioner<Real>> averaged_;
  int n_, nc_, nm_, nr_, per_ = 0;
  std::size_t shared_bytes_ = 0;
  DeviceBuffer<V> inverses_;
  DeviceBuffer<int> orders_;
};

}  // namespace

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_coarse_preconditioner(std::unique_ptr<Preconditioner<Real>> averaged,
                                                                        const CoarseMatrices& coarse,
                                                                        std::vector<int> rhs_incidence, int orders) {
  return std::make_unique<DeviceCoarsePreconditioner<Real>>(std::move(averaged), coarse, rhs_incidence, orders);
}
template std::unique_ptr<Preconditioner<float>> make_device_coarse_preconditioner<float>(
    std::unique_ptr<Preconditioner<float>>, const CoarseMatrices&, std::vector<int>, int);
template std::unique_ptr<Preconditioner<double>> make_device_coarse_preconditioner<double>(
    std::unique_ptr<Preconditioner<double>>, const CoarseMatrices&, std::vector<int>, int);

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_preconditioner(const AveragedSweep& averaged,
                                                                 const LocalMatrices& local,
                                                                 std::vector<int> rhs_incidence) {
  return std::make_unique<DevicePreconditioner<Real>>(averaged, local, rhs_incidence);
}
template std::unique_ptr<Preconditioner<float>> make_device_preconditioner<float>(const AveragedSweep&,
                                                                                  const LocalMatrices&,
                                                                                  std::vector<int>);
template std::unique_ptr<Preconditioner<double>> make_device_preconditioner<double>(const AveragedSweep&,
                                                                                    const LocalMatrices&,
                                                                                    std::vector<int>);

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_preconditioner(const AveragedSweep& averaged, const LocalParts& local,
                                                                 std::vector<int> rhs_incidence) {
  return std::make_unique<DevicePreconditioner<Real>>(averaged, local, rhs_incidence);
}
template std::unique_ptr<Preconditioner<float>> make_device_preconditioner<float>(const AveragedSweep&, const LocalParts&,
                                                                                  std::vector<int>);
template std::unique_ptr<Preconditioner<double>> make_device_preconditioner<double>(const AveragedSweep&,
                                                                                    const LocalParts&, std::vector<int>);

}  // namespace gratingsim::physics
