// The sweep preconditioner P = A⁻¹ (sweep_preconditioner.hpp) on the device.
//
// Set-up: the host builds the z-local inputs (sweep_inputs without the dense parts: the row coefficients,
// Ẽ± and ρ_{N−1} per group) in complex128 and uploads them with the kernels; assemble_group builds L'_p, Φ_p
// and W Π⁺ C_p here; the recursion runs here, from the bottom slice up, in complex128, each step over the groups of equal shape (n, h), the kernels batched over them:
//   Ẽ⁺ρ (zgemm), N = L' + (Ẽ⁺ρ)Φ (zgemm, into L'), largest |N_ij| (kernel), N⁻¹ and the smallest
//   pivot (invert_batched, device_inverse.hpp), K = N⁻¹Ẽ⁺, H = N⁻¹(Ẽ⁺ρ) + N⁻¹Ẽ⁻, Γ = W Π⁺ C + ρΦ (zgemm,
//   into the W Π⁺ C), ρ ← ρ − ΓH (zgemm), ρ ← S ρ S (kernel),
// three kernels per slice and shape and nine cuBLAS zgemm per group (two of them form the application's
// transfers T_p = I − Γ_p K_p and U_p = I − Φ_p H_p), each shape on a lane of its own (the first on the calling
// thread's default stream, each further one issued by a host thread of its own). Within a uniform run
// (run_bottoms: L'_p, Φ_p and W Π⁺ C_p the same in every slice, a layer whose content does not vary with z) of at
// least woodbury_least_run slices, for groups with h < n (woodbury_bottoms), N_p = L' + Ẽ⁺ρ_pΦ is a rank-h
// update of one matrix, and Woodbury's identity leaves one h × h inverse per slice
// instead of the n × n one (docs/solver.md §6.3): at the run's bottom slice, once,
//   A = L'⁻¹, B = AẼ⁺, E = AẼ⁻, C_m = ΦA, D_m = ΦB, I − F_m = I − ΦE;
// per slice X = (I + ρD_m)⁻¹ (its pivots tested as N's), K = BX, BQ = Kρ, N⁻¹ = A − BQ C_m,
// H = Kρ + E − BQ F_m = E + BQ (I − F_m); then Γ, T, U and ρ as in the direct form. (N = L'(I + BρΦ), so N is
// singular exactly where I + ρD_m is; where a run's L' is singular the whole set-up is redone in the direct
// form.) The application reads the same matrices either way. No host round trip
// until the singularity test at the end (the host's: smallest pivot against largest element, per group
// and slice). The matrices stay in complex128 also for complex64 solves: rounded to complex64, the
// preconditioned operator of validation/peers' thin metal at M = 60 (ε = −20 + 1.5i, p) was too far
// from the identity for GMRES(100) to converge in 3000 iterations (call C of session 12).
// Application: five launches on the problem's stream. The sweep up (v_p = N_p⁻¹ b_p − K_p g_p, then
// g_{p−1} = s_p (g_p + Γ_p v_p), from the bottom slice) and down (x_p = v_p − H_p a_p, then
// a_{p+1} = s_{p+1} (a_p + Φ_p x_p)) are rewritten so that only h × h products stay serial:
//   w_p = N_p⁻¹ b_p, c_p = Γ_p w_p                 every slice at once (local_solves)
//   g_{p−1} = s_p (T_p g_p + c_p),  T_p = I − Γ_p K_p     serial, a block per (rhs, group) (sweep_amplitudes)
//   v_p = w_p − K_p g_p, d_p = Φ_p v_p              every slice at once (gather_up)
//   a_{p+1} = s_{p+1} (U_p a_p + d_p),  U_p = I − Φ_p H_p  serial (sweep_amplitudes)
//   x_p = v_p − H_p a_p                            every slice at once (finish)
// T_p and U_p are the slice's transfer of the up- and down-going amplitudes with everything below (above)
// it answering, bounded as ρ is; the set-up forms them after the slice's other matrices. The serial chain
// thereby reads 2h² numbers per slice instead of n² + 4nh (thin metal in p, n = 2h: 12× less), and the
// parallel phases fill the device. (Until session 25 one launch, a block per (rhs, group), read every slice's
// matrices through one SM: 1.14 ms an application on an H200 at n = 242, 32 slices; now 0.3 ms.)
// Each product (block_product) reads a slice matrix column-major, a warp's lanes over 32 consecutive rows
// (consecutive addresses) and the 32 warps over slices of the columns, so a thread's loads are few and
// independent; the vectors sit in shared memory in complex128, every product sums in complex128, and the
// intermediate vectors (w, v; c, d; g, a) live in a complex128 workspace. Every block's sum order is fixed,
// so a right-hand side's result does not depend on the others in its batch. (One thread per row, each
// summing its whole row, was measured first: on si_lines_metrology's 72 slices at n = 82 the Krylov phase
// it preconditioned took as long as averaged's 45× more iterations, session 12.)
#include <algorithm>
#include <exception>
#include <future>
#include <complex>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/device_buffer.hpp"
#include "core/device_complex.cuh"
#include "physics/device.hpp"
#include "physics/device_dense.cuh"
#include "physics/device_inverse.hpp"
#include "physics/sweep_preconditioner.hpp"

