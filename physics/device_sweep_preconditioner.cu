// The sweep preconditioner P = A⁻¹ (sweep_preconditioner.hpp) on the device.
//
// Set-up: the host builds the z-local inputs (sweep_inputs without the dense parts: the row coefficients,
// Ẽ± and ρ_{N−1} per group) in complex128 and uploads them with the kernels; assemble_group builds L'_p, Φ_p
// and W Π⁺ C_p here; the recursion runs here, from the bottom slice up, in complex128, each step over the groups of equal shape (n, h), the kernels batched over them:
//   Ẽ⁺ρ (zgemm), N = L' + (Ẽ⁺ρ)Φ (zgemm, into L'), largest |N_ij| (kernel), N⁻¹ and the smallest
//   pivot (invert_batched, device_inverse.hpp), K = N⁻¹Ẽ⁺, H = N⁻¹(Ẽ⁺ρ) + N⁻¹Ẽ⁻, Γ = W Π⁺ C + ρΦ (zgemm,
//   into the W Π⁺ C), ρ ← ρ − ΓH (zgemm), ρ ← S ρ S (kernel),
// three kernels per slice and shape and seven cuBLAS zgemm per group, on the calling thread's default
// stream, no host round trip
// until the singularity test at the end (the host's: smallest pivot against largest element, per group
// and slice). The matrices stay in complex128 also for complex64 solves: rounded to complex64, the
// preconditioned operator of validation/peers' thin metal at M = 60 (ε = −20 + 1.5i, p) was too far
// from the identity for GMRES(100) to converge in 3000 iterations (call C of session 12).
// Application: one launch on the problem's stream, one thread block per (right-hand side, group of its
// incidence). The block runs the rhs's sweep up (v_p = N_p⁻¹ b_p − K_p g, then g ← s_p (g + Γ_p v_p),
// from the bottom slice) and down (x_p = v_p − H_p a, then a ← s_{p+1} (a + Φ_p x_p)); v_p is kept in y
// between the two. Each product (block_product) reads a slice matrix column-major, a warp's lanes over 32
// consecutive rows (consecutive addresses) and the 32 warps over slices of the columns, so a thread's
// loads are few and independent; the vectors (the slice's n values, g and a) sit in shared memory in
// complex128 and every product sums in complex128. The depth is serial in the slices, as the
// z-operator's unchunked sweeps were; the solves this preconditions take one or two iterations. (One
// thread per row, each summing its whole row, was measured first: on si_lines_metrology's 72 slices at
// n = 82 the Krylov phase it preconditioned took as long as averaged's 45× more iterations, session 12.)
#include <algorithm>
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

/// x, y: batched layout, element (slice p, rhs r, component c, order m) at (p·nr + r)·3·nm + c·nm + m.
template <class Real>
__global__ void __launch_bounds__(apply_threads)
    apply_sweep(const DeviceGroup* __restrict__ groups, const int* __restrict__ first_group,
                const int* __restrict__ rhs_incidence, const double2* __restrict__ inverse,
                const double2* __restrict__ gain_g, const double2* __restrict__ gain_a,
                const double2* __restrict__ up, const double2* __restrict__ down,
                const double2* __restrict__ step, const Complex2<Real>* x, Complex2<Real>* y, int nm, int nz,
                int nr) {
  using V = Complex2<Real>;
  extern __shared__ double2 shared[];  // b [n], v or x_p [n], g [h], a [h], partial sums [sweep_warps·32]
  const int r = blockIdx.x, a = rhs_incidence[r], k = first_group[a] + int(blockIdx.y);
  if (k >= first_group[a + 1]) return;
  const DeviceGroup group = groups[k];
  const int n = group.nc * nm, h = group.np * nm;
  double2 *b = shared, *v = shared + n, *g = v + n, *amplitude = g + h, *partial = amplitude + h;
  const auto element = [&](int p, int i) {
    return (std::size_t(p) * nr + r) * 3 * std::size_t(nm) + std::size_t(group.components[i / nm]) * nm + i % nm;
  };
  const auto step_at = [&](int p, int i) { return step[(std::size_t(a) * nz + p) * nm + i % nm]; };
  for (int i = threadIdx.x; i < h; i += blockDim.x) g[i] = amplitude[i] = double2{0, 0};
  for (int p = nz - 1; p >= 0; --p) {  // up: v_p = N_p⁻¹ b_p − K_p g, then g ← s_p (g + Γ_p v_p)
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const V e = x[element(p, i)];
      b[i] = {double(e.x), double(e.y)};
    }
    __syncthreads();
    const std::size_t at = group.gains + std::size_t(p) * n * h;
    block_product(inverse + group.matrices + std::size_t(p) * n * n, n, n, b, partial,
                  [&](int i, double2 t) { v[i] = t; });
    block_product(gain_g + at, n, h, g, partial, [&](int i, double2 c) {
      v[i] = {v[i].x - c.x, v[i].y - c.y};
      y[element(p, i)] = V{Real(v[i].x), Real(v[i].y)};
    });
    if (p > 0)
      block_product(up + at, h, n, v, partial,
                    [&](int i, double2 c) { g[i] = times(step_at(p, i), {g[i].x + c.x, g[i].y + c.y}); });
  }
  for (int p = 0; p < nz; ++p) {  // down: x_p = v_p − H_p a, then a ← s_{p+1} (a + Φ_p x_p)
    const std::size_t at = group.gains + std::size_t(p) * n * h;
    block_product(gain_a + at, n, h, amplitude, partial, [&](int i, double2 c) {
      const V e = y[element(p, i)];  // v_p, written by this block's warp 0 above
      v[i] = {double(e.x) - c.x, double(e.y) - c.y};
      y[element(p, i)] = V{Real(v[i].x), Real(v[i].y)};
    });
    if (p + 1 < nz)
      block_product(down + at, h, n, v, partial, [&](int i, double2 c) {
        amplitude[i] = times(step_at(p + 1, i), {amplitude[i].x + c.x, amplitude[i].y + c.y});
      });
  }
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

