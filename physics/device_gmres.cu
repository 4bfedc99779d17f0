// GMRES's Arnoldi cycles with the per-rhs scalars in device memory (device.hpp, DeviceArnoldi; docs/solver.md §2).
//
// Layout of the batched vectors as vector_space.hpp: element (slice p, rhs r, j) at (p·n_rhs + r)·block + j; a
// "row" is one (p, r) pair. The vector kernels give each thread block one rhs (blockIdx.y) and a strided set of
// chunks of its rows, so the rhs, its flag and its coefficients are uniform per block, and write one complex128
// partial sum per (sum, rhs, block); small kernels add the partial sums in block order (deterministic) on the
// device.
//
// Per-rhs scalars, all complex128 (double2) or double, in device memory:
//   H(r, column c, row i)  at hessenberg[(r·restart + c)·(restart + 1) + i]   (column-major per rhs, as the host)
//   g(r, i)                at g[r·(restart + 1) + i]
//   rotation (c, s)(r, i)  at rotation_c / rotation_s[r·restart + i]
//   coefficients a(i, r)   at coefficient[i·rhs + r]  (what the vector kernels add: −h, or y)
// Complex Givens rotations [[c, s], [−conj(s), c]] (c real), exactly as krylov.cpp's host iteration.
//
// Synchronisation: every call enqueues on the space's stream and returns; the only waits are
// no_rhs_in_cycle_after() (cudaEventSynchronize on one step's event) and the synchronous upload of ‖b‖ in the
// constructor (cudaMemcpy).
//
// CUDA graphs (graph_step, device.hpp): one graph per step j, captured at its first use and kept until the
// object goes. What a step enqueues is capturable: kernels whose arguments are fixed per j (device pointers
// of the basis and of this object's buffers, allocated in the constructor; the tolerance, fixed per object)
// and one device-to-host copy of the flag into pinned memory that the graph writes and the host only reads.
// The per-cycle inputs (β, the budgets) reach the device through start_cycle's copies, outside the graphs.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dependent_launch.cuh"
#include "core/device_buffer.hpp"
#include "core/device_complex.cuh"
#include "physics/device.hpp"
#include "physics/device_graph.cuh"
#include "physics/device_scalars.cuh"