namespace gratingsim::physics {
namespace {

constexpr int sweep_threads = 256;

/// A group (SweepGroup) as the kernel reads it.
struct DeviceGroup {
  int nc = 0, np = 0;
  int components[3] = {0, 0, 0};
  std::size_t matrices = 0, gains = 0;
  std::size_t transfers = 0;  ///< offset of T_p, U_p (h × h per slice)
};

/// The application's block: 32 warps (and the products' loops unrolled by 4) keep enough loads in flight on
/// its one SM; 8 warps read the slice matrices 3.2× slower (session 19, H100: thin metal M = 120, Krylov
/// phase of one wavelength 97 → 30 ms).
constexpr int apply_threads = 1024;
constexpr int sweep_warps = apply_threads / 32;

/// For every row i < rows: store(i, Σ_j M(i, j) v[j]), M column-major rows × columns in complex128, by the
/// whole block: lanes over 32 consecutive rows (a warp reads consecutive addresses), the warps over
/// slices of the columns (a slice's loads are independent: latency overlaps), the warps' partial sums
/// reduced through `partial` ([sweep_warps][32], shared); `store` runs in warp 0. Every thread must call
/// it; it ends synchronised, the stores visible to the block.
template <class Store>
__device__ void block_product(const double2* __restrict__ matrix, int rows, int columns, const double2* v,
                              double2* partial, Store store) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int chunk = (columns + sweep_warps - 1) / sweep_warps, first = warp * chunk,
            last = min(columns, first + chunk);
  for (int tile = 0; tile < rows; tile += 32) {
    const int i = tile + lane;
    double re = 0, im = 0;
    if (i < rows)
#pragma unroll 4
      for (int j = first; j < last; ++j) {
        const double2 c = matrix[std::size_t(j) * rows + i], w = v[j];
        re += c.x * w.x - c.y * w.y;
        im += c.x * w.y + c.y * w.x;
      }
    partial[warp * 32 + lane] = {re, im};
    __syncthreads();
    if (warp == 0 && i < rows) {
      double2 sum = {0, 0};
      for (int w = 0; w < sweep_warps; ++w) {
        sum.x += partial[w * 32 + lane].x;
        sum.y += partial[w * 32 + lane].y;
      }
      store(i, sum);
    }
    __syncthreads();
  }
}

__device__ double2 times(double2 a, double2 b) { return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; }

/// What every launch of the application shares: the groups (first_group[a] .. first_group[a + 1] − 1 those of
/// incidence a), each rhs's incidence, the workspace (per rhs and group slot, work_stride complex128 numbers), the
/// orders, slices, right-hand sides and group slots per rhs (the grid's).
struct ApplyArguments {
  const DeviceGroup* groups;
  const int* first_group;
  const int* rhs_incidence;
  double2* work;
  std::size_t work_stride;
  int nm, nz, nr, slots;
};

/// Where a block of the application stands: its right-hand side r, incidence a, group k and its workspace:
/// W (nz·n: w_p, then v_p), D (nz·h: c_p, then d_p), A (nz·h: g_p, then a_p), complex128.
struct ApplyBlock {
  int r, a, k, n, h;
  DeviceGroup group;
  double2 *w, *d, *amplitude;
};

/// The block of rhs r and group slot `slot`; false where the rhs's incidence has fewer groups than the slots.
__device__ bool locate(ApplyBlock& b, const ApplyArguments& args, int r, int slot) {
  b.r = r;
  b.a = args.rhs_incidence[r];
  b.k = args.first_group[b.a] + slot;
  if (b.k >= args.first_group[b.a + 1]) return false;
  b.group = args.groups[b.k];
  b.n = b.group.nc * args.nm;
  b.h = b.group.np * args.nm;
  b.w = args.work + (std::size_t(r) * args.slots + slot) * args.work_stride;
  b.d = b.w + std::size_t(args.nz) * b.n;
  b.amplitude = b.d + std::size_t(args.nz) * b.h;
  return true;
}

/// x, y: batched layout, element (slice p, rhs r, component c, order m) at (p·nr + r)·3·nm + c·nm + m.
__device__ std::size_t element(const ApplyBlock& b, const ApplyArguments& args, int p, int i) {
  const int nm = args.nm;
  return (std::size_t(p) * args.nr + b.r) * 3 * std::size_t(nm) + std::size_t(b.group.components[i / nm]) * nm + i % nm;
}

/// w_p = N_p⁻¹ b_p and c_p = Γ_p w_p (p > 0); a block per (slice, rhs, group slot).
template <class Real>
__global__ void __launch_bounds__(apply_threads)
    local_solves(ApplyArguments args, const double2* __restrict__ inverse, const double2* __restrict__ up,
                 const Complex2<Real>* x) {
  extern __shared__ double2 shared[];  // b [n], w [n], partial sums [sweep_warps·32]
  ApplyBlock blk;
  const int p = int(blockIdx.x);
  if (!locate(blk, args, int(blockIdx.y), int(blockIdx.z))) return;
  const int n = blk.n, h = blk.h;
  double2 *b = shared, *w = b + n, *partial = w + n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const Complex2<Real> e = x[element(blk, args, p, i)];
    b[i] = {double(e.x), double(e.y)};
  }
  __syncthreads();
  block_product(inverse + blk.group.matrices + std::size_t(p) * n * n, n, n, b, partial, [&](int i, double2 t) {
    w[i] = t;
    blk.w[std::size_t(p) * n + i] = t;
  });
  if (p > 0)
    block_product(up + blk.group.gains + std::size_t(p) * n * h, h, n, w, partial,
                  [&](int i, double2 t) { blk.d[std::size_t(p) * h + i] = t; });
}

/// The serial recursion a_{next} = s (T_p a_p + source_p) over the slices in `direction` (−1: up, from the
/// bottom slice, T_p, s_p; +1: down, from the top, U_p, s_{p+1}), storing every a_p (a_first = 0) in A; a
/// block per (rhs, group slot).
__global__ void __launch_bounds__(apply_threads)
    sweep_amplitudes(ApplyArguments args, const double2* __restrict__ transfers, const double2* __restrict__ step,
                     int direction) {
  extern __shared__ double2 shared[];  // a [h], next [h], partial sums [sweep_warps·32]
  ApplyBlock blk;
  if (!locate(blk, args, int(blockIdx.x), int(blockIdx.y))) return;
  const int h = blk.h, nm = args.nm, nz = args.nz;
  double2 *a = shared, *next = a + h, *partial = next + h;
  for (int i = threadIdx.x; i < h; i += blockDim.x) a[i] = double2{0, 0};
  __syncthreads();
  const std::size_t transfer_size = std::size_t(h) * h;
  for (int q = 0; q < nz; ++q) {
    const int p = direction < 0 ? nz - 1 - q : q;
    for (int i = threadIdx.x; i < h; i += blockDim.x) blk.amplitude[std::size_t(p) * h + i] = a[i];
    if (q + 1 == nz) break;
    const int s = direction < 0 ? p : p + 1;  // the step between slice p and the next
    const double2* t = transfers + blk.group.transfers + (std::size_t(p) * 2 + (direction < 0 ? 0 : 1)) * transfer_size;
    block_product(t, h, h, a, partial, [&](int i, double2 c) {
      const double2 source = blk.d[std::size_t(p) * h + i];
      next[i] = times(step[(std::size_t(blk.a) * nz + s) * nm + i % nm], {c.x + source.x, c.y + source.y});
    });
    double2* swap = a;
    a = next;
    next = swap;
  }
}

