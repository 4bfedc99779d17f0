// The sweep preconditioner P = A⁻¹ (sweep_preconditioner.hpp) on the device.
//
// Set-up: the host builds the z-local inputs (sweep_inputs without the dense parts: the row coefficients,
// Ẽ± and ρ_{N−1} per group) in complex128 and uploads them with the kernels; assemble_group builds L'_p, Φ_p
// and W Π⁺ C_p here; the recursion runs here, from the bottom slice up, in complex128, each step over the groups of equal shape (n, h), the kernels batched over them:
//   X = ρΦ (zgemm), N = L' + Ẽ⁺X and Γ = W Π⁺ C + X (a kernel: Ẽ⁺ is one 3×2 block per order), largest
//   |N_ij| (kernel), N⁻¹ and the smallest pivot (invert_batched, device_inverse.hpp), K = N⁻¹Ẽ⁺ (zgemm),
//   Ẽ⁺ρ + Ẽ⁻ (kernel), H = N⁻¹(Ẽ⁺ρ + Ẽ⁻) (zgemm), ρ ← ρ − ΓH (zgemm), ρ ← S ρ S (kernel),
// five kernels per slice and shape and six cuBLAS zgemm per group (two of them form the application's
// transfers T_p = I − Γ_p K_p and U_p = I − Φ_p H_p), each shape on a lane of its own (the first on the calling
// thread's default stream, each further one issued by a host thread of its own). Within a uniform run
// (run_bottoms: L'_p, Φ_p and W Π⁺ C_p the same in every slice, a layer whose content does not vary with z) of at
// least device_least_run slices (long_run_bottoms), the run form (docs/solver.md §6.3) takes the place of that
// chain. Once per run, at its bottom slice: A = L'⁻¹, B = AẼ⁺, E = AẼ⁻, C_m = ΦA, D_m = ΦB, I − F_m, I − G_B (G_B = ΨB,
// Ψ = W Π⁺ C), −G_E (G_E = ΨE). With them one slice's step of the recursion is a scattering matrix,
//   ρ_{j−1} = R_a + T_u ρ_j (I − R_b ρ_j)⁻¹ T_d,  R_a = −S G_E S, T_u = S (I − G_B), T_d = (I − F_m) S, R_b = −D_m,
// the same for every slice of the run but its top (S the step between slices, the same up to the rounding of the
// slices' centres: the bottom's is taken). Doubling it (Redheffer's star
// product) gives M^known, which maps the ρ of the `known` slices found so far to the next `known`: log2(run) levels
// in turn, each a few launches over all of its slices, instead of the run's slices one after another (its chain
// was latency-bound: an h × h Gauss–Jordan and about 20 small launches, 0.34 ms a slice). Then every slice at once
// (Woodbury's identity, N_j = L' + Ẽ⁺ρ_jΦ = L'(I + Bρ_jΦ)): Z_j = (I + ρ_j D_m)⁻¹ρ_j (its pivots tested in N_j's
// place: N_j is singular exactly where I + ρ_j D_m is), N_j⁻¹ = A − BZ_j C_m, K_j = B − BZ_j D_m,
// H_j = E + BZ_j (I − F_m), Γ_j, T_j, U_j, and the top's step to the slice above,
// ρ_{top−1} = S_top [(I − G_B) Z_top (I − F_m) − G_E] S_top. Where a run's L' or a composite matrix of the
// doubling is singular (a resonance of the slice alone or of a part of the run), the whole set-up is redone in
// the direct form. The application reads the same matrices either way. No host round trip
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