namespace gratingsim::physics {
namespace {

/// Threads per block of the vector kernels, and elements per chunk of the Gram–Schmidt passes.
constexpr int threads_per_block = 256;
constexpr int warps_per_block = threads_per_block / 32;
/// Threads per block of arnoldi_update (a block per rhs).
constexpr int scalar_threads = 128;
/// Events of the last steps kept for no_rhs_in_cycle_after() (the host looks one or two steps back: KrylovSettings::steps_ahead).
constexpr int event_ring = 4;
/// The largest restart: the project passes keep one complex128 sum per basis vector in shared memory.
constexpr int max_restart = 2000;

using namespace device_scalars;

/// (a, b) ← (c a + s b, −conj(s) a + c b).
__device__ void rotate(double c, double2 s, double2& a, double2& b) {
  const double2 t = add(scaled(c, a), mul(s, b));
  b = add(mul(scaled(-1, conjugate(s)), a), scaled(c, b));
  a = t;
}

/// What one pass over the basis V_0..V_{count−1} does to w, per rhs r:
///   project:           sums_i = Σ conj(V_i)·w                            (CGS pass 1: h = Vᴴ w)
///   subtract_project:  w += Σ a_i V_i, then sums_i = Σ conj(V_i)·w       (pass-1 update fused with pass-2 dots)
///   subtract_norm:     w += Σ a_i V_i, then sum = Σ |w|²                 (pass-2 update fused with ‖w‖)
///   update:            w += Σ a_i V_i                                    (x += V y)
enum class Pass { project, subtract_project, subtract_norm, update };

/// One pass (above) over the rows of rhs r = blockIdx.y, in chunks shared among the blockIdx.x; coefficients
/// a_i = coefficient[i·rhs + r]. Rhs with in_cycle[r] = 0 are skipped whole (nothing read or written; their
/// partial sums are stale and masked by the readers); in_cycle = nullptr: every rhs. The rows are taken in chunks
/// of threads_per_block elements: each thread updates its element of w (reading V_i once, coalesced), the chunk of
/// w goes to shared memory, then warp k sums conj(V_i)·w over the chunk for i ≡ count − 1 − k (mod warps), re-reading
/// V_i's chunk just read (from L1/L2, not DRAM) — the basis is read from memory once per pass. (The cache footprint
/// of the re-read is resident threads × count × sizeof(V): about 55 MB at count 41 on an H100 in complex64, near its
/// L2; gram_schmidt_blocks_per_rhs() is the knob if the profile shows the re-read reaching DRAM.) Sums in double; partial
/// sums to partial[(i·rhs + r)·gridDim.x + blockIdx.x] (norm: partial[r·gridDim.x + blockIdx.x].x).
/// Dynamic shared memory: count complex128 sums for the project passes.
template <class Real, Pass pass>
__global__ void __launch_bounds__(threads_per_block)
    gram_schmidt_pass(const Complex2<Real>* __restrict__ basis, std::size_t stride, int count,
                      Complex2<Real>* __restrict__ w, const double2* __restrict__ coefficient,
                      const int* __restrict__ in_cycle, double2* __restrict__ partial, int slices, int rhs, int block) {
  wait_for_previous_kernel();
  using V = Complex2<Real>;
  constexpr bool subtract = pass != Pass::project;
  constexpr bool project = pass == Pass::project || pass == Pass::subtract_project;
  constexpr bool norm = pass == Pass::subtract_norm;
  extern __shared__ double2 sums[];
  __shared__ V chunk[threads_per_block];
  __shared__ double warp_norms[warps_per_block];
  const int r = int(blockIdx.y);
  if (in_cycle != nullptr && in_cycle[r] == 0) return;  // uniform per block: before any barrier
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  if constexpr (project) {
    for (int i = int(threadIdx.x); i < count; i += blockDim.x) sums[i] = {0, 0};
    __syncthreads();
  }
  double squares = 0;
  // Chunk c of this rhs: row p = c / chunks_per_row, elements from (c mod chunks_per_row)·threads_per_block;
  // block b takes the chunks c ≡ b (mod gridDim.x), so the blocks' work differs by one chunk at most.
  const int chunks_per_row = (block + threads_per_block - 1) / threads_per_block;
  const long long chunks = (long long)slices * chunks_per_row;
  for (long long c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int p = int(c / chunks_per_row), start = int(c % chunks_per_row) * threads_per_block;
    const std::size_t row = (std::size_t(p) * rhs + r) * block;
    {
      const int e = start + int(threadIdx.x), n = min(threads_per_block, block - start);
      if (e < block) {
        V u = w[row + e];
        if constexpr (subtract) {
          for (int i = 0; i < count; ++i) {
            const double2 a = coefficient[std::size_t(i) * rhs + r];
            const Real ar = Real(a.x), ai = Real(a.y);
            const V v = basis[std::size_t(i) * stride + row + e];
            u.x += ar * v.x - ai * v.y;
            u.y += ar * v.y + ai * v.x;
          }
          w[row + e] = u;
        }
        if constexpr (norm) squares += double(u.x) * double(u.x) + double(u.y) * double(u.y);
        if constexpr (project) chunk[threadIdx.x] = u;
      }
      if constexpr (project) {
        __syncthreads();  // the chunk of w is complete
        // Newest first: the vectors the update read last are the likeliest still in L1.
        for (int i = count - 1 - warp; i >= 0; i -= warps_per_block) {
          const V* v = basis + std::size_t(i) * stride + row + start;
          double re = 0, im = 0;
          for (int q = lane; q < n; q += 32) {
            const V a = v[q], b = chunk[q];
            const double ax = a.x, ay = a.y, bx = b.x, by = b.y;
            re += ax * bx + ay * by;  // conj(a)·b
            im += ax * by - ay * bx;
          }
          re = warp_sum(re);
          im = warp_sum(im);
          if (lane == 0) sums[i] = {sums[i].x + re, sums[i].y + im};  // only one warp touches sums[i]
        }
        __syncthreads();  // before the next chunk overwrites the shared chunk
      }
    }
  }
  if constexpr (project) {
    for (int i = int(threadIdx.x); i < count; i += blockDim.x)
      partial[(std::size_t(i) * rhs + r) * gridDim.x + blockIdx.x] = sums[i];
  }
  if constexpr (norm) {
    squares = warp_sum(squares);
    if (lane == 0) warp_norms[warp] = squares;
    __syncthreads();
    if (threadIdx.x == 0) {
      double total = 0;
      for (int k = 0; k < warps_per_block; ++k) total += warp_norms[k];
      partial[std::size_t(r) * gridDim.x + blockIdx.x] = {total, 0};
    }
  }
}

/// After a project pass over `count` basis vectors, one warp per k = i·rhs + r: h = Σ_b partial[k·blocks + b],
/// h = 0 for rhs out of the cycle; H(r, column, i) = h (first pass) or += h (second), and the next update's
/// coefficient −h.
__global__ void finish_projection(const double2* __restrict__ partial, int blocks, int count, int rhs,
                                  const int* __restrict__ in_cycle, double2* __restrict__ hessenberg, int column,
                                  int restart, bool accumulate, double2* __restrict__ coefficient) {
  wait_for_previous_kernel();
  const int k = int((blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = int(threadIdx.x) % 32;
  if (k >= count * rhs) return;  // uniform per warp
  const int i = k / rhs, r = k % rhs;
  double2 h{0, 0};
  if (in_cycle[r] != 0) h = warp_sum_partials(partial + std::size_t(k) * blocks, blocks, lane);
  if (lane != 0) return;
  double2& entry = hessenberg[(std::size_t(r) * restart + column) * (restart + 1) + i];
  entry = accumulate ? add(entry, h) : h;
  coefficient[k] = scaled(-1, h);
}

/// Starts a cycle: g = β e_1, the flags and the dimension reached, per rhs; any_in_cycle of every step zeroed
/// (arnoldi_update only sets it).
__global__ void start_cycle_scalars(const double* __restrict__ beta, const int* __restrict__ budget, int rhs,
                                    int restart, double2* __restrict__ g, int* __restrict__ in_cycle,
                                    int* __restrict__ dimension, int* __restrict__ any_in_cycle) {
  const int r = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (r == 0)
    for (int j = 0; j < restart; ++j) any_in_cycle[j] = 0;
  if (r >= rhs) return;
  for (int i = 0; i <= restart; ++i) g[std::size_t(r) * (restart + 1) + i] = {i == 0 ? beta[r] : 0.0, 0};
  in_cycle[r] = budget[r] > 0 ? 1 : 0;
  dimension[r] = 0;
}

/// The end of Arnoldi step j, one block per rhs r: a warp adds the norm pass's partial sums into norms[r]
/// (= ‖w_r‖²); scale[r] = 1/‖w‖ for rhs in the cycle with ‖w‖ > 0, else 0 (w is then zeroed, as on the host);
/// for rhs in the cycle, H(j + 1, j) = ‖w‖, the previous rotations and a new one applied to column j and the
/// new one to g, dimension j + 1, and the rhs leaves the cycle when |g_{j+1}|/‖b‖ ≤ tolerance, ‖w‖ = 0 (happy
/// breakdown) or its step budget is spent; a rhs still in the cycle sets any_in_cycle (zeroed by
/// start_cycle_scalars). The column and the rotations are staged in shared memory by all threads at once: the
/// rotations are a serial chain of j steps, which read from global memory took a memory latency each (10.5 µs
/// per step at mean depth 20 on an H200, problem case 1). Dynamic shared memory: arnoldi_shared_bytes(j).
__global__ void __launch_bounds__(scalar_threads)
    arnoldi_update(const double2* __restrict__ partial, int blocks, int j, int restart,
                   double2* __restrict__ hessenberg, double* __restrict__ rotation_c, double2* __restrict__ rotation_s,
                   double2* __restrict__ g, int* __restrict__ in_cycle, int* __restrict__ dimension,
                   const int* __restrict__ budget, const double* __restrict__ b_norm, double tolerance,
                   double* __restrict__ norms, double2* __restrict__ scale, int* __restrict__ any_in_cycle) {
  wait_for_previous_kernel();
  extern __shared__ double2 staged[];  // column 0..j + 1, then s_0..s_{j−1}, then c_0..c_{j−1}
  __shared__ double squares;
  const int r = int(blockIdx.x), lane = int(threadIdx.x) % 32;
  const bool in = in_cycle[r] != 0;  // uniform per block
  double2* const col = hessenberg + (std::size_t(r) * restart + j) * (restart + 1);
  double* const c = rotation_c + std::size_t(r) * restart;
  double2* const s = rotation_s + std::size_t(r) * restart;
  double2* const column = staged;
  double2* const s_staged = staged + (j + 2);
  double* const c_staged = reinterpret_cast<double*>(s_staged + j);
  if (threadIdx.x < 32) {
    const double sum = warp_sum_partials(partial + std::size_t(r) * blocks, blocks, lane).x;
    if (lane == 0) squares = sum;
  }
  if (in) {
    for (int i = int(threadIdx.x); i <= j; i += blockDim.x) column[i] = col[i];
    for (int i = int(threadIdx.x); i < j; i += blockDim.x) {
      s_staged[i] = s[i];
      c_staged[i] = c[i];
    }
  }
  __syncthreads();
  const double hn = sqrt(squares);
  if (threadIdx.x == 0) {
    norms[r] = squares;
    scale[r] = {in && hn > 0 ? 1.0 / hn : 0.0, 0};
  }
  if (!in) return;  // uniform per block
  if (threadIdx.x == 0) {
    double2* const gr = g + std::size_t(r) * (restart + 1);
    column[j + 1] = {hn, 0};
    for (int i = 0; i < j; ++i) rotate(c_staged[i], s_staged[i], column[i], column[i + 1]);
    // The rotation zeroing b in (a, b): c = |a|/ρ, s = (a/|a|)·conj(b)/ρ, ρ = sqrt(|a|² + |b|²).
    const double2 a = column[j], b = column[j + 1];
    double cj;
    double2 sj;
    if (is_zero(b)) {
      cj = 1;
      sj = {0, 0};
    } else if (is_zero(a)) {
      cj = 0;
      sj = {1, 0};
    } else {
      const double abs_a = magnitude(a), rho = hypot(abs_a, magnitude(b));
      cj = abs_a / rho;
      sj = scaled(1 / rho, mul(scaled(1 / abs_a, a), conjugate(b)));
    }
    c[j] = cj;
    s[j] = sj;
    rotate(cj, sj, column[j], column[j + 1]);
    rotate(cj, sj, gr[j], gr[j + 1]);
    dimension[r] = j + 1;
    const double estimate = magnitude(gr[j + 1]) / b_norm[r];
    if (estimate <= tolerance || hn == 0 || j + 1 >= budget[r]) in_cycle[r] = 0;
    else *any_in_cycle = 1;  // every writer writes 1: no atomic needed
  }
  __syncthreads();
  for (int i = int(threadIdx.x); i <= j + 1; i += blockDim.x) col[i] = column[i];
}

/// arnoldi_update's dynamic shared memory at step j.
std::size_t arnoldi_shared_bytes(int j) {
  return std::size_t(j + 2) * sizeof(double2) + std::size_t(j) * (sizeof(double2) + sizeof(double));
}

/// w_r *= scale[r], grid (slices, rhs).
template <class Real>
__global__ void scale_rows(Complex2<Real>* w, const double2* __restrict__ scale, int rhs, int block) {
  wait_for_previous_kernel();
  const int r = int(blockIdx.y);
  const double2 a = scale[r];
  const Real ar = Real(a.x), ai = Real(a.y);
  const std::size_t row = (std::size_t(blockIdx.x) * rhs + r) * block;
  for (int e = int(threadIdx.x); e < block; e += blockDim.x) {
    const auto v = w[row + e];
    w[row + e] = {ar * v.x - ai * v.y, ar * v.y + ai * v.x};
  }
}

/// H y = g, H upper triangular of rhs r = blockIdx.x's dimension k (column-oriented back substitution: y_i =
/// s_i/H(i, i), then s_l −= H(l, i) y_i for l < i, s = g initially, in shared memory); coefficient[i·rhs + r] = y_i
/// for i < k and 0 for k ≤ i < steps. Dynamic shared memory: steps complex128.
__global__ void back_substitute(const double2* __restrict__ hessenberg, const double2* __restrict__ g,
                                const int* __restrict__ dimension, int restart, int steps, int rhs,
                                double2* __restrict__ coefficient) {
  extern __shared__ double2 s[];
  const int r = int(blockIdx.x), k = dimension[r];
  for (int i = int(threadIdx.x); i < steps; i += blockDim.x)
    s[i] = i < k ? g[std::size_t(r) * (restart + 1) + i] : double2{0, 0};
  __syncthreads();
  for (int i = k - 1; i >= 0; --i) {
    const double2* col = hessenberg + (std::size_t(r) * restart + i) * (restart + 1);
    const double2 y = divide(s[i], col[i]);  // s[i] is final: only s[l < i] change below
    for (int l = int(threadIdx.x); l < i; l += blockDim.x) s[l] = sub(s[l], mul(col[l], y));
    if (threadIdx.x == 0) coefficient[std::size_t(i) * rhs + r] = y;
    __syncthreads();
  }
  for (int i = k + int(threadIdx.x); i < steps; i += blockDim.x) coefficient[std::size_t(i) * rhs + r] = {0, 0};
}

/// Blocks per rhs of the Gram–Schmidt passes (device_scalars::blocks_per_rhs), by the least of the three passes'
/// occupancy at the largest shared memory; a chunk is threads_per_block elements of one slice.
template <class Real>
int gram_schmidt_blocks_per_rhs(const BatchLayout& l, int restart) {
  const std::size_t shared = std::size_t(restart + 1) * sizeof(double2);
  int resident = 1 << 30, n = 0;
  GS_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gram_schmidt_pass<Real, Pass::project>,
                                                         threads_per_block, shared));
  resident = std::min(resident, n);
  GS_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gram_schmidt_pass<Real, Pass::subtract_project>,
                                                         threads_per_block, shared));
  resident = std::min(resident, n);
  GS_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gram_schmidt_pass<Real, Pass::subtract_norm>,
                                                         threads_per_block, 0));
  resident = std::min(resident, n);
  return device_scalars::blocks_per_rhs(resident, l.slices * ((l.block + threads_per_block - 1) / threads_per_block));
}