/// v_p = w_p − K_p g_p and d_p = Φ_p v_p (p + 1 < nz); a block per (slice, rhs, group slot).
__global__ void __launch_bounds__(apply_threads)
    gather_up(ApplyArguments args, const double2* __restrict__ gain_g, const double2* __restrict__ down) {
  extern __shared__ double2 shared[];  // g [h], v [n], partial sums [sweep_warps·32]
  ApplyBlock blk;
  const int p = int(blockIdx.x);
  if (!locate(blk, args, int(blockIdx.y), int(blockIdx.z))) return;
  const int n = blk.n, h = blk.h;
  double2 *g = shared, *v = g + h, *partial = v + n;
  for (int i = threadIdx.x; i < h; i += blockDim.x) g[i] = blk.amplitude[std::size_t(p) * h + i];
  __syncthreads();
  const std::size_t at = blk.group.gains + std::size_t(p) * n * h;
  block_product(gain_g + at, n, h, g, partial, [&](int i, double2 c) {
    const double2 w = blk.w[std::size_t(p) * n + i];
    v[i] = {w.x - c.x, w.y - c.y};
    blk.w[std::size_t(p) * n + i] = v[i];
  });
  if (p + 1 < args.nz)
    block_product(down + at, h, n, v, partial, [&](int i, double2 c) { blk.d[std::size_t(p) * h + i] = c; });
}

/// x_p = v_p − H_p a_p into y; a block per (slice, rhs, group slot).
template <class Real>
__global__ void __launch_bounds__(apply_threads)
    finish(ApplyArguments args, const double2* __restrict__ gain_a, Complex2<Real>* y) {
  extern __shared__ double2 shared[];  // a [h], partial sums [sweep_warps·32]
  ApplyBlock blk;
  const int p = int(blockIdx.x);
  if (!locate(blk, args, int(blockIdx.y), int(blockIdx.z))) return;
  const int n = blk.n, h = blk.h;
  double2 *a = shared, *partial = a + h;
  for (int i = threadIdx.x; i < h; i += blockDim.x) a[i] = blk.amplitude[std::size_t(p) * h + i];
  __syncthreads();
  block_product(gain_a + blk.group.gains + std::size_t(p) * n * h, n, h, a, partial, [&](int i, double2 c) {
    const double2 v = blk.w[std::size_t(p) * n + i];
    y[element(blk, args, p, i)] = Complex2<Real>{Real(v.x - c.x), Real(v.y - c.y)};
  });
}

/// The block's reduction of each thread's `value` by `combine`, returned to thread 0.
template <class Combine>
__device__ double block_reduce(double value, Combine combine) {
  __shared__ double partial[sweep_threads];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] = combine(partial[threadIdx.x], partial[threadIdx.x + s]);
    __syncthreads();
  }
  return partial[0];
}

/// largest[k] = max |A_ij| of the n×n matrix matrices[k] (infinite where an element is not finite); blocks
/// (x) over a matrix's elements, y over the matrices; *largest[k] must hold +0 before. Non-negative doubles
/// order as their bits do, so the blocks combine by an integer atomicMax, in any order to the same value.
/// (A block per matrix took 72 µs at n = 242 on an H200, more than a step's zgemms together.)
__global__ void __launch_bounds__(sweep_threads)
    largest_of(const cuDoubleComplex* const* matrices, int n, double* const* largest) {
  const cuDoubleComplex* a = matrices[blockIdx.y];
  double m = 0;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < std::size_t(n) * n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const double v = hypot(a[i].x, a[i].y);
    m = isfinite(v) ? fmax(m, v) : INFINITY;
  }
  m = block_reduce(m, [](double x, double y) { return fmax(x, y); });
  if (threadIdx.x == 0)
    atomicMax(reinterpret_cast<unsigned long long*>(largest[blockIdx.y]),
              static_cast<unsigned long long>(__double_as_longlong(m)));
}

/// ρ_k(i, j) ← s_k(i) ρ_k(i, j) s_k(j) for the h×h matrices rho[k], s_k(i) = steps[k][i % orders]; a thread
/// per element, blocks (x) over a matrix, y over the matrices.
__global__ void __launch_bounds__(sweep_threads)
    scale_by_steps(cuDoubleComplex* const* rho, const double2* const* steps, int h, int orders) {
  const int e = int(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= h * h) return;
  cuDoubleComplex* r = rho[blockIdx.y];
  const double2* s = steps[blockIdx.y];
  const double2 si = s[(e % h) % orders], sj = s[(e / h) % orders];
  const double2 f = {si.x * sj.x - si.y * sj.y, si.x * sj.y + si.y * sj.x};
  const cuDoubleComplex v = r[e];
  r[e] = {f.x * v.x - f.y * v.y, f.x * v.y + f.y * v.x};
}

/// Every h×h matrix of `matrices` (count of them, one after another) set to the identity.
__global__ void set_identities(double2* matrices, std::size_t count, int h) {
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= count * h * h) return;
  const std::size_t within = e % (std::size_t(h) * h);
  matrices[e] = {within % (std::size_t(h) + 1) == 0 ? 1.0 : 0.0, 0.0};
}

/// matrices[k] += I for the h×h matrices of the list; a thread per diagonal element, y over the matrices.
__global__ void __launch_bounds__(sweep_threads) add_identities(cuDoubleComplex* const* matrices, int h) {
  const int i = int(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < h) matrices[blockIdx.y][std::size_t(i) * (h + 1)].x += 1.0;
}

/// One group's shape and where its rows and kernels are, for assemble_group.
struct AssemblyGroup {
  int n, h, nm, nz, n1, n2, members, member;
  int component[3];  ///< the group's components c_i (unused entries −1)
  int index[3];      ///< a component's index i in the group, −1 outside it
  std::size_t kernel_count, kernel_size;
};

/// L'_p, Φ_p and W Π⁺ C_p of one group for every slice p from the row coefficients, the formula of
/// SweepInputs, one thread per element: the L' elements (nz·n², local, column-major per slice) first, then
/// Φ (nz·h·n, down) and W Π⁺ C (nz·h·n, up). Terms are summed in the host's order (J terms, then D terms).
__global__ void assemble_group(double2* __restrict__ local, double2* __restrict__ down, double2* __restrict__ up,
                               const double2* __restrict__ self_rows, const double2* __restrict__ down_rows,
                               const double2* __restrict__ up_rows, const double2* __restrict__ kernels,
                               AssemblyGroup g, DeviceTerms source, DeviceTerms d) {
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t square = std::size_t(g.n) * g.n, oblong = std::size_t(g.h) * g.n;
  if (e >= g.nz * (square + 2 * oblong)) return;
  const bool dense_local = e < g.nz * square;
  const std::size_t rest = dense_local ? e : (e - g.nz * square) % (g.nz * oblong);
  const bool is_up = !dense_local && (e - g.nz * square) >= g.nz * oblong;
  const std::size_t size = dense_local ? square : oblong;
  const int rows = dense_local ? g.n : g.h;
  const int p = int(rest / size), i = int(rest % size % rows), j = int(rest % size / rows);
  const int m = i % g.nm, cj = j / g.nm, mp = j % g.nm;
  const double2* slice = kernels + (std::size_t(p) * g.members + g.member) * g.kernel_count * g.kernel_size;
  const std::size_t offset = std::size_t(m / g.n2 - mp / g.n2 + g.n1 - 1) * (2 * g.n2 - 1) + (m % g.n2 - mp % g.n2 + g.n2 - 1);
  const double2* row = dense_local ? self_rows + (std::size_t(p) * g.n + i) * 3
                                   : (is_up ? up_rows : down_rows) + (std::size_t(p) * g.h + i) * 3;
  double2 v = {dense_local && i == j ? 1.0 : 0.0, 0.0};
  for (int t = 0; t < source.count; ++t)
    if (source.input[t] == g.component[cj] && g.index[source.output[t]] >= 0) {
      const double2 c = row[source.output[t]], k = slice[std::size_t(source.kernel[t]) * g.kernel_size + offset];
      v = {v.x + c.x * k.x - c.y * k.y, v.y + c.x * k.y + c.y * k.x};
    }
  if (dense_local)
    for (int t = 0; t < d.count; ++t)
      if (d.output[t] == g.component[i / g.nm] && d.input[t] == g.component[cj]) {
        const double2 k = slice[std::size_t(d.kernel[t]) * g.kernel_size + offset];
        v = {v.x + k.x, v.y + k.y};
      }
  (dense_local ? local : is_up ? up : down)[rest] = v;
}