/// largest[k] = max |A_ij| of the n×n matrix matrices[k] (infinite where an element is not finite); a
/// block per matrix.
__global__ void __launch_bounds__(sweep_threads)
    largest_of(const cuDoubleComplex* const* matrices, int n, double* const* largest) {
  const cuDoubleComplex* a = matrices[blockIdx.x];
  double m = 0;
  for (std::size_t i = threadIdx.x; i < std::size_t(n) * n; i += blockDim.x) {
    const double v = hypot(a[i].x, a[i].y);
    m = isfinite(v) ? fmax(m, v) : INFINITY;
  }
  m = block_reduce(m, [](double x, double y) { return fmax(x, y); });
  if (threadIdx.x == 0) *largest[blockIdx.x] = m;
}

/// ρ_k(i, j) ← s_k(i) ρ_k(i, j) s_k(j) for the h×h matrices rho[k], s_k(i) = steps[k][i % orders]; a block
/// per matrix.
__global__ void __launch_bounds__(sweep_threads)
    scale_by_steps(cuDoubleComplex* const* rho, const double2* const* steps, int h, int orders) {
  cuDoubleComplex* r = rho[blockIdx.x];
  const double2* s = steps[blockIdx.x];
  for (int e = threadIdx.x; e < h * h; e += blockDim.x) {
    const double2 si = s[(e % h) % orders], sj = s[(e / h) % orders];
    const double2 f = {si.x * sj.x - si.y * sj.y, si.x * sj.y + si.y * sj.x};
    const cuDoubleComplex v = r[e];
    r[e] = {f.x * v.x - f.y * v.y, f.x * v.y + f.y * v.x};
  }
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

/// The sweep's matrices in complex128 on the device, from the inputs (the recursion of
/// sweep_preconditioner.hpp, batched over the groups of equal shape). Throws as the host's sweep_matrices
/// does. Runs on the calling thread's default stream and waits for it (the singularity test's download).
struct DeviceSweepMatrices {
  DeviceBuffer<double2> inverse, gain_g, gain_a, up, down, step;
};

DeviceSweepMatrices device_sweep_matrices(const SweepInputs& in) {
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
  // Per group: Ẽ⁺ρ (n × h); per (group, slice): the largest element and the smallest pivot.
  std::size_t e_rho_size = 0;
  std::vector<std::size_t> e_rho_at;
  for (const SweepGroup& g : in.groups) {
    e_rho_at.push_back(e_rho_size);
    e_rho_size += g.n(nm) * g.h(nm);
  }
  DeviceBuffer<double2> e_rho(e_rho_size);
  DeviceBuffer<double> largest{std::size_t(ng) * nz}, smallest{std::size_t(ng) * nz};
  // Shapes (n, h) and their groups.
  std::map<std::pair<int, int>, std::vector<int>> shapes;
  for (int k = 0; k < ng; ++k)
    shapes[{int(in.groups[std::size_t(k)].n(nm)), int(in.groups[std::size_t(k)].h(nm))}].push_back(k);
  // Every pointer array of every step (slice p, shape), built on the host and uploaded once: the step's
  // lists one after another, each with one pointer per group of the shape.
  using Z = cuDoubleComplex;
  std::vector<void*> host_pointers;
  struct Step {
    std::size_t first;  // index of the step's first pointer list in host_pointers
    int n, h, count;
  };
  enum List { l_eplus, l_eminus, l_rho, l_erho, l_local, l_down, l_inverse, l_gain_g, l_gain_a, l_up, l_largest,
              l_smallest, l_step, lists };
  std::vector<Step> steps;  // (p from nz − 1 down, shape in map order)
  const auto z = [](DeviceBuffer<double2>& b, std::size_t at) { return static_cast<void*>(b.data() + at); };
  for (int p = nz - 1; p >= 0; --p)
    for (const auto& [shape, members] : shapes) {
      const auto [n, h] = shape;
      Step st{host_pointers.size(), n, h, int(members.size())};
      for (int list = 0; list < lists; ++list)
        for (int k : members) {
          const SweepGroup& g = in.groups[std::size_t(k)];
          const std::size_t mat = g.matrices + std::size_t(p) * n * n, gain = g.gains + std::size_t(p) * n * h;
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
            case lists: break;
          }
          host_pointers.push_back(ptr);
        }
      steps.push_back(st);
    }
  DeviceBuffer<void*> pointers(host_pointers.size());
  pointers.upload(host_pointers);
  cublasHandle_t handle = CublasHandle::get();
  std::size_t workspace_bytes = 0;
  for (const Step& st : steps) workspace_bytes = std::max(workspace_bytes, inverse_workspace_bytes(st.n, st.count));
  DeviceBuffer<unsigned char> workspace(workspace_bytes);
  const Z one{1, 0}, zero{0, 0}, minus_one{-1, 0};
  std::size_t s = 0;
  for (int p = nz - 1; p >= 0; --p)
    for (std::size_t shape = 0; shape < shapes.size(); ++shape, ++s) {
      const Step& st = steps[s];
      const int n = st.n, h = st.h, b = st.count;
      const auto list = [&](List l) { return reinterpret_cast<Z**>(pointers.data() + st.first + std::size_t(l) * b); };
      const auto clist = [&](List l) { return reinterpret_cast<const Z* const*>(list(l)); };
      // C ← α A B + β C for every group, one cuBLAS call per group: cublasZgemmBatched changes the last bits
      // of a product with the batch count (1 × 1 against 5 groups of the shapes (n, h) = (15, 15) and (30, 15),
      // H100, session 20), and a member's result must not depend on the members beside it.
      const auto gemm = [&](int rows, int columns, int inner, const Z* alpha, List a, int lda, List bl, int ldb,
                            const Z* beta, List c, int ldc) {
        const auto at = [&](List l, int k) { return static_cast<Z*>(host_pointers[st.first + std::size_t(l) * b + std::size_t(k)]); };
        for (int k = 0; k < b; ++k)
          GS_CUBLAS_TRY(cublasZgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, rows, columns, inner, alpha, at(a, k), lda, at(bl, k),
                                    ldb, beta, at(c, k), ldc));
      };
      // Ẽ⁺ρ; N = L' + (Ẽ⁺ρ)Φ in L'.
      gemm(n, h, h, &one, l_eplus, n, l_rho, h, &zero, l_erho, n);
      gemm(n, n, h, &one, l_erho, n, l_down, h, &one, l_local, n);
      largest_of<<<unsigned(b), sweep_threads, 0, cudaStreamPerThread>>>(clist(l_local), n,
                                                                           reinterpret_cast<double* const*>(list(l_largest)));
      GS_CUDA_CHECK_LAUNCH();
      // N⁻¹ of every group at once (blocked Gauss–Jordan: cuSOLVER's one-matrix LU and getrs in turn were
      // latency-bound, 0.68 ms at n = 242, and cuBLAS's batched ones change bits with the batch); N is
      // overwritten.
      invert_batched(reinterpret_cast<std::complex<double>* const*>(list(l_local)),
                     reinterpret_cast<std::complex<double>* const*>(list(l_inverse)),
                     reinterpret_cast<double* const*>(list(l_smallest)), n, b, workspace.data(), cudaStreamPerThread);
      // K = N⁻¹Ẽ⁺; H = N⁻¹(Ẽ⁺ρ) + N⁻¹Ẽ⁻; Γ = W Π⁺ C + ρΦ (in place of W Π⁺ C).
      gemm(n, h, n, &one, l_inverse, n, l_eplus, n, &zero, l_gain_g, n);
      gemm(n, h, n, &one, l_inverse, n, l_erho, n, &zero, l_gain_a, n);
      gemm(n, h, n, &one, l_inverse, n, l_eminus, n, &one, l_gain_a, n);
      gemm(h, n, h, &one, l_rho, h, l_down, h, &one, l_up, h);
      if (p > 0) {  // ρ ← S_p (ρ − Γ H) S_p
        gemm(h, h, n, &minus_one, l_up, h, l_gain_a, n, &one, l_rho, h);
        scale_by_steps<<<unsigned(b), sweep_threads, 0, cudaStreamPerThread>>>(
            list(l_rho), reinterpret_cast<const double2* const*>(list(l_step)), h, nm);
        GS_CUDA_CHECK_LAUNCH();
      }
    }
  // The host's singularity test, per group from the bottom slice up: the first failing group's first
  // failing slice is named.
  std::vector<double> largest_host(largest.size()), smallest_host(smallest.size());
  largest.download(largest_host);  // waits for the recursion
  smallest.download(smallest_host);
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
    std::size_t largest = 0;
    for (const SweepGroup& s : sweep.groups) {
      DeviceGroup d;
      d.nc = int(s.components.size());
      d.np = int(s.polarisations.size());
      for (int i = 0; i < d.nc; ++i) d.components[i] = s.components[std::size_t(i)];
      d.matrices = s.matrices;
      d.gains = s.gains;
      groups.push_back(d);
      largest = std::max(largest, 2 * (s.n(nm_) + s.h(nm_)) + std::size_t(sweep_warps) * 32);
    }
    const std::vector<int> first = first_groups(sweep.groups, sweep.incidences);
    for (std::size_t a = 0; a < std::size_t(sweep.incidences); ++a) max_groups_ = std::max(max_groups_, first[a + 1] - first[a]);
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
    // The device's maximum, not this preconditioner's need: the attribute is the kernel function's, shared by
    // every preconditioner alive, and one needing less must not lower another's limit.
    GS_CUDA_TRY(cudaFuncSetAttribute(apply_sweep<Real>, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
    groups_ = DeviceBuffer<DeviceGroup>(groups.size());
    groups_.upload(groups);
    first_group_ = DeviceBuffer<int>(first.size());
    first_group_.upload(first);
    rhs_incidence_ = DeviceBuffer<int>(rhs_incidence.size());
    rhs_incidence_.upload(rhs_incidence);
    DeviceSweepMatrices m = device_sweep_matrices(sweep);
    inverse_ = std::move(m.inverse);
    gain_g_ = std::move(m.gain_g);
    gain_a_ = std::move(m.gain_a);
    up_ = std::move(m.up);
    down_ = std::move(m.down);
    step_ = std::move(m.step);
    // The set-up ran on this thread's default stream; apply uses the problem's: wait for the former.
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));
  }

  [[nodiscard]] Memory memory() const override { return Memory::device; }

  void apply(const Complex* x, Complex* y, Stream stream) override {
    const dim3 grid{unsigned(nr_), unsigned(max_groups_)};
    apply_sweep<Real><<<grid, apply_threads, shared_bytes_, stream>>>(
        groups_.data(), first_group_.data(), rhs_incidence_.data(), inverse_.data(), gain_g_.data(), gain_a_.data(),
        up_.data(), down_.data(), step_.data(), reinterpret_cast<const V*>(x), reinterpret_cast<V*>(y), nm_, nz_, nr_);
    GS_CUDA_CHECK_LAUNCH();
  }

 private:
  int nm_, nz_, nr_, max_groups_ = 1;
  std::size_t shared_bytes_ = 0;
  DeviceBuffer<DeviceGroup> groups_;
  DeviceBuffer<int> first_group_, rhs_incidence_;
  DeviceBuffer<double2> inverse_, gain_g_, gain_a_, up_, down_, step_;  // complex128 whatever Real is
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