/// A group's scratch for the run form (complex128 numbers from its start, column-major): the run's A = L'⁻¹
/// (n × n), B, E (n × h), C_m (h × n), D_m, I − F_m, I − G_B, −G_E (h × h), two powers of the one-slice map
/// (R_a, T_u, T_d, R_b each, h × h) and the doubling's six h × h temporaries: n² + 3nh + 18h² (99·orders² for a
/// conical group, sweep_preconditioner_bytes counts it per incidence).
struct RunScratch {
  std::size_t n, h;
  [[nodiscard]] std::size_t b() const { return n * n; }
  [[nodiscard]] std::size_t e() const { return n * n + n * h; }
  [[nodiscard]] std::size_t cm() const { return n * n + 2 * n * h; }
  [[nodiscard]] std::size_t dm() const { return n * n + 3 * n * h; }
  [[nodiscard]] std::size_t ifm() const { return dm() + h * h; }
  [[nodiscard]] std::size_t igb() const { return dm() + 2 * h * h; }
  [[nodiscard]] std::size_t mge() const { return dm() + 3 * h * h; }
  [[nodiscard]] std::size_t power(int parity, int part) const { return dm() + std::size_t(4 + 4 * parity + part) * h * h; }
  [[nodiscard]] std::size_t temp(int i) const { return dm() + std::size_t(12 + i) * h * h; }
  [[nodiscard]] std::size_t size() const { return temp(6); }
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

/// block_product for the serial recursion (sweep_amplitudes), where one block's product per slice is the whole
/// chain: every row tile at once, the warps over (row tile, column chunk), so that a thread's loads (a chunk of
/// its row) are issued together and one barrier and one short reduction (the chunks' partial sums, in chunk
/// order) follow, instead of block_product's tile after tile, two barriers and a 32-warp reduction each (h = 121:
/// 4 tiles, 8 chunks of 16 columns: a sweep of 32 slices 123 → 88 µs on an H200, session 27). `partial` holds sweep_warps·32
/// numbers; store(i, sum) runs once per row. Every thread must call it; it ends synchronised.
template <class Store>
__device__ void block_product_all_rows(const double2* __restrict__ matrix, int rows, int columns, const double2* v,
                                       double2* partial, Store store) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, tiles = (rows + 31) / 32;
  if (tiles >= sweep_warps) {  // a warp per row tile, whole rows
    for (int tile = warp; tile < tiles; tile += sweep_warps) {
      const int i = tile * 32 + lane;
      if (i >= rows) continue;
      double re = 0, im = 0;
#pragma unroll 8
      for (int j = 0; j < columns; ++j) {
        const double2 c = matrix[std::size_t(j) * rows + i], w = v[j];
        re += c.x * w.x - c.y * w.y;
        im += c.x * w.y + c.y * w.x;
      }
      store(i, double2{re, im});
    }
    __syncthreads();
    return;
  }
  const int chunks = sweep_warps / tiles, width = (columns + chunks - 1) / chunks, tile = warp % tiles,
            chunk = warp / tiles, i = tile * 32 + lane;
  if (chunk < chunks) {
    const int first = chunk * width, last = min(columns, first + width);
    double re = 0, im = 0;
    if (i < rows)
#pragma unroll 8
      for (int j = first; j < last; ++j) {
        const double2 c = matrix[std::size_t(j) * rows + i], w = v[j];
        re += c.x * w.x - c.y * w.y;
        im += c.x * w.y + c.y * w.x;
      }
    partial[(chunk * tiles + tile) * 32 + lane] = {re, im};
  }
  __syncthreads();
  for (int row = threadIdx.x; row < rows; row += blockDim.x) {
    double2 sum = {0, 0};
    for (int c = 0; c < chunks; ++c) {
      sum.x += partial[c * tiles * 32 + row].x;
      sum.y += partial[c * tiles * 32 + row].y;
    }
    store(row, sum);
  }
  __syncthreads();
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
    block_product_all_rows(t, h, h, a, partial, [&](int i, double2 c) {
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

/// M_k(i, j) ← s_k(i)^rows M_k(i, j) s_k(j)^columns for the h×h matrices matrices[k], s_k(i) = steps[k][i % orders]
/// (rows, columns: 0 or 1; both for ρ ← S ρ S); a thread per element, blocks (x) over a matrix, y over the matrices.
__global__ void __launch_bounds__(sweep_threads) scale_by_steps(cuDoubleComplex* const* matrices, const double2* const* steps,
                                                                int h, int orders, int rows, int columns) {
  const int e = int(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= h * h) return;
  cuDoubleComplex* r = matrices[blockIdx.y];
  const double2* s = steps[blockIdx.y];
  const double2 si = rows ? s[(e % h) % orders] : double2{1, 0}, sj = columns ? s[(e / h) % orders] : double2{1, 0};
  const double2 f = {si.x * sj.x - si.y * sj.y, si.x * sj.y + si.y * sj.x};
  const cuDoubleComplex v = r[e];
  r[e] = {f.x * v.x - f.y * v.y, f.x * v.y + f.y * v.x};
}

/// v + (Ẽ⁺X)(row, column) for Ẽ⁺ n × h and X h × ·, column-major. Ẽ⁺ has column (k, m) non-zero only in rows
/// (c, m) (sweep_preconditioner.hpp), so row (c, m) of Ẽ⁺X is Σ_k Ẽ⁺((c, m), (k, m)) X((k, m), ·), added term
/// by term in k as the host adds them.
__device__ cuDoubleComplex plus_edge_product(cuDoubleComplex v, const cuDoubleComplex* e_plus, const cuDoubleComplex* x,
                                             int row, int column, int n, int h, int orders) {
  for (int k = row % orders; k < h; k += orders)
    v = cuCadd(v, cuCmul(e_plus[std::size_t(k) * n + row], x[std::size_t(column) * h + k]));
  return v;
}

/// For every listed group (y): N ← N + Ẽ⁺X (n × n) and Γ ← Γ + X (h × n), X = ρΦ (h × n), column-major; a
/// thread per element.
__global__ void __launch_bounds__(sweep_threads)
    fold_edge_products(const cuDoubleComplex* const* e_plus, const cuDoubleComplex* const* x, cuDoubleComplex* const* big_n,
                       cuDoubleComplex* const* gamma, int n, int h, int orders) {
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x, nn = std::size_t(n) * n;
  if (e >= nn + std::size_t(n) * h) return;
  const cuDoubleComplex* xk = x[blockIdx.y];
  if (e >= nn) {
    cuDoubleComplex* g = gamma[blockIdx.y];
    g[e - nn] = cuCadd(g[e - nn], xk[e - nn]);
    return;
  }
  big_n[blockIdx.y][e] = plus_edge_product(big_n[blockIdx.y][e], e_plus[blockIdx.y], xk, int(e % n), int(e / n), n, h, orders);
}

/// For every listed group (y): out ← Ẽ⁻ + Ẽ⁺ρ (n × h; ρ h × h); a thread per element.
__global__ void __launch_bounds__(sweep_threads)
    edges_with_rho(const cuDoubleComplex* const* e_plus, const cuDoubleComplex* const* rho,
                   const cuDoubleComplex* const* e_minus, cuDoubleComplex* const* out, int n, int h, int orders) {
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= std::size_t(n) * h) return;
  out[blockIdx.y][e] = plus_edge_product(e_minus[blockIdx.y][e], e_plus[blockIdx.y], rho[blockIdx.y], int(e % n),
                                         int(e / n), n, h, orders);
}

/// to[k] ← α from[k], `elements` complex128 numbers each; blocks (x) over the elements, y over the list.
__global__ void __launch_bounds__(sweep_threads)
    copy_matrices(const cuDoubleComplex* const* from, cuDoubleComplex* const* to, std::size_t elements, double alpha) {
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= elements) return;
  const cuDoubleComplex v = from[blockIdx.y][e];
  to[blockIdx.y][e] = {alpha * v.x, alpha * v.y};
}

/// Every h×h matrix of `matrices` (count of them, one after another) set to the identity.
__global__ void set_identities(double2* matrices, std::size_t count, int h) {
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= count * h * h) return;
  const std::size_t within = e % (std::size_t(h) * h);
  matrices[e] = {within % (std::size_t(h) + 1) == 0 ? 1.0 : 0.0, 0.0};
}