/// A stream and a cuBLAS handle bound to it.
struct SideLane {
  cudaStream_t stream;
  cublasHandle_t handle;
};

/// Side lane `index` ≥ 1 of the calling thread on the current device: a non-blocking stream and a cuBLAS handle
/// of its own, made on first use and kept for the thread's life (as CublasHandle's).
SideLane side_lane(int index) {
  struct Lanes {
    std::vector<SideLane> lanes;
    Lanes() = default;
    Lanes(const Lanes&) = delete;
    Lanes& operator=(const Lanes&) = delete;
    ~Lanes() {  // no throw from a destructor
      for (const SideLane& lane : lanes) {
        cublasDestroy(lane.handle);
        cudaStreamDestroy(lane.stream);
      }
    }
  };
  thread_local std::map<int, Lanes> by_device;
  int device = 0;
  GS_CUDA_TRY(cudaGetDevice(&device));
  Lanes& mine = by_device[device];
  while (int(mine.lanes.size()) < index) {
    SideLane lane{};
    GS_CUDA_TRY(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking));
    mine.lanes.push_back({lane.stream, nullptr});  // owned from here, handle or not
    GS_CUBLAS_TRY(cublasCreate(&lane.handle));
    mine.lanes.back().handle = lane.handle;
    GS_CUBLAS_TRY(cublasSetStream(lane.handle, lane.stream));
  }
  return mine.lanes[std::size_t(index) - 1];
}