template <class Real>
class DeviceArnoldiImpl final : public DeviceArnoldi<Real> {
 public:
  using V = Complex2<Real>;

  DeviceArnoldiImpl(VectorSpace<Real>& space, int first_basis, int x, int restart, double tolerance,
                    std::span<const double> b_norm)
      : space_(space),
        layout_(space.layout()),
        rhs_(int(space.layout().rhs)),
        restart_(restart),
        first_basis_(first_basis),
        tolerance_(tolerance),
        stream_(space.stream()),
        blocks_(gram_schmidt_blocks_per_rhs<Real>(space.layout(), restart)),
        hessenberg_(std::size_t(rhs_) * restart * (restart + 1)),
        g_(std::size_t(rhs_) * (restart + 1)),
        rotation_c_(std::size_t(rhs_) * restart),
        rotation_s_(std::size_t(rhs_) * restart),
        coefficient_(std::size_t(rhs_) * (restart + 1)),
        partial_(std::size_t(rhs_) * (restart + 1) * std::size_t(blocks_)),
        scale_(rhs_),
        b_norm_(rhs_),
        beta_(rhs_),
        norms_(rhs_),
        in_cycle_(rhs_),
        budget_(rhs_),
        dimension_(rhs_),
        any_in_cycle_(restart),
        beta_host_(rhs_),
        budget_host_(rhs_),
        dimension_host_(rhs_),
        any_in_cycle_host_(restart) {
    GS_EXPECTS(space.memory() == Memory::device, "device GMRES: the vector space is not in device memory");
    GS_EXPECTS(restart >= 1 && restart <= max_restart,
            "device GMRES: restart must be in 1.." + std::to_string(max_restart) + ", got " + std::to_string(restart));
    GS_EXPECTS(first_basis >= 0 && first_basis + restart < space.count() && x >= 0 && x < space.count() &&
                (x < first_basis || x > first_basis + restart),
            "device GMRES: basis or solution vector out of the space");
    GS_EXPECTS(b_norm.size() == layout_.rhs, "device GMRES: one ‖b‖ per right-hand side");
    GS_EXPECTS(layout_.slices <= 0x7fffffffu && layout_.block <= 0x7fffffffu && layout_.rhs <= 65535,
            "device GMRES: layout too large");
    basis_ = reinterpret_cast<const V*>(space.data(first_basis));
    stride_ = std::size_t(space.data(first_basis + 1) - space.data(first_basis));
    for (int i = 0; i <= restart; ++i)
      GS_EXPECTS(space.data(first_basis + i) == space.data(first_basis) + std::size_t(i) * stride_,
              "device GMRES: the basis vectors are not evenly spaced in the space");
    x_ = reinterpret_cast<V*>(space.data(x));
    b_norm_.upload(b_norm);  // on this thread's default stream, landed when it returns
    // Every scalar defined before use: unused entries read as zeros, never as garbage.
    for (auto* buffer : {&hessenberg_, &g_, &rotation_s_, &coefficient_, &partial_, &scale_})
      GS_CUDA_TRY(cudaMemsetAsync(buffer->data(), 0, buffer->bytes(), stream_));
    GS_CUDA_TRY(cudaMemsetAsync(rotation_c_.data(), 0, rotation_c_.bytes(), stream_));
    GS_CUDA_TRY(cudaMemsetAsync(in_cycle_.data(), 0, in_cycle_.bytes(), stream_));
    for (cudaEvent_t& e : events_) GS_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    graphs_.assign(std::size_t(restart), nullptr);
    // arnoldi_update stages 40·j bytes (80 KB at the largest restart): above the default 48 KB, opt in.
    GS_CUDA_TRY(cudaFuncSetAttribute(arnoldi_update, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(arnoldi_shared_bytes(restart - 1))));
  }