/// The `count` consecutive h×h matrices at each matrices[k] set to the identity; blocks (x) over them, y over the list.
__global__ void __launch_bounds__(sweep_threads) set_identity_lists(cuDoubleComplex* const* matrices, int count, int h) {
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= std::size_t(count) * h * h) return;
  matrices[blockIdx.y][e] = {e % (std::size_t(h) * h) % (std::size_t(h) + 1) == 0 ? 1.0 : 0.0, 0.0};
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

DeviceSweepMatrices device_sweep_matrices(const SweepInputs& in, bool runs_allowed = true) {
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
  // Per group: Ẽ⁺ρ (n × h); per (group, slice): the largest element and the smallest pivot (of N_p, or in the
  // run form of Y_p = I + ρ_p D_m); per (group, bottom slice of a run): those of the run's L'; per group, 3·nz
  // slots for those of the run form's composite matrices (I − ρ R_b and the doubling's, at most 3 per slice).
  std::size_t e_rho_size = 0;
  std::vector<std::size_t> e_rho_at;
  for (const SweepGroup& g : in.groups) {
    e_rho_at.push_back(e_rho_size);
    e_rho_size += g.n(nm) * g.h(nm);
  }
  DeviceBuffer<double2> e_rho(e_rho_size);
  DeviceBuffer<double> largest{std::size_t(ng) * nz}, smallest{std::size_t(ng) * nz}, layer_largest{std::size_t(ng) * nz},
      layer_smallest{std::size_t(ng) * nz}, composite_largest{3 * std::size_t(ng) * nz},
      composite_smallest{3 * std::size_t(ng) * nz};
  for (DeviceBuffer<double>* zeroed : {&largest, &layer_largest, &composite_largest})  // +0.0
    GS_CUDA_TRY(cudaMemsetAsync(zeroed->data(), 0, zeroed->size() * sizeof(double), cudaStreamPerThread));
  // The run form (the header's, docs/solver.md §6.3) per group and slice: where the slice lies in a uniform run
  // of at least device_least_run slices. A group's choice depends on its own inputs only, so a member's result
  // does not depend on the members beside it.
  std::vector<std::vector<int>> bottom;  // per group and slice: its run's bottom in the run form, else −1
  std::vector<std::size_t> scratch_at(std::size_t(ng), 0);  // into the run scratch, per group that takes the form
  std::size_t scratch_size = 0;
  for (int k = 0; k < ng; ++k) {
    const SweepGroup& g = in.groups[std::size_t(k)];
    // (n ≤ 2h, as every group is: the slices' BZ_j, n × h, stand in their transfers' 2h² during the set-up.)
    bottom.push_back(runs_allowed && g.n(nm) <= 2 * g.h(nm) ? long_run_bottoms(in, std::size_t(k), device_least_run)
                                                            : std::vector<int>(std::size_t(nz), -1));
    if (std::all_of(bottom.back().begin(), bottom.back().end(), [](int b) { return b < 0; })) continue;
    scratch_at[std::size_t(k)] = scratch_size;
    scratch_size += RunScratch{g.n(nm), g.h(nm)}.size();
  }
  DeviceBuffer<double2> scratch(scratch_size);
  // Shapes (n, h) and their groups.
  std::map<std::pair<int, int>, std::vector<int>> shapes;
  for (int k = 0; k < ng; ++k)
    shapes[{int(in.groups[std::size_t(k)].n(nm)), int(in.groups[std::size_t(k)].h(nm))}].push_back(k);
  // Every pointer array of every step (slice p, shape, kind), built on the host and uploaded once: the step's
  // lists one after another, each with one pointer per group of the step; a run step's level and slice lists
  // after them (RunPlan).
  using Z = cuDoubleComplex;
  std::vector<void*> host_pointers;
  enum class Kind { run, direct };  // a run in the run form, at its bottom slice; a slice in the direct form
  /// A level of a run's doubling: `apps` slices' ρ from those `known` below them by the power M^known of the
  /// one-slice map, and (`doubles`) M^(2·known) for the next level; power buffers alternate by `parity`.
  struct Level {
    int apps, parity;
    bool doubles;
    std::size_t lists;  // into host_pointers: level_lists lists of count·apps, then inverse_lists of inverted()
    [[nodiscard]] int inverted(int count) const { return count * (apps + (doubles ? 2 : 0)); }
  };
  enum LevelList { v_source, v_q, v_x, v_target, v_ra, v_tu, v_td, v_rb, level_lists };
  enum InverseList { i_matrix, i_inverse, i_largest, i_smallest, inverse_lists };
  enum SliceList { s_y, s_x, s_rho, s_largest, s_smallest, s_transfer, s_a, s_b, s_e, slice_lists };
  struct RunPlan {
    std::vector<Level> levels;
    std::size_t slice_lists_at = 0;  // slice_lists lists of count·(bottom − top + 1), group-major, slices from the top
  };
  std::vector<RunPlan> plans;
  struct Step {
    std::size_t first;  // index of the step's first pointer list in host_pointers
    int n, h, count, shape, p;
    Kind kind;
    int top = 0;             // a run's top slice (its bottom is p)
    std::size_t plan = 0;    // a run's RunPlan
    std::vector<int> groups;  // the step's groups, in its lists' order
  };
  enum List { l_eplus, l_eminus, l_rho, l_erho, l_local, l_down, l_inverse, l_gain_g, l_gain_a, l_up, l_largest,
              l_smallest, l_step, l_transfer_up, l_transfer_down, l_a, l_b, l_e, l_cm, l_dm, l_ifm, l_igb, l_mge, l_ra0,
              l_tu0, l_td0, l_rb0, l_ra1, l_tu1, l_td1, l_rb1, l_q1, l_p1, l_q2, l_p2, l_t2, l_t4, l_rho_bottom,
              l_step_top, l_z_top, l_w_top, l_layer_largest, l_layer_smallest, lists };
  std::vector<Step> steps;  // p from nz − 1 down, shape in map order, runs (by top) before the direct step
  std::vector<int> composites(std::size_t(ng), 0);  // per group: composite pivot slots used
  const auto z = [](DeviceBuffer<double2>& b, std::size_t at) { return static_cast<void*>(b.data() + at); };
  for (int p = nz - 1; p >= 0; --p) {
    int shape_index = 0;
    for (const auto& [shape, members] : shapes) {
      const auto [n, h] = shape;
      const std::size_t nn = std::size_t(n) * n, nh = std::size_t(n) * h, hh = std::size_t(h) * h;
      // The runs ending at p, by their top slice, then the groups in the direct form at p.
      std::map<int, std::vector<int>> runs;
      std::vector<int> direct;
      for (int k : members) {
        const std::vector<int>& b = bottom[std::size_t(k)];
        if (b[std::size_t(p)] < 0) direct.push_back(k);
        if (b[std::size_t(p)] != p) continue;
        int top = p;
        while (top > 0 && b[std::size_t(top) - 1] == p) --top;
        runs[top].push_back(k);
      }
      std::vector<std::pair<int, std::vector<int>>> chosen_steps(runs.begin(), runs.end());
      if (!direct.empty()) chosen_steps.emplace_back(-1, direct);
      for (const auto& [top, chosen] : chosen_steps) {
        const Kind kind = top >= 0 ? Kind::run : Kind::direct;
        Step st{host_pointers.size(), n, h, int(chosen.size()), shape_index, p, kind, std::max(top, 0), plans.size(), chosen};
        for (int list = 0; list < lists; ++list)
          for (int k : chosen) {
            const SweepGroup& g = in.groups[std::size_t(k)];
            const std::size_t mat = g.matrices + std::size_t(p) * nn, gain = g.gains + std::size_t(p) * nh;
            const RunScratch r{std::size_t(n), std::size_t(h)};
            const std::size_t at = scratch_at[std::size_t(k)];
            const bool run = kind == Kind::run;
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
              case l_transfer_up: ptr = z(out.transfers, out.transfers_at[std::size_t(k)] + 2 * std::size_t(p) * hh); break;
              case l_transfer_down: ptr = z(out.transfers, out.transfers_at[std::size_t(k)] + (2 * std::size_t(p) + 1) * hh); break;
              case l_a: ptr = run ? z(scratch, at) : nullptr; break;
              case l_b: ptr = run ? z(scratch, at + r.b()) : nullptr; break;
              case l_e: ptr = run ? z(scratch, at + r.e()) : nullptr; break;
              case l_cm: ptr = run ? z(scratch, at + r.cm()) : nullptr; break;
              case l_dm: ptr = run ? z(scratch, at + r.dm()) : nullptr; break;
              case l_ifm: ptr = run ? z(scratch, at + r.ifm()) : nullptr; break;
              case l_igb: ptr = run ? z(scratch, at + r.igb()) : nullptr; break;
              case l_mge: ptr = run ? z(scratch, at + r.mge()) : nullptr; break;
              case l_ra0: case l_tu0: case l_td0: case l_rb0:
                ptr = run ? z(scratch, at + r.power(0, list - l_ra0)) : nullptr;
                break;
              case l_ra1: case l_tu1: case l_td1: case l_rb1:
                ptr = run ? z(scratch, at + r.power(1, list - l_ra1)) : nullptr;
                break;
              case l_q1: case l_p1: case l_q2: case l_p2: case l_t2: case l_t4:
                ptr = run ? z(scratch, at + r.temp(list - l_q1)) : nullptr;
                break;
              case l_rho_bottom: ptr = z(out.gain_a, gain); break;
              case l_step_top: ptr = z(out.step, (std::size_t(g.incidence) * nz + std::size_t(st.top)) * nm); break;
              case l_z_top: ptr = z(out.gain_g, g.gains + std::size_t(st.top) * nh); break;
              case l_w_top: ptr = z(out.inverse, g.matrices + std::size_t(st.top) * nn); break;
              case l_layer_largest: ptr = layer_largest.data() + std::size_t(k) * nz + p; break;
              case l_layer_smallest: ptr = layer_smallest.data() + std::size_t(k) * nz + p; break;
              case lists: break;
            }
            host_pointers.push_back(ptr);
          }
        if (kind == Kind::run) {
          // The doubling's levels: ρ of slices p − known − i from those of slices p − i (i < apps) by M^known.
          RunPlan plan;
          const int slices = p - st.top + 1;
          for (int known = 1, level = 0; known < slices; known *= 2, ++level) {
            const int apps = std::min(known, slices - known);
            Level lv{apps, level % 2, known + apps < slices, host_pointers.size()};
            for (int list = 0; list < level_lists; ++list)
              for (int k : chosen) {
                const SweepGroup& g = in.groups[std::size_t(k)];
                const RunScratch r{std::size_t(n), std::size_t(h)};
                const std::size_t at = scratch_at[std::size_t(k)];
                for (int i = 0; i < apps; ++i) {
                  const std::size_t source = std::size_t(p - i), target = std::size_t(p - known - i);
                  void* ptr = nullptr;
                  switch (LevelList(list)) {
                    case v_source: ptr = z(out.gain_a, g.gains + source * nh); break;
                    case v_q: ptr = z(out.gain_g, g.gains + target * nh); break;
                    case v_x: ptr = z(out.inverse, g.matrices + target * nn); break;
                    case v_target: ptr = z(out.gain_a, g.gains + target * nh); break;
                    case v_ra: case v_tu: case v_td: case v_rb:
                      ptr = z(scratch, at + r.power(lv.parity, list - v_ra));
                      break;
                    case level_lists: break;
                  }
                  host_pointers.push_back(ptr);
                }
              }
            // A composite matrix's entry in inverse list `list`: the matrix, its inverse, or group k's pivot slot c.
            const auto composite = [&](int list, void* matrix, void* inverse, int k, int c) -> void* {
              const std::size_t slot = 3 * std::size_t(k) * nz + std::size_t(composites[std::size_t(k)] + c);
              return list == i_matrix    ? matrix
                     : list == i_inverse ? inverse
                     : list == i_largest ? static_cast<void*>(composite_largest.data() + slot)
                                         : static_cast<void*>(composite_smallest.data() + slot);
            };
            for (int list = 0; list < inverse_lists; ++list) {
              for (int k : chosen) {
                const SweepGroup& g = in.groups[std::size_t(k)];
                for (int i = 0; i < apps; ++i) {
                  const std::size_t target = std::size_t(p - known - i);
                  host_pointers.push_back(composite(list, z(out.gain_g, g.gains + target * nh),
                                                    z(out.inverse, g.matrices + target * nn), k, i));
                }
              }
              if (lv.doubles)
                for (int k : chosen) {
                  const RunScratch r{std::size_t(n), std::size_t(h)};
                  const std::size_t at = scratch_at[std::size_t(k)];
                  for (int j = 0; j < 2; ++j)  // (I − R_b R_a) → P_1, (I − R_a R_b) → P_2
                    host_pointers.push_back(
                        composite(list, z(scratch, at + r.temp(2 * j)), z(scratch, at + r.temp(2 * j + 1)), k, apps + j));
                }
            }
            for (int k : chosen) composites[std::size_t(k)] += apps + (lv.doubles ? 2 : 0);
            plan.levels.push_back(lv);
          }
          plan.slice_lists_at = host_pointers.size();
          for (int list = 0; list < slice_lists; ++list)
            for (int k : chosen) {
              const SweepGroup& g = in.groups[std::size_t(k)];
              const std::size_t at = scratch_at[std::size_t(k)];
              const RunScratch r{std::size_t(n), std::size_t(h)};
              for (int j = st.top; j <= p; ++j) {
                const std::size_t q = std::size_t(j);
                void* ptr = nullptr;
                switch (SliceList(list)) {
                  case s_y: ptr = z(out.gain_g, g.gains + q * nh); break;
                  case s_x: ptr = z(out.inverse, g.matrices + q * nn); break;
                  case s_rho: ptr = z(out.gain_a, g.gains + q * nh); break;
                  case s_largest: ptr = largest.data() + std::size_t(k) * nz + q; break;
                  case s_smallest: ptr = smallest.data() + std::size_t(k) * nz + q; break;
                  case s_transfer: ptr = z(out.transfers, out.transfers_at[std::size_t(k)] + 2 * q * hh); break;
                  case s_a: ptr = z(scratch, at); break;
                  case s_b: ptr = z(scratch, at + r.b()); break;
                  case s_e: ptr = z(scratch, at + r.e()); break;
                  case slice_lists: break;
                }
                host_pointers.push_back(ptr);
              }
            }
          plans.push_back(std::move(plan));
        }
        steps.push_back(st);
      }
      ++shape_index;
    }
  }
  for (int k = 0; k < ng; ++k) GS_EXPECTS(composites[std::size_t(k)] <= 3 * nz, "the run form's composite slots overflow");
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
    for (const Step& st : steps) {
      if (st.shape != int(shape)) continue;
      bytes = std::max(bytes, inverse_workspace_bytes(st.n, st.count));
      if (st.kind != Kind::run) continue;
      bytes = std::max(bytes, inverse_workspace_bytes(st.h, st.count * (st.p - st.top + 1)));
      for (const Level& lv : plans[st.plan].levels) bytes = std::max(bytes, inverse_workspace_bytes(st.h, lv.inverted(st.count)));
    }
    workspaces.emplace_back(bytes);
  }
  LaneFork fork(lanes);  // the side lanes wait for everything enqueued so far; joined when it goes
  const Z one{1, 0}, zero{0, 0}, minus_one{-1, 0};
  const auto run_step = [&](const Step& st) {
    const int n = st.n, h = st.h, b = st.count;
    const cudaStream_t stream = lanes[std::size_t(st.shape)].stream;
    const cublasHandle_t handle = lanes[std::size_t(st.shape)].handle;
    DeviceBuffer<unsigned char>& workspace = workspaces[std::size_t(st.shape)];
    const auto device_list = [&](std::size_t first) { return reinterpret_cast<Z**>(pointers.data() + first); };
    const auto list = [&](List l) { return device_list(st.first + std::size_t(l) * b); };
    const auto at = [&](List l, int k) { return static_cast<Z*>(host_pointers[st.first + std::size_t(l) * b + std::size_t(k)]); };
    // C ← α A B + β C for every group, one cuBLAS call per group: cublasZgemmBatched changes the last bits
    // of a product with the batch count (1 × 1 against 5 groups of the shapes (n, h) = (15, 15) and (30, 15),
    // H100, session 20), and a member's result must not depend on the members beside it. (Batched calls below
    // run over one group's slices only, a count its own inputs fix.)
    const auto gemm = [&](int rows, int columns, int inner, const Z* alpha, List a, int lda, List bl, int ldb,
                          const Z* beta, List c, int ldc) {
      for (int k = 0; k < b; ++k)
        GS_CUBLAS_TRY(cublasZgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, rows, columns, inner, alpha, at(a, k), lda, at(bl, k),
                                  ldb, beta, at(c, k), ldc));
    };
    // The same over `per_group` products of each group, from pointer lists (group-major) at a, bl, c.
    const auto gemm_lists = [&](int rows, int columns, int inner, const Z* alpha, std::size_t a, int lda, std::size_t bl,
                                int ldb, const Z* beta, std::size_t c, int ldc, int per_group) {
      for (int k = 0; k < b; ++k) {
        const std::size_t o = std::size_t(k) * per_group;
        GS_CUBLAS_TRY(cublasZgemmBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, rows, columns, inner, alpha,
                                         reinterpret_cast<const Z* const*>(device_list(a + o)), lda,
                                         reinterpret_cast<const Z* const*>(device_list(bl + o)), ldb, beta,
                                         device_list(c + o), ldc, per_group));
      }
    };
    const auto copy_lists = [&](std::size_t from, std::size_t to, int count, std::size_t elements, double alpha) {
      copy_matrices<<<dim3{unsigned((elements + sweep_threads - 1) / sweep_threads), unsigned(count)}, sweep_threads, 0,
                      stream>>>(reinterpret_cast<const Z* const*>(device_list(from)), device_list(to), elements, alpha);
      GS_CUDA_CHECK_LAUNCH();
    };
    const auto copy = [&](List from, List to, std::size_t elements, double alpha = 1) {
      copy_lists(st.first + std::size_t(from) * b, st.first + std::size_t(to) * b, b, elements, alpha);
    };
    // The largest element of every listed m × m matrix into `into_largest`; their inverses by blocked
    // Gauss–Jordan (cuSOLVER's one-matrix LU and getrs in turn were latency-bound, 0.68 ms at n = 242, and
    // cuBLAS's batched ones change bits with the batch), the matrices overwritten.
    const auto invert_lists = [&](int m, std::size_t matrix, std::size_t inverse, std::size_t into_largest,
                                  std::size_t into_smallest, int count) {
      const unsigned element_blocks = unsigned((std::size_t(m) * m + sweep_threads - 1) / sweep_threads);
      largest_of<<<dim3{std::min(element_blocks / 8 + 1, 64u), unsigned(count)}, sweep_threads, 0, stream>>>(
          reinterpret_cast<const Z* const*>(device_list(matrix)), m,
          reinterpret_cast<double* const*>(device_list(into_largest)));
      GS_CUDA_CHECK_LAUNCH();
      invert_batched(reinterpret_cast<std::complex<double>* const*>(device_list(matrix)),
                     reinterpret_cast<std::complex<double>* const*>(device_list(inverse)),
                     reinterpret_cast<double* const*>(device_list(into_smallest)), m, count, workspace.data(), stream);
    };
    const auto invert = [&](int m, List matrix, List inverse, List into_largest, List into_smallest) {
      const auto o = [&](List l) { return st.first + std::size_t(l) * b; };
      invert_lists(m, o(matrix), o(inverse), o(into_largest), o(into_smallest), b);
    };
    const auto add_identity_lists = [&](std::size_t matrices, int count) {
      add_identities<<<dim3{unsigned((h + sweep_threads - 1) / sweep_threads), unsigned(count)}, sweep_threads, 0, stream>>>(
          device_list(matrices), h);
      GS_CUDA_CHECK_LAUNCH();
    };
    const auto add_identity = [&](List matrix) { add_identity_lists(st.first + std::size_t(matrix) * b, b); };
    const auto scale = [&](List matrix, List steps_list, int rows, int columns) {
      scale_by_steps<<<dim3{unsigned((h * h + sweep_threads - 1) / sweep_threads), unsigned(b)}, sweep_threads, 0, stream>>>(
          list(matrix), reinterpret_cast<const double2* const*>(list(steps_list)), h, nm, rows, columns);
      GS_CUDA_CHECK_LAUNCH();
    };
    if (st.kind == Kind::run) {
      const RunPlan& plan = plans[st.plan];
      const int slices = st.p - st.top + 1;
      const std::size_t nn = std::size_t(n) * n, nh = std::size_t(n) * h, hh = std::size_t(h) * h;
      // The run's own, at its bottom slice: A = L'⁻¹ (L' overwritten), B = AẼ⁺, E = AẼ⁻, C_m = ΦA, D_m = ΦB,
      // I − F_m = I − ΦE, I − G_B = I − ΨB, −G_E = −ΨE (Ψ = W Π⁺ C, before Γ replaces it).
      invert(n, l_local, l_a, l_layer_largest, l_layer_smallest);
      gemm(n, h, n, &one, l_a, n, l_eplus, n, &zero, l_b, n);
      gemm(n, h, n, &one, l_a, n, l_eminus, n, &zero, l_e, n);
      gemm(h, n, n, &one, l_down, h, l_a, n, &zero, l_cm, h);
      gemm(h, h, n, &one, l_down, h, l_b, n, &zero, l_dm, h);
      gemm(h, h, n, &minus_one, l_down, h, l_e, n, &zero, l_ifm, h);
      gemm(h, h, n, &minus_one, l_up, h, l_b, n, &zero, l_igb, h);
      gemm(h, h, n, &minus_one, l_up, h, l_e, n, &zero, l_mge, h);
      add_identity(l_ifm);
      add_identity(l_igb);
      // The one-slice map ρ_{j−1} = R_a + T_u ρ_j (I − R_b ρ_j)⁻¹ T_d (the sweep's recursion written as a
      // scattering matrix, docs/solver.md §6.3): R_a = −S G_E S, T_u = S (I − G_B), T_d = (I − F_m) S, R_b = −D_m,
      // S the step at the bottom slice (the same in every slice of the run but its top, whose step to the slice
      // above is taken apart below).
      copy(l_mge, l_ra0, hh);
      copy(l_igb, l_tu0, hh);
      copy(l_ifm, l_td0, hh);
      copy(l_dm, l_rb0, hh, -1);
      scale(l_ra0, l_step, 1, 1);
      scale(l_tu0, l_step, 1, 0);
      scale(l_td0, l_step, 0, 1);
      copy(l_rho, l_rho_bottom, hh);  // ρ of the bottom slice, from below (the chain's)
      // Doubling: per level, every known slice's ρ_j gives ρ_{j−known} = M^known(ρ_j), and M^(2·known) = M^known ⋆
      // M^known (Redheffer's star product: top R_a, T_u, T_d, R_b over the same below, P_1 = (I − R_b R_a)⁻¹,
      // P_2 = (I − R_a R_b)⁻¹: R_a + T_u R_a P_1 T_d, T_u P_2 T_u, T_d P_1 T_d, R_b + T_d R_b P_2 T_u). log2(run)
      // levels in turn instead of a slice after another. The one-slice map is not a bounded scattering matrix (R_a, R_b
      // reached 70 on random 2D stacks): an ill-conditioned P_1 (cond 3e4) cost 4 digits of ρ against the chain's
      // (validation/results/run-form-rounding-cpu.txt), at most an iteration of the solve it preconditions.
      for (const Level& lv : plan.levels) {
        const int apps = lv.apps, inverted = lv.inverted(b);
        const auto v = [&](LevelList l) { return lv.lists + std::size_t(l) * b * apps; };
        const auto iv = [&](InverseList l) { return lv.lists + std::size_t(level_lists) * b * apps + std::size_t(l) * inverted; };
        const List ra = lv.parity ? l_ra1 : l_ra0, tu = lv.parity ? l_tu1 : l_tu0, td = lv.parity ? l_td1 : l_td0,
                   rb = lv.parity ? l_rb1 : l_rb0, ra2 = lv.parity ? l_ra0 : l_ra1, tu2 = lv.parity ? l_tu0 : l_tu1,
                   td2 = lv.parity ? l_td0 : l_td1, rb2 = lv.parity ? l_rb0 : l_rb1;
        gemm_lists(h, h, h, &minus_one, v(v_source), h, v(v_rb), h, &zero, v(v_q), h, apps);  // −ρ R_b
        if (lv.doubles) {
          gemm(h, h, h, &minus_one, rb, h, ra, h, &zero, l_q1, h);
          gemm(h, h, h, &minus_one, ra, h, rb, h, &zero, l_q2, h);
        }
        add_identity_lists(iv(i_matrix), inverted);
        invert_lists(h, iv(i_matrix), iv(i_inverse), iv(i_largest), iv(i_smallest), inverted);
        gemm_lists(h, h, h, &one, v(v_x), h, v(v_source), h, &zero, v(v_q), h, apps);  // (I − ρR_b)⁻¹ρ
        gemm_lists(h, h, h, &one, v(v_tu), h, v(v_q), h, &zero, v(v_x), h, apps);      // T_u (…)
        copy_lists(v(v_ra), v(v_target), b * apps, hh, 1);
        gemm_lists(h, h, h, &one, v(v_x), h, v(v_td), h, &one, v(v_target), h, apps);  // R_a + T_u (…) T_d
        if (lv.doubles) {
          gemm(h, h, h, &one, l_p1, h, td, h, &zero, l_q1, h);  // P_1 T_d
          gemm(h, h, h, &one, l_p2, h, tu, h, &zero, l_q2, h);  // P_2 T_u
          gemm(h, h, h, &one, ra, h, l_q1, h, &zero, l_t2, h);
          gemm(h, h, h, &one, rb, h, l_q2, h, &zero, l_t4, h);
          copy(ra, ra2, hh);
          copy(rb, rb2, hh);
          gemm(h, h, h, &one, tu, h, l_t2, h, &one, ra2, h);
          gemm(h, h, h, &one, td, h, l_t4, h, &one, rb2, h);
          gemm(h, h, h, &one, tu, h, l_q2, h, &zero, tu2, h);
          gemm(h, h, h, &one, td, h, l_q1, h, &zero, td2, h);
        }
      }
      // Every slice j of the run at once (slice lists; strided products over one group's slices from the top,
      // the run's matrices shared): Y_j = I + ρ_j D_m (in K's place), its inverse X_j (in N⁻¹'s), Z_j = X_j ρ_j
      // (in K's), BZ_j (n × h, in the transfers'), Γ_j = Ψ + ρ_j Φ, then H_j = E + BZ_j (I − F_m) (in ρ_j's place),
      // K_j = B − BZ_j D_m, N⁻¹_j = A − BZ_j C_m (Woodbury's identity: N_j = L' + Ẽ⁺ρ_jΦ = L'(I + Bρ_jΦ)), T_j, U_j.
      const auto s = [&](SliceList l) { return plan.slice_lists_at + std::size_t(l) * b * slices; };
      set_identity_lists<<<dim3{unsigned((hh + sweep_threads - 1) / sweep_threads), unsigned(b * slices)}, sweep_threads, 0,
                           stream>>>(device_list(s(s_y)), 1, h);
      GS_CUDA_CHECK_LAUNCH();
      const auto strided = [&](int rows, int columns, int inner, const Z* alpha, const Z* a, int lda, long long sa,
                               const Z* bm, int ldb, long long sb, const Z* beta, Z* c, int ldc, long long sc) {
        GS_CUBLAS_TRY(cublasZgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, rows, columns, inner, alpha, a, lda, sa, bm,
                                                ldb, sb, beta, c, ldc, sc, slices));
      };
      const auto group_of = [&](int k) -> const SweepGroup& { return in.groups[std::size_t(st.groups[std::size_t(k)])]; };
      const auto transfers_of = [&](int k) { return out.transfers_at[std::size_t(st.groups[std::size_t(k)])]; };
      const auto slot = [&](DeviceBuffer<double2>& buffer, std::size_t base, std::size_t per_slice) {
        return reinterpret_cast<Z*>(buffer.data() + base + std::size_t(st.top) * per_slice);
      };
      const long long snn = (long long)nn, snh = (long long)nh, stt = 2 * (long long)hh;
      for (int k = 0; k < b; ++k) {
        const SweepGroup& g = group_of(k);
        strided(h, h, h, &one, slot(out.gain_a, g.gains, nh), h, snh, at(l_dm, k), h, 0, &one, slot(out.gain_g, g.gains, nh), h, snh);
      }
      invert_lists(h, s(s_y), s(s_x), s(s_largest), s(s_smallest), b * slices);
      for (int k = 0; k < b; ++k) {
        const SweepGroup& g = group_of(k);
        const std::size_t tr = transfers_of(k);
        Z* const y = slot(out.gain_g, g.gains, nh);  // Y_j, then Z_j, then K_j
        Z* const x = slot(out.inverse, g.matrices, nn);
        Z* const r = slot(out.gain_a, g.gains, nh);  // ρ_j, then H_j
        Z* const bz = slot(out.transfers, tr, 2 * hh);
        strided(h, h, h, &one, x, h, snn, r, h, snh, &zero, y, h, snh);                          // Z_j = X_j ρ_j
        strided(n, h, h, &one, at(l_b, k), n, 0, y, h, snh, &zero, bz, n, stt);                  // B Z_j
        strided(h, n, h, &one, r, h, snh, slot(out.down, g.gains, nh), h, snh, &one, slot(source_up, g.gains, nh), h, snh);  // Γ_j
      }
      if (st.top > 0) {  // ρ_{top−1} = S_top [(I − G_B) Z_top (I − F_m) − G_E] S_top, the chain's for the slice above
        gemm(h, h, h, &one, l_igb, h, l_z_top, h, &zero, l_w_top, h);
        copy(l_mge, l_rho, hh);
        gemm(h, h, h, &one, l_w_top, h, l_ifm, h, &one, l_rho, h);
        scale(l_rho, l_step_top, 1, 1);
      }
      copy_lists(s(s_e), s(s_rho), b * slices, nh, 1);
      copy_lists(s(s_b), s(s_y), b * slices, nh, 1);
      copy_lists(s(s_a), s(s_x), b * slices, nn, 1);
      for (int k = 0; k < b; ++k) {
        const SweepGroup& g = group_of(k);
        const std::size_t tr = transfers_of(k);
        Z* const bz = slot(out.transfers, tr, 2 * hh);
        strided(n, h, h, &one, bz, n, stt, at(l_ifm, k), h, 0, &one, slot(out.gain_a, g.gains, nh), n, snh);        // H_j
        strided(n, h, h, &minus_one, bz, n, stt, at(l_dm, k), h, 0, &one, slot(out.gain_g, g.gains, nh), n, snh);   // K_j
        strided(n, n, h, &minus_one, bz, n, stt, at(l_cm, k), h, 0, &one, slot(out.inverse, g.matrices, nn), n, snn);  // N⁻¹_j
      }
      set_identity_lists<<<dim3{unsigned((2 * hh + sweep_threads - 1) / sweep_threads), unsigned(b * slices)}, sweep_threads, 0,
                           stream>>>(device_list(s(s_transfer)), 2, h);
      GS_CUDA_CHECK_LAUNCH();
      for (int k = 0; k < b; ++k) {
        const SweepGroup& g = group_of(k);
        const std::size_t tr = transfers_of(k);
        Z* const transfer = slot(out.transfers, tr, 2 * hh);
        strided(h, h, n, &minus_one, slot(source_up, g.gains, nh), h, snh, slot(out.gain_g, g.gains, nh), n, snh, &one,
                transfer, h, stt);  // T_j = I − Γ_j K_j
        strided(h, h, n, &minus_one, slot(out.down, g.gains, nh), h, snh, slot(out.gain_a, g.gains, nh), n, snh, &one,
                transfer + hh, h, stt);  // U_j = I − Φ_j H_j
      }
      return;
    }
    // The direct form, as the host's (sweep_matrices): X = ρΦ (h × n, in Ẽ⁺ρ's scratch); N = L' + Ẽ⁺X in L' and
    // Γ = W Π⁺ C + X in place of W Π⁺ C (fold_edge_products: Ẽ⁺ is sparse, where the dense (Ẽ⁺ρ)Φ cost n²h);
    // N⁻¹ (N overwritten); K = N⁻¹Ẽ⁺; Ẽ⁺ρ + Ẽ⁻ in the scratch (edges_with_rho); H = N⁻¹(Ẽ⁺ρ + Ẽ⁻) in one product.
    // A p group where s and p decouple (n = 2h): 24 orders³ per slice, 34 before (session 34).
    const unsigned fold_blocks = unsigned((std::size_t(n) * (n + h) + sweep_threads - 1) / sweep_threads),
                   edge_blocks = unsigned((std::size_t(n) * h + sweep_threads - 1) / sweep_threads);
    gemm(h, n, h, &one, l_rho, h, l_down, h, &zero, l_erho, h);
    fold_edge_products<<<dim3{fold_blocks, unsigned(b)}, sweep_threads, 0, stream>>>(list(l_eplus), list(l_erho),
                                                                                   list(l_local), list(l_up), n, h, nm);
    GS_CUDA_CHECK_LAUNCH();
    invert(n, l_local, l_inverse, l_largest, l_smallest);
    gemm(n, h, n, &one, l_inverse, n, l_eplus, n, &zero, l_gain_g, n);
    edges_with_rho<<<dim3{edge_blocks, unsigned(b)}, sweep_threads, 0, stream>>>(list(l_eplus), list(l_rho),
                                                                               list(l_eminus), list(l_erho), n, h, nm);
    GS_CUDA_CHECK_LAUNCH();
    gemm(n, h, n, &one, l_inverse, n, l_erho, n, &zero, l_gain_a, n);
    // The application's transfers T = I − Γ K and U = I − Φ H (from the identity set above).
    gemm(h, h, n, &minus_one, l_up, h, l_gain_g, n, &one, l_transfer_up, h);
    gemm(h, h, n, &minus_one, l_down, h, l_gain_a, n, &one, l_transfer_down, h);
    if (st.p > 0) {  // ρ ← S_p (ρ − Γ H) S_p
      gemm(h, h, n, &minus_one, l_up, h, l_gain_a, n, &one, l_rho, h);
      scale(l_rho, l_step, 1, 1);
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
  if (scratch_size > 0) {
    // A run's L' singular where N may not be (a resonance of the slice alone), or a composite matrix of the
    // doubling singular (a resonance of a part of the run): the direct form.
    std::vector<double> layer_largest_host(layer_largest.size()), layer_smallest_host(layer_smallest.size()),
        composite_largest_host(composite_largest.size()), composite_smallest_host(composite_smallest.size());
    layer_largest.download(layer_largest_host);
    layer_smallest.download(layer_smallest_host);
    composite_largest.download(composite_largest_host);
    composite_smallest.download(composite_smallest_host);
    for (int k = 0; k < ng; ++k) {
      for (int p = 0; p < nz; ++p)
        if (bottom[std::size_t(k)][std::size_t(p)] == p &&
            !regular_factorisation(layer_largest_host[std::size_t(k) * nz + p], layer_smallest_host[std::size_t(k) * nz + p]))
          return device_sweep_matrices(in, false);
      for (int c = 0; c < composites[std::size_t(k)]; ++c)
        if (!regular_factorisation(composite_largest_host[3 * std::size_t(k) * nz + c],
                                   composite_smallest_host[3 * std::size_t(k) * nz + c]))
          return device_sweep_matrices(in, false);
    }
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