/// lanes[1…] wait for what lanes[0] has enqueued at construction; join() (or the destructor, also when an
/// exception unwinds) makes lanes[0] wait for everything they enqueued since, so that buffers freed in
/// lanes[0]'s order outlive their use. Neither synchronises the host.
class LaneFork {
 public:
  explicit LaneFork(const std::vector<SideLane>& lanes) : lanes_(lanes) {
    if (lanes_.size() < 2) return;
    GS_CUDA_TRY(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
    GS_CUDA_TRY(cudaEventRecord(forked_, lanes_[0].stream));
    for (std::size_t k = 1; k < lanes_.size(); ++k) GS_CUDA_TRY(cudaStreamWaitEvent(lanes_[k].stream, forked_, 0));
  }
  void join() {
    if (joined_ || lanes_.size() < 2) return;
    joined_ = true;
    for (std::size_t k = 1; k < lanes_.size(); ++k) {
      GS_CUDA_TRY(cudaEventRecord(forked_, lanes_[k].stream));
      GS_CUDA_TRY(cudaStreamWaitEvent(lanes_[0].stream, forked_, 0));
    }
  }
  ~LaneFork() {
    if (!joined_ && lanes_.size() >= 2)  // unwinding: join without throwing
      for (std::size_t k = 1; k < lanes_.size(); ++k)
        if (cudaEventRecord(forked_, lanes_[k].stream) == cudaSuccess) cudaStreamWaitEvent(lanes_[0].stream, forked_, 0);
    if (forked_) cudaEventDestroy(forked_);
  }
  LaneFork(const LaneFork&) = delete;
  LaneFork& operator=(const LaneFork&) = delete;

 private:
  const std::vector<SideLane>& lanes_;
  cudaEvent_t forked_ = nullptr;
  bool joined_ = false;
};

/// The sweep's matrices in complex128 on the device, from the inputs (the recursion of
/// sweep_preconditioner.hpp, batched over the groups of equal shape). Throws as the host's sweep_matrices
/// does. Runs on the calling thread's default stream and waits for it (the singularity test's download).
struct DeviceSweepMatrices {
  DeviceBuffer<double2> inverse, gain_g, gain_a, up, down, step;
  DeviceBuffer<double2> transfers;              ///< per group and slice T_p then U_p (h × h each)
  std::vector<std::size_t> transfers_at;        ///< per group, into transfers
};

DeviceSweepMatrices device_sweep_matrices(const SweepInputs& in, bool woodbury_allowed = true) {
  const int nz = in.slices, nm = in.orders, ng = int(in.groups.size());

  DeviceSweepMatrices out;
  DeviceBuffer<double2> e_plus = upload_complex128(in.e_plus), e_minus = upload_complex128(in.e_minus),
                        rho = upload_complex128(in.rho);
  out.step = upload_complex128(in.step);
  // L', Φ and W Π⁺ C assembled here from the row coefficients and the kernels (only these cross the bus).
  std::size_t local_size = 0, gain_size = 0;
  for (const SweepGroup& g : in.groups) {
    local_size += g.n(nm) * g.n(nm) * std::size_t(nz);
    gain_size += g.n(nm) * g.h(nm) * std::size_t(nz);
  }
  DeviceBuffer<double2> local(local_size), source_up(gain_size);
  out.down = DeviceBuffer<double2>(gain_size);
  {
    const DeviceBuffer<double2> self_rows = upload_complex128(in.self_rows), down_rows = upload_complex128(in.down_rows),
                                up_rows = upload_complex128(in.up_rows), kernels = upload_complex128(in.kernels);
    const DeviceTerms source = device_terms(in.source_terms), d = device_terms(in.d_terms);
    for (const SweepGroup& group : in.groups) {
      AssemblyGroup a{int(group.n(nm)), int(group.h(nm)), nm, nz, in.n1, in.n2, in.members,
                      in.member[std::size_t(group.incidence)], {-1, -1, -1}, {-1, -1, -1}, std::size_t(in.kernel_count),
                      in.kernel_size};
      for (std::size_t c = 0; c < group.components.size(); ++c) {
        a.component[c] = group.components[c];
        a.index[group.components[c]] = int(c);
      }
      const std::size_t elements = std::size_t(nz) * (std::size_t(a.n) * a.n + 2 * std::size_t(a.h) * a.n);
      assemble_group<<<unsigned((elements + sweep_threads - 1) / sweep_threads), sweep_threads, 0, cudaStreamPerThread>>>(
          local.data() + group.matrices, out.down.data() + group.gains, source_up.data() + group.gains,
          self_rows.data() + group.rows, down_rows.data() + group.amplitude_rows, up_rows.data() + group.amplitude_rows,
          kernels.data(), a, source, d);
      GS_CUDA_CHECK_LAUNCH();
    }
  }  // the row and kernel buffers are freed in stream order after the assembly
  out.inverse = DeviceBuffer<double2>(local_size);
  out.gain_g = DeviceBuffer<double2>(gain_size);
  out.gain_a = DeviceBuffer<double2>(gain_size);
  std::size_t transfer_size = 0;
  for (const SweepGroup& g : in.groups) {
    out.transfers_at.push_back(transfer_size);
    transfer_size += 2 * g.h(nm) * g.h(nm) * std::size_t(nz);
  }
  out.transfers = DeviceBuffer<double2>(transfer_size);
  for (std::size_t k = 0; k < in.groups.size(); ++k) {  // T_p = I − Γ_p K_p and U_p = I − Φ_p H_p start as I
    const int h = int(in.groups[k].h(nm));
    const std::size_t count = 2 * std::size_t(nz), elements = count * std::size_t(h) * h;
    set_identities<<<unsigned((elements + sweep_threads - 1) / sweep_threads), sweep_threads, 0, cudaStreamPerThread>>>(
        out.transfers.data() + out.transfers_at[k], count, h);
    GS_CUDA_CHECK_LAUNCH();
  }
  // Per group: Ẽ⁺ρ (n × h); per (group, slice): the largest element and the smallest pivot (of N_p, or in
  // Woodbury's form of I + ρD_m); per (group, bottom slice of a run): those of the run's L'.
  std::size_t e_rho_size = 0;
  std::vector<std::size_t> e_rho_at;
  for (const SweepGroup& g : in.groups) {
    e_rho_at.push_back(e_rho_size);
    e_rho_size += g.n(nm) * g.h(nm);
  }
  DeviceBuffer<double2> e_rho(e_rho_size);
  DeviceBuffer<double> largest{std::size_t(ng) * nz}, smallest{std::size_t(ng) * nz}, layer_largest{std::size_t(ng) * nz},
      layer_smallest{std::size_t(ng) * nz};
  GS_CUDA_TRY(cudaMemsetAsync(largest.data(), 0, largest.size() * sizeof(double), cudaStreamPerThread));  // +0.0
  GS_CUDA_TRY(cudaMemsetAsync(layer_largest.data(), 0, layer_largest.size() * sizeof(double), cudaStreamPerThread));
  // Woodbury's form (the header's, docs/solver.md §6.3) per group and slice: where h < n and the slice lies in a
  // uniform run of at least woodbury_least_run slices. A group's choice depends on its own inputs only, so a
  // member's result does not depend on the members beside it.
  std::vector<std::vector<int>> bottom;  // per group and slice: its run's bottom in Woodbury's form, else −1
  std::vector<std::size_t> layer_at(std::size_t(ng), 0);  // into the layer buffer, per group that takes the form
  std::size_t layer_size = 0;
  for (int k = 0; k < ng; ++k) {
    const SweepGroup& g = in.groups[std::size_t(k)];
    const std::size_t n = g.n(nm), h = g.h(nm);
    bottom.push_back(woodbury_allowed ? woodbury_bottoms(in, std::size_t(k), woodbury_least_run)
                                      : std::vector<int>(std::size_t(nz), -1));
    if (std::all_of(bottom.back().begin(), bottom.back().end(), [](int b) { return b < 0; })) continue;
    layer_at[std::size_t(k)] = layer_size;
    layer_size += n * n + 4 * n * h + 3 * h * h;  // A, B, E, C_m, BQ, D_m, I − F_m, X
  }
  DeviceBuffer<double2> layer(layer_size);
  // Shapes (n, h) and their groups.
  std::map<std::pair<int, int>, std::vector<int>> shapes;
  for (int k = 0; k < ng; ++k)
    shapes[{int(in.groups[std::size_t(k)].n(nm)), int(in.groups[std::size_t(k)].h(nm))}].push_back(k);
  // Every pointer array of every step (slice p, shape, kind), built on the host and uploaded once: the step's
  // lists one after another, each with one pointer per group of the step.
  using Z = cuDoubleComplex;
  std::vector<void*> host_pointers;
  enum class Kind { layer, woodbury, direct };  // a run's set-up at its bottom slice; a slice in either form
  struct Step {
    std::size_t first;  // index of the step's first pointer list in host_pointers
    int n, h, count, shape, p;
    Kind kind;
  };
  enum List { l_eplus, l_eminus, l_rho, l_erho, l_local, l_down, l_inverse, l_gain_g, l_gain_a, l_up, l_largest,
              l_smallest, l_step, l_transfer_up, l_transfer_down, l_layer_inverse, l_b, l_e, l_cm, l_bq, l_dm, l_ifm,
              l_x, l_layer_largest, l_layer_smallest, lists };
  std::vector<Step> steps;  // p from nz − 1 down, shape in map order, kinds in Kind's order
  const auto z = [](DeviceBuffer<double2>& b, std::size_t at) { return static_cast<void*>(b.data() + at); };
  for (int p = nz - 1; p >= 0; --p) {
    int shape_index = 0;
    for (const auto& [shape, members] : shapes) {
      const auto [n, h] = shape;
      for (Kind kind : {Kind::layer, Kind::woodbury, Kind::direct}) {
        std::vector<int> chosen;
        for (int k : members) {
          const int run_bottom = bottom[std::size_t(k)][std::size_t(p)];
          if (kind == Kind::direct ? run_bottom < 0 : run_bottom >= 0 && (kind == Kind::woodbury || run_bottom == p))
            chosen.push_back(k);
        }
        if (chosen.empty()) continue;
        Step st{host_pointers.size(), n, h, int(chosen.size()), shape_index, p, kind};
        for (int list = 0; list < lists; ++list)
          for (int k : chosen) {
            const SweepGroup& g = in.groups[std::size_t(k)];
            const std::size_t mat = g.matrices + std::size_t(p) * n * n, gain = g.gains + std::size_t(p) * n * h,
                              nn = std::size_t(n) * n, nh = std::size_t(n) * h, hh = std::size_t(h) * h,
                              at = layer_at[std::size_t(k)],
                              bottom_slice = std::size_t(k) * nz + std::size_t(std::max(bottom[std::size_t(k)][std::size_t(p)], 0));
            void* ptr = nullptr;
            switch (List(list)) {
              case l_eplus: ptr = z(e_plus, g.edges); break;
              case l_eminus: ptr = z(e_minus, g.edges); break;
              case l_rho: ptr = z(rho, g.rho); break;
              case l_erho: ptr = z(e_rho, e_rho_at[std::size_t(k)]); break;
              case l_local: ptr = z(local, mat); break;
              case l_down: ptr = z(out.down, gain); break;
              case l_inverse: ptr = z(out.inverse, mat); break;
              case l_gain_g: ptr = z(out.gain_g, gain); break;
              case l_gain_a: ptr = z(out.gain_a, gain); break;
              case l_up: ptr = z(source_up, gain); break;
              case l_largest: ptr = largest.data() + std::size_t(k) * nz + p; break;
              case l_smallest: ptr = smallest.data() + std::size_t(k) * nz + p; break;
              case l_step: ptr = z(out.step, (std::size_t(g.incidence) * nz + p) * nm); break;
              case l_transfer_up: ptr = z(out.transfers, out.transfers_at[std::size_t(k)] + 2 * std::size_t(p) * h * h); break;
              case l_transfer_down:
                ptr = z(out.transfers, out.transfers_at[std::size_t(k)] + (2 * std::size_t(p) + 1) * h * h);
                break;
              case l_layer_inverse: ptr = kind == Kind::direct ? nullptr : z(layer, at); break;
              case l_b: ptr = kind == Kind::direct ? nullptr : z(layer, at + nn); break;
              case l_e: ptr = kind == Kind::direct ? nullptr : z(layer, at + nn + nh); break;
              case l_cm: ptr = kind == Kind::direct ? nullptr : z(layer, at + nn + 2 * nh); break;
              case l_bq: ptr = kind == Kind::direct ? nullptr : z(layer, at + nn + 3 * nh); break;
              case l_dm: ptr = kind == Kind::direct ? nullptr : z(layer, at + nn + 4 * nh); break;
              case l_ifm: ptr = kind == Kind::direct ? nullptr : z(layer, at + nn + 4 * nh + hh); break;
              case l_x: ptr = kind == Kind::direct ? nullptr : z(layer, at + nn + 4 * nh + 2 * hh); break;
              case l_layer_largest: ptr = layer_largest.data() + bottom_slice; break;
              case l_layer_smallest: ptr = layer_smallest.data() + bottom_slice; break;
              case lists: break;
            }
            host_pointers.push_back(ptr);
          }
        steps.push_back(st);
      }
      ++shape_index;
    }
  }
  DeviceBuffer<void*> pointers(host_pointers.size());
  pointers.upload(host_pointers);
  // The shapes' recursions are independent (s and p of 1D problems without conical incidence, n = orders and
  // 2·orders): shape 0 runs on this thread's default stream, each further one on a lane of its own forked from
  // it, so that a slice's small inverse overlaps its large one (session 25). Each lane has its own cuBLAS
  // handle and inversion workspace.
  std::vector<SideLane> lanes{{cudaStreamPerThread, CublasHandle::get()}};
  for (std::size_t shape = 1; shape < shapes.size(); ++shape) lanes.push_back(side_lane(int(shape)));
  std::vector<DeviceBuffer<unsigned char>> workspaces;
  for (std::size_t shape = 0; shape < shapes.size(); ++shape) {
    std::size_t bytes = 0;
    for (const Step& st : steps)
      if (st.shape == int(shape)) bytes = std::max(bytes, inverse_workspace_bytes(st.kind == Kind::woodbury ? st.h : st.n, st.count));
    workspaces.emplace_back(bytes);
  }
  LaneFork fork(lanes);  // the side lanes wait for everything enqueued so far; joined when it goes
  const Z one{1, 0}, zero{0, 0}, minus_one{-1, 0};
  const auto run_step = [&](const Step& st) {
    const int n = st.n, h = st.h, b = st.count;
    const cudaStream_t stream = lanes[std::size_t(st.shape)].stream;
    const cublasHandle_t handle = lanes[std::size_t(st.shape)].handle;
    DeviceBuffer<unsigned char>& workspace = workspaces[std::size_t(st.shape)];
    const auto list = [&](List l) { return reinterpret_cast<Z**>(pointers.data() + st.first + std::size_t(l) * b); };
    const auto clist = [&](List l) { return reinterpret_cast<const Z* const*>(list(l)); };
    const auto at = [&](List l, int k) { return static_cast<Z*>(host_pointers[st.first + std::size_t(l) * b + std::size_t(k)]); };
    // C ← α A B + β C for every group, one cuBLAS call per group: cublasZgemmBatched changes the last bits
    // of a product with the batch count (1 × 1 against 5 groups of the shapes (n, h) = (15, 15) and (30, 15),
    // H100, session 20), and a member's result must not depend on the members beside it.
    const auto gemm = [&](int rows, int columns, int inner, const Z* alpha, List a, int lda, List bl, int ldb,
                          const Z* beta, List c, int ldc) {
      for (int k = 0; k < b; ++k)
        GS_CUBLAS_TRY(cublasZgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, rows, columns, inner, alpha, at(a, k), lda, at(bl, k),
                                  ldb, beta, at(c, k), ldc));
    };
    const auto copy = [&](List from, List to, std::size_t elements) {
      for (int k = 0; k < b; ++k)
        GS_CUDA_TRY(cudaMemcpyAsync(at(to, k), at(from, k), elements * sizeof(Z), cudaMemcpyDeviceToDevice, stream));
    };
    // The largest element of every group's m × m matrix `matrix` into `into`; its inverse by blocked
    // Gauss–Jordan (cuSOLVER's one-matrix LU and getrs in turn were latency-bound, 0.68 ms at n = 242, and
    // cuBLAS's batched ones change bits with the batch), `matrix` overwritten.
    const auto invert = [&](int m, List matrix, List inverse, List into_largest, List into_smallest) {
      const unsigned element_blocks = unsigned((std::size_t(m) * m + sweep_threads - 1) / sweep_threads);
      largest_of<<<dim3{std::min(element_blocks / 8 + 1, 64u), unsigned(b)}, sweep_threads, 0, stream>>>(
          clist(matrix), m, reinterpret_cast<double* const*>(list(into_largest)));
      GS_CUDA_CHECK_LAUNCH();
      invert_batched(reinterpret_cast<std::complex<double>* const*>(list(matrix)),
                     reinterpret_cast<std::complex<double>* const*>(list(inverse)),
                     reinterpret_cast<double* const*>(list(into_smallest)), m, b, workspace.data(), stream);
    };
    const auto add_identity = [&](List matrix) {
      add_identities<<<dim3{unsigned((h + sweep_threads - 1) / sweep_threads), unsigned(b)}, sweep_threads, 0, stream>>>(
          list(matrix), h);
      GS_CUDA_CHECK_LAUNCH();
    };
    if (st.kind == Kind::layer) {
      // The run's own: A = L'⁻¹ (L' overwritten), B = AẼ⁺, E = AẼ⁻, C_m = ΦA, D_m = ΦB, I − F_m = I − ΦE.
      invert(n, l_local, l_layer_inverse, l_layer_largest, l_layer_smallest);
      gemm(n, h, n, &one, l_layer_inverse, n, l_eplus, n, &zero, l_b, n);
      gemm(n, h, n, &one, l_layer_inverse, n, l_eminus, n, &zero, l_e, n);
      gemm(h, n, n, &one, l_down, h, l_layer_inverse, n, &zero, l_cm, h);
      gemm(h, h, n, &one, l_down, h, l_b, n, &zero, l_dm, h);
      gemm(h, h, n, &minus_one, l_down, h, l_e, n, &zero, l_ifm, h);
      add_identity(l_ifm);
      return;
    }
    if (st.kind == Kind::woodbury) {
      // X = (I + ρD_m)⁻¹ (the matrix in BQ's place), K = BX, BQ = BXρ = Kρ, N⁻¹ = A − BQ C_m,
      // H = Kρ + E − BQ F_m = E + BQ (I − F_m).
      gemm(h, h, h, &one, l_rho, h, l_dm, h, &zero, l_bq, h);
      add_identity(l_bq);
      invert(h, l_bq, l_x, l_largest, l_smallest);
      gemm(n, h, h, &one, l_b, n, l_x, h, &zero, l_gain_g, n);
      gemm(n, h, h, &one, l_gain_g, n, l_rho, h, &zero, l_bq, n);
      copy(l_layer_inverse, l_inverse, std::size_t(n) * n);
      gemm(n, n, h, &minus_one, l_bq, n, l_cm, h, &one, l_inverse, n);
      copy(l_e, l_gain_a, std::size_t(n) * h);
      gemm(n, h, h, &one, l_bq, n, l_ifm, h, &one, l_gain_a, n);
    } else {
      // Ẽ⁺ρ; N = L' + (Ẽ⁺ρ)Φ in L'; N⁻¹ (N overwritten); K = N⁻¹Ẽ⁺; H = N⁻¹(Ẽ⁺ρ) + N⁻¹Ẽ⁻.
      gemm(n, h, h, &one, l_eplus, n, l_rho, h, &zero, l_erho, n);
      gemm(n, n, h, &one, l_erho, n, l_down, h, &one, l_local, n);
      invert(n, l_local, l_inverse, l_largest, l_smallest);
      gemm(n, h, n, &one, l_inverse, n, l_eplus, n, &zero, l_gain_g, n);
      gemm(n, h, n, &one, l_inverse, n, l_erho, n, &zero, l_gain_a, n);
      gemm(n, h, n, &one, l_inverse, n, l_eminus, n, &one, l_gain_a, n);
    }
    // Γ = W Π⁺ C + ρΦ (in place of W Π⁺ C); the application's transfers T = I − Γ K and U = I − Φ H (from the
    // identity set above).
    gemm(h, n, h, &one, l_rho, h, l_down, h, &one, l_up, h);
    gemm(h, h, n, &minus_one, l_up, h, l_gain_g, n, &one, l_transfer_up, h);
    gemm(h, h, n, &minus_one, l_down, h, l_gain_a, n, &one, l_transfer_down, h);
    if (st.p > 0) {  // ρ ← S_p (ρ − Γ H) S_p
      gemm(h, h, n, &minus_one, l_up, h, l_gain_a, n, &one, l_rho, h);
      scale_by_steps<<<dim3{unsigned((h * h + sweep_threads - 1) / sweep_threads), unsigned(b)}, sweep_threads, 0,
                       stream>>>(list(l_rho), reinterpret_cast<const double2* const*>(list(l_step)), h, nm);
      GS_CUDA_CHECK_LAUNCH();
    }
  };
  // Each side lane's steps are issued by a host thread of its own (the calling thread's device made current
  // there), lane 0's by this thread: one thread issuing both took as long as the device ran them (the thin
  // metal's 32 slices: 11.2 ms issued, 11.4 done; with a thread per lane the device chain bounds it, session 26).
  // cuBLAS handles are per lane, so no handle is used by two threads. Every issuer finishes before an error is
  // rethrown (the first lane's first).
  if (lanes.size() > 1) {
    int device = 0;
    GS_CUDA_TRY(cudaGetDevice(&device));
    std::vector<std::future<void>> issuers;
    for (std::size_t shape = 1; shape < lanes.size(); ++shape)
      issuers.push_back(std::async(std::launch::async, [&, shape] {
        GS_CUDA_TRY(cudaSetDevice(device));
        for (const Step& st : steps)
          if (st.shape == int(shape)) run_step(st);
      }));
    std::exception_ptr failure;
    try {
      for (const Step& st : steps)
        if (st.shape == 0) run_step(st);
    } catch (...) {
      failure = std::current_exception();
    }
    for (std::future<void>& issuer : issuers) try {
        issuer.get();
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    if (failure) std::rethrow_exception(failure);
  } else {
    for (const Step& st : steps) run_step(st);
  }
  fork.join();

  // The host's singularity test, per group from the bottom slice up: the first failing group's first
  // failing slice is named.
  std::vector<double> largest_host(largest.size()), smallest_host(smallest.size());
  largest.download(largest_host);  // waits for the recursion
  smallest.download(smallest_host);
  if (layer_size > 0) {  // a run's L' singular where N may not be (a resonance of the slice alone): the direct form
    std::vector<double> layer_largest_host(layer_largest.size()), layer_smallest_host(layer_smallest.size());
    layer_largest.download(layer_largest_host);
    layer_smallest.download(layer_smallest_host);
    for (int k = 0; k < ng; ++k)
      for (int p = 0; p < nz; ++p)
        if (bottom[std::size_t(k)][std::size_t(p)] == p &&
            !regular_factorisation(layer_largest_host[std::size_t(k) * nz + p], layer_smallest_host[std::size_t(k) * nz + p]))
          return device_sweep_matrices(in, false);
  }
  for (int k = 0; k < ng; ++k)
    for (int p = nz - 1; p >= 0; --p) {
      const double l = largest_host[std::size_t(k) * nz + p], m = smallest_host[std::size_t(k) * nz + p];
      GS_EXPECTS(regular_factorisation(l, m), singular_slice_text(in.groups[std::size_t(k)].incidence, p, m, l));
    }
  out.up = std::move(source_up);
  return out;
}

template <class Real>
class DeviceSweepPreconditioner final : public Preconditioner<Real> {
 public:
  using typename Preconditioner<Real>::Complex;
  using V = Complex2<Real>;