  ~DeviceArnoldiImpl() override {
    // Buffers are freed in the order of this thread's default stream only (core/device_buffer.hpp):
    // wait for the work of stream_ that may still use them (graph replays included).
    cudaStreamSynchronize(stream_);  // no throw from a destructor
    for (cudaGraphExec_t graph : graphs_)
      if (graph) cudaGraphExecDestroy(graph);  // no throw from a destructor
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);  // no throw from a destructor
  }
  DeviceArnoldiImpl(const DeviceArnoldiImpl&) = delete;
  DeviceArnoldiImpl& operator=(const DeviceArnoldiImpl&) = delete;

  void start_cycle(int R, std::span<const double> beta, std::span<const int> budget) override {
    GS_EXPECTS(beta.size() == std::size_t(rhs_) && budget.size() == std::size_t(rhs_),
            "device GMRES: one β and one budget per right-hand side");
    // V_0 = R/β for rhs in the cycle, 0 for the others (host coefficients, as the host iteration).
    std::vector<std::complex<double>> inverse(rhs_);
    for (int r = 0; r < rhs_; ++r) inverse[r] = budget[r] > 0 ? 1.0 / beta[r] : 0.0;
    space_.copy(R, first_basis_);
    space_.scale(inverse, first_basis_);
    // The pinned staging is free: the previous cycle's copies from it completed before the restart's
    // synchronisation that preceded this call.
    std::copy(beta.begin(), beta.end(), beta_host_.data());
    std::copy(budget.begin(), budget.end(), budget_host_.data());
    GS_CUDA_TRY(cudaMemcpyAsync(beta_.data(), beta_host_.data(), beta_.bytes(), cudaMemcpyHostToDevice, stream_));
    GS_CUDA_TRY(cudaMemcpyAsync(budget_.data(), budget_host_.data(), budget_.bytes(), cudaMemcpyHostToDevice, stream_));
    start_cycle_scalars<<<(rhs_ + 127) / 128, 128, 0, stream_>>>(beta_.data(), budget_.data(), rhs_, restart_,
                                                                 g_.data(), in_cycle_.data(), dimension_.data(),
                                                                 any_in_cycle_.data());
    GS_CUDA_CHECK_LAUNCH();
  }

  void step(int j) override {
    GS_EXPECTS(j >= 0 && j < restart_, "device GMRES: no Arnoldi step " + std::to_string(j));
    enqueue_step(j);
    GS_CUDA_TRY(cudaEventRecord(events_[j % event_ring], stream_));
  }

  void graph_step(int j, const std::function<void()>& product) override {
    GS_EXPECTS(j >= 0 && j < restart_, "device GMRES: no Arnoldi step " + std::to_string(j));
    if (graphs_[std::size_t(j)] == nullptr) graphs_[std::size_t(j)] = capture_graph(stream_, [&] {
      product();
      enqueue_step(j);
    });
    GS_CUDA_TRY(cudaGraphLaunch(graphs_[std::size_t(j)], stream_));
    GS_CUDA_TRY(cudaEventRecord(events_[j % event_ring], stream_));  // outside the graph, as after step(j)
  }

  bool no_rhs_in_cycle_after(int j) override {
    GS_EXPECTS(j >= 0 && j < restart_, "device GMRES: no Arnoldi step " + std::to_string(j));
    GS_CUDA_TRY(cudaEventSynchronize(events_[j % event_ring]));  // waits for step j (and what preceded it) only
    return any_in_cycle_host_.data()[j] == 0;
  }

  void finish_cycle(int steps) override {
    GS_EXPECTS(steps >= 0 && steps <= restart_, "device GMRES: a cycle of " + std::to_string(steps) + " steps");
    if (steps > 0) {
      back_substitute<<<rhs_, 128, std::size_t(steps) * sizeof(double2), stream_>>>(
          hessenberg_.data(), g_.data(), dimension_.data(), restart_, steps, rhs_, coefficient_.data());
      GS_CUDA_CHECK_LAUNCH();
      const dim3 grid{unsigned(blocks_), unsigned(rhs_)};
      gram_schmidt_pass<Real, Pass::update><<<grid, threads_per_block, 0, stream_>>>(
          basis_, stride_, steps, x_, coefficient_.data(), nullptr, partial_.data(), int(layout_.slices), rhs_,
          int(layout_.block));
      GS_CUDA_CHECK_LAUNCH();
    }
    GS_CUDA_TRY(cudaMemcpyAsync(dimension_host_.data(), dimension_.data(), dimension_.bytes(), cudaMemcpyDeviceToHost,
                             stream_));
  }

  [[nodiscard]] std::span<const int> dimensions() const override {
    return {dimension_host_.data(), dimension_host_.size()};
  }

 private:
  /// Step j's work on w = V_{j+1} (device.hpp, step), without the event: CGS2 against V_0..V_j, the Hessenberg
  /// column, the Givens update and the flags, w scaled to V_{j+1}, and the flag any_in_cycle[j] copied to the
  /// host. Everything here is capturable (the file's header).
  void enqueue_step(int j) {
    const int count = j + 1;
    V* w = reinterpret_cast<V*>(space_.data(first_basis_ + j + 1));
    const std::size_t sums_bytes = std::size_t(count) * sizeof(double2);
    const int finish_blocks = (count * rhs_ + 7) / 8;  // one warp per (basis vector, rhs), 8 warps per block
    // CGS pass 1: h = Vᴴ w.
    pass<Pass::project>(count, w, sums_bytes);
    launch_after_previous(finish_projection, finish_blocks, 256, 0, partial_.data(), blocks_, count, rhs_,
                          in_cycle_.data(), hessenberg_.data(), j, restart_, false, coefficient_.data());
    // w −= V h, and pass 2: h' = Vᴴ w (H column += h').
    pass<Pass::subtract_project>(count, w, sums_bytes);
    launch_after_previous(finish_projection, finish_blocks, 256, 0, partial_.data(), blocks_, count, rhs_,
                          in_cycle_.data(), hessenberg_.data(), j, restart_, true, coefficient_.data());
    // w −= V h', and ‖w‖.
    pass<Pass::subtract_norm>(count, w, 0);
    launch_after_previous(arnoldi_update, rhs_, scalar_threads, arnoldi_shared_bytes(j), partial_.data(), blocks_, j,
                          restart_, hessenberg_.data(), rotation_c_.data(), rotation_s_.data(), g_.data(),
                          in_cycle_.data(), dimension_.data(), budget_.data(), b_norm_.data(), tolerance_,
                          norms_.data(), scale_.data(), any_in_cycle_.data() + j);
    launch_after_previous(scale_rows<Real>, dim3(unsigned(layout_.slices), unsigned(rhs_)), threads_per_block, 0, w,
                          scale_.data(), rhs_, int(layout_.block));
    GS_CUDA_TRY(cudaMemcpyAsync(any_in_cycle_host_.data() + j, any_in_cycle_.data() + j, sizeof(int),
                             cudaMemcpyDeviceToHost, stream_));
  }

  template <Pass kind>
  void pass(int count, V* w, std::size_t shared_bytes) {
    launch_after_previous(gram_schmidt_pass<Real, kind>, dim3(unsigned(blocks_), unsigned(rhs_)), threads_per_block,
                          shared_bytes, basis_, stride_, count, w, coefficient_.data(), in_cycle_.data(),
                          partial_.data(), int(layout_.slices), rhs_, int(layout_.block));
  }

  /// launch_after_previous on this object's stream (core/dependent_launch.cuh).
  template <class... Params, class... Args>
  void launch_after_previous(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared, Args... args) {
    gratingsim::launch_after_previous(kernel, grid, block, shared, stream_, args...);
  }

  VectorSpace<Real>& space_;
  BatchLayout layout_;
  int rhs_, restart_, first_basis_;
  double tolerance_;
  cudaStream_t stream_;
  int blocks_;
  const V* basis_ = nullptr;
  std::size_t stride_ = 0;
  V* x_ = nullptr;
  DeviceBuffer<double2> hessenberg_, g_;
  DeviceBuffer<double> rotation_c_;
  DeviceBuffer<double2> rotation_s_, coefficient_, partial_, scale_;
  DeviceBuffer<double> b_norm_, beta_, norms_;
  DeviceBuffer<int> in_cycle_, budget_, dimension_, any_in_cycle_;
  PinnedBuffer<double> beta_host_;
  PinnedBuffer<int> budget_host_, dimension_host_, any_in_cycle_host_;
  cudaEvent_t events_[event_ring] = {};
  std::vector<cudaGraphExec_t> graphs_;  // graph_step's, per step j (null until captured)
};

}  // namespace

template <class Real>
std::unique_ptr<DeviceArnoldi<Real>> make_device_arnoldi(VectorSpace<Real>& space, int first_basis, int x,
                                                         int restart, double tolerance,
                                                         std::span<const double> b_norm) {
  return std::make_unique<DeviceArnoldiImpl<Real>>(space, first_basis, x, restart, tolerance, b_norm);
}
template std::unique_ptr<DeviceArnoldi<float>> make_device_arnoldi<float>(VectorSpace<float>&, int, int, int, double,
                                                                          std::span<const double>);
template std::unique_ptr<DeviceArnoldi<double>> make_device_arnoldi<double>(VectorSpace<double>&, int, int, int,
                                                                            double, std::span<const double>);

}  // namespace gratingsim::physics