  DeviceSweepPreconditioner(const SweepInputs& sweep, const std::vector<int>& rhs_incidence)
      : nm_(sweep.orders), nz_(sweep.slices), nr_(int(rhs_incidence.size())) {
    std::vector<DeviceGroup> groups;
    std::size_t parallel = 0, serial = 0, stride = 0;  // complex128 numbers: shared per block, workspace per block
    for (const SweepGroup& s : sweep.groups) {
      DeviceGroup d;
      d.nc = int(s.components.size());
      d.np = int(s.polarisations.size());
      for (int i = 0; i < d.nc; ++i) d.components[i] = s.components[std::size_t(i)];
      d.matrices = s.matrices;
      d.gains = s.gains;
      groups.push_back(d);
      const std::size_t n = s.n(nm_), h = s.h(nm_);
      parallel = std::max(parallel, 2 * n + h + std::size_t(sweep_warps) * 32);
      serial = std::max(serial, 2 * h + std::size_t(sweep_warps) * 32);
      stride = std::max(stride, std::size_t(nz_) * (n + 2 * h));
    }
    const std::vector<int> first = first_groups(sweep.groups, sweep.incidences);
    for (std::size_t a = 0; a < std::size_t(sweep.incidences); ++a) max_groups_ = std::max(max_groups_, first[a + 1] - first[a]);
    for (int a : rhs_incidence)
      GS_EXPECTS(a >= 0 && a < sweep.incidences, "device sweep preconditioner: a right-hand side's incidence is out of range");
    parallel_bytes_ = parallel * sizeof(double2);
    serial_bytes_ = serial * sizeof(double2);
    work_stride_ = stride;
    int device = 0, limit = 0;
    GS_CUDA_TRY(cudaGetDevice(&device));
    GS_CUDA_TRY(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    GS_EXPECTS(parallel_bytes_ <= std::size_t(limit),
               "the sweep preconditioner on the device: " + std::to_string(nm_) + " orders need " +
                   std::to_string(parallel_bytes_) + " bytes of shared memory per block, the device allows " +
                   std::to_string(limit) + "; choose preconditioner: averaged or none, or a host backend");
    // The device's maximum, not this preconditioner's need: the attribute is the kernel function's, shared by
    // every preconditioner alive, and one needing less must not lower another's limit.
    GS_CUDA_TRY(cudaFuncSetAttribute(local_solves<Real>, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
    GS_CUDA_TRY(cudaFuncSetAttribute(sweep_amplitudes, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
    GS_CUDA_TRY(cudaFuncSetAttribute(gather_up, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
    GS_CUDA_TRY(cudaFuncSetAttribute(finish<Real>, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
    groups_ = DeviceBuffer<DeviceGroup>(groups.size());
    first_group_ = DeviceBuffer<int>(first.size());
    first_group_.upload(first);
    rhs_incidence_ = DeviceBuffer<int>(rhs_incidence.size());
    rhs_incidence_.upload(rhs_incidence);
    work_ = DeviceBuffer<double2>(std::size_t(nr_) * std::size_t(max_groups_) * work_stride_);
    DeviceSweepMatrices m = device_sweep_matrices(sweep);
    for (std::size_t k = 0; k < groups.size(); ++k) groups[k].transfers = m.transfers_at[k];
    groups_.upload(groups);
    inverse_ = std::move(m.inverse);
    gain_g_ = std::move(m.gain_g);
    gain_a_ = std::move(m.gain_a);
    up_ = std::move(m.up);
    down_ = std::move(m.down);
    step_ = std::move(m.step);
    transfers_ = std::move(m.transfers);
    // The set-up ran on this thread's default stream; apply uses the problem's: wait for the former.
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));
  }

  [[nodiscard]] Memory memory() const override { return Memory::device; }

  /// Five launches on `stream` (the header's phases); no synchronisation.
  void apply(const Complex* x, Complex* y, Stream stream) override {
    const dim3 every_slice{unsigned(nz_), unsigned(nr_), unsigned(max_groups_)}, serial{unsigned(nr_), unsigned(max_groups_)};
    const ApplyArguments args{groups_.data(), first_group_.data(), rhs_incidence_.data(), work_.data(), work_stride_,
                              nm_, nz_, nr_, max_groups_};
    local_solves<Real><<<every_slice, apply_threads, parallel_bytes_, stream>>>(args, inverse_.data(), up_.data(),
                                                                               reinterpret_cast<const V*>(x));
    GS_CUDA_CHECK_LAUNCH();
    sweep_amplitudes<<<serial, apply_threads, serial_bytes_, stream>>>(args, transfers_.data(), step_.data(), -1);
    GS_CUDA_CHECK_LAUNCH();
    gather_up<<<every_slice, apply_threads, parallel_bytes_, stream>>>(args, gain_g_.data(), down_.data());
    GS_CUDA_CHECK_LAUNCH();
    sweep_amplitudes<<<serial, apply_threads, serial_bytes_, stream>>>(args, transfers_.data(), step_.data(), +1);
    GS_CUDA_CHECK_LAUNCH();
    finish<Real><<<every_slice, apply_threads, parallel_bytes_, stream>>>(args, gain_a_.data(), reinterpret_cast<V*>(y));
    GS_CUDA_CHECK_LAUNCH();
  }

 private:
  int nm_, nz_, nr_, max_groups_ = 1;
  std::size_t parallel_bytes_ = 0, serial_bytes_ = 0, work_stride_ = 0;
  DeviceBuffer<DeviceGroup> groups_;
  DeviceBuffer<int> first_group_, rhs_incidence_;
  DeviceBuffer<double2> inverse_, gain_g_, gain_a_, up_, down_, step_, transfers_;  // complex128 whatever Real is
  DeviceBuffer<double2> work_;  ///< per (rhs, group slot): w/v, c/d, g/a of every slice (ApplyBlock)
};

}  // namespace

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_sweep_preconditioner(const SweepInputs& sweep,
                                                                       std::vector<int> rhs_incidence) {
  return std::make_unique<DeviceSweepPreconditioner<Real>>(sweep, rhs_incidence);
}
template std::unique_ptr<Preconditioner<float>> make_device_sweep_preconditioner<float>(const SweepInputs&,
                                                                                        std::vector<int>);
template std::unique_ptr<Preconditioner<double>> make_device_sweep_preconditioner<double>(const SweepInputs&,
                                                                                          std::vector<int>);

}  // namespace gratingsim::physics
