// BiCGStab's iterations with the per-rhs scalars in device memory (device.hpp, DeviceBiCGStab; docs/solver.md §2).
//
// Layout of the batched vectors as vector_space.hpp: element (slice p, rhs r, j) at (p·n_rhs + r)·block + j. The
// vector kernels give each thread block one rhs (blockIdx.y), so its flags and coefficients are uniform per block,
// and a strided share of that rhs's slices·block elements in flat order (k = p·block + j); a reduction writes one
// complex128 partial sum per (sum, rhs, block), and the scalar kernels (a warp per rhs) add them in block order:
// deterministic, and with vector_blocks_per_rhs() independent of how many rhs share the batch, each rhs's results do not
// depend on its batch.
//
// Per-rhs state in device memory: state (done, stepping, claimed); step, whether the rhs takes the rest of the
// current iteration (cleared by a claim inside it); x_step, whether x takes α p in it (the host's "half" step
// included); ρ, ρ_new = r̂·r, α, ω, β (complex128); iterations and products. A claim also sets the sticky flag
// `claims` (cleared by settle()); the last kernel of iteration i (publish_claims) copies it to slot i mod event_ring
// of mapped pinned memory, which the host reads after that iteration's event (claims_after). So what the host learns
// of iteration i does not depend on how far the device has run ahead: the iterations enqueued, hence the products,
// are the same at every run.
//
// The iteration, as krylov.cpp's host BiCGStab for each stepping rhs (kernel: what it does):
//   update_direction   p = β (p − ω v) + r
//   (product)          v = A p
//   dot_r_hat_v        partial sums of r̂·v
//   take_alpha         iterations, products += 1; r̂·v = 0 claims (breakdown), else α = ρ_new/(r̂·v), ρ = ρ_new
//   update_s           s = r − α v, partial sums of ‖s‖²
//   take_half          x_step; ‖s‖ ≤ tol·‖b‖ claims (x takes α p below and the rhs stops: the host's half step)
//   (product)          t = A s
//   dot_t              partial sums of t·s and ‖t‖²
//   take_omega         products += 1; ω = (t·s)/‖t‖² (0 where ‖t‖ = 0)
//   update_solution    x += α p (x_step) + ω s; r = s − ω t, partial sums of r̂·r and ‖r‖²
//   end_iteration      ‖r‖ ≤ tol·‖b‖, the iteration cap or a non-finite ‖r‖ claims; else the next iteration's
//                      breakdown test (ρ_new = 0 or ω = 0 claims) and β = (ρ_new/ρ)(α/ω)
//   publish_claims     the claims flag to the host's slot of this iteration
// settle() (restart_rows, settle_claims) restarts a confirmed rhs as the host's restart() does: r = r̂ = b − A x,
// p = v = 0, ρ = α = ω = 1, then ρ_new and β as end_iteration.
//
// Synchronisation: every call enqueues on the space's stream and returns; the only waits are claims_after()
// (cudaEventSynchronize on one iteration's event) and the synchronous uploads of the constructor (cudaMemcpy).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dependent_launch.cuh"
#include "core/device_buffer.hpp"
#include "core/device_complex.cuh"
#include "physics/device.hpp"
#include "physics/device_graph.cuh"
#include "physics/device_scalars.cuh"

namespace gratingsim::physics {
namespace {

using namespace device_scalars;

constexpr int threads_per_block = 256;
constexpr int warps_per_block = threads_per_block / 32;
/// Events of the last iterations kept for claims_after() (the host looks at most one iteration back).
constexpr int event_ring = 4;

enum State : int { done = 0, stepping = 1, claimed = 2 };
/// The reductions' partial sums: sum k of rhs r from block b at partial[(k·rhs + r)·blocks + b].
enum Sum : int { r_hat_v = 0, s_norm, t_s, t_norm, r_hat_r, r_norm, sum_kinds };

/// The per-rhs state (device pointers, rhs entries each) and the constants every kernel reads.
struct Scalars {
  double2 *rho, *rho_new, *alpha, *omega, *beta;
  int *state, *step, *x_step, *iterations, *products;
  const double* b_norm;
  double2* partial;
  int* claims;     // sticky: some rhs claimed since the last settle()
  int* published;  // iterations published so far (publish_claims)
  double tolerance;
  int max_iterations, rhs, blocks;
  __device__ const double2* sums(Sum kind, int r) const { return partial + (std::size_t(kind) * rhs + r) * blocks; }
};

__device__ void claim(const Scalars& c, int r) {
  c.state[r] = claimed;
  c.step[r] = 0;
  *c.claims = 1;  // every writer writes 1: no atomic needed
}

/// The start of the next iteration of a stepping rhs whose ρ_new is known: the host's breakdown test and β.
__device__ void begin_iteration(const Scalars& c, int r) {
  const double2 rho_new = c.rho_new[r], omega = c.omega[r];
  if (is_zero(rho_new) || is_zero(omega)) return claim(c, r);
  c.beta[r] = mul(divide(rho_new, c.rho[r]), divide(c.alpha[r], omega));
  c.step[r] = 1;
}

/// Calls f(i) for the elements i of rhs r that this block takes: flat k = p·block + j over rhs r's slices·block
/// elements, k ≡ blockIdx.x·blockDim.x + threadIdx.x (mod gridDim.x·blockDim.x).
template <class F>
__device__ __forceinline__ void for_rhs_elements(int r, int slices, int rhs, int block, F&& f) {
  const long long n = (long long)slices * block, stride = (long long)gridDim.x * blockDim.x;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) {
    const long long p = k / block;
    f(std::size_t((p * rhs + r) * block + (k - p * block)));
  }
}

/// The block's sums of each thread's v[i] to partial sum kinds[i] of rhs r (warp shuffles, then the warps in
/// order). Every thread of the block calls it.
template <int N>
__device__ void store_partials(const double2 (&v)[N], const Sum (&kinds)[N], const Scalars& c, int r) {
  __shared__ double2 warp_sums[N][warps_per_block];
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  for (int i = 0; i < N; ++i) {
    const double2 s{warp_sum(v[i].x), warp_sum(v[i].y)};
    if (lane == 0) warp_sums[i][warp] = s;
  }
  __syncthreads();
  if (int(threadIdx.x) < N) {
    const int i = int(threadIdx.x);
    double2 sum{0, 0};
    for (int w = 0; w < warps_per_block; ++w) sum = add(sum, warp_sums[i][w]);
    c.partial[(std::size_t(kinds[i]) * c.rhs + r) * c.blocks + blockIdx.x] = sum;
  }
}

template <class V>
__device__ void add_conj_product(double2& sum, V a, V b) {  // sum += conj(a)·b in double
  const double ax = a.x, ay = a.y, bx = b.x, by = b.y;
  sum.x += ax * bx + ay * by;
  sum.y += ax * by - ay * bx;
}
template <class V>
__device__ void add_square(double2& sum, V a) {
  const double ax = a.x, ay = a.y;
  sum.x += ax * ax + ay * ay;
}
/// y + a·x in Real (the host's axpy, a rounded to Real).
template <class V, class Real>
__device__ V plus_product(V y, Real ar, Real ai, V x) {
  y.x += ar * x.x - ai * x.y;
  y.y += ar * x.y + ai * x.x;
  return y;
}

// ---- vector kernels: grid (blocks, rhs), threads_per_block ----------------------------------------------------

/// p = β (p − ω v) + r (the host's axpy, scale and axpy, in the same order), stepping rhs.
template <class Real>
__global__ void __launch_bounds__(threads_per_block)
    update_direction(Complex2<Real>* p, const Complex2<Real>* __restrict__ v, const Complex2<Real>* __restrict__ r,
                     Scalars c, int slices, int block) {
  wait_for_previous_kernel();
  const int k = int(blockIdx.y);
  if (!c.step[k]) return;
  const double2 b = c.beta[k], w = c.omega[k];
  const Real br = Real(b.x), bi = Real(b.y), wr = Real(-w.x), wi = Real(-w.y);
  for_rhs_elements(k, slices, c.rhs, block, [&](std::size_t i) {
    const auto u = plus_product(p[i], wr, wi, v[i]);
    const auto q = r[i];
    p[i] = {br * u.x - bi * u.y + q.x, br * u.y + bi * u.x + q.y};
  });
}

/// Partial sums of r̂·v, stepping rhs.
template <class Real>
__global__ void __launch_bounds__(threads_per_block)
    dot_r_hat_v(const Complex2<Real>* __restrict__ r_hat, const Complex2<Real>* __restrict__ v, Scalars c, int slices,
                int block) {
  wait_for_previous_kernel();
  const int k = int(blockIdx.y);
  if (!c.step[k]) return;
  double2 sum[1] = {{0, 0}};
  for_rhs_elements(k, slices, c.rhs, block, [&](std::size_t i) { add_conj_product(sum[0], r_hat[i], v[i]); });
  store_partials(sum, {r_hat_v}, c, k);
}

/// s = r − α v and the partial sums of ‖s‖², stepping rhs.
template <class Real>
__global__ void __launch_bounds__(threads_per_block)
    update_s(const Complex2<Real>* __restrict__ r, const Complex2<Real>* __restrict__ v, Complex2<Real>* __restrict__ s,
             Scalars c, int slices, int block) {
  wait_for_previous_kernel();
  const int k = int(blockIdx.y);
  if (!c.step[k]) return;
  const double2 a = c.alpha[k];
  const Real ar = Real(-a.x), ai = Real(-a.y);
  double2 sum[1] = {{0, 0}};
  for_rhs_elements(k, slices, c.rhs, block, [&](std::size_t i) {
    const auto u = plus_product(r[i], ar, ai, v[i]);
    s[i] = u;
    add_square(sum[0], u);
  });
  store_partials(sum, {s_norm}, c, k);
}

/// Partial sums of t·s and ‖t‖², stepping rhs.
template <class Real>
__global__ void __launch_bounds__(threads_per_block)
    dot_t(const Complex2<Real>* __restrict__ t, const Complex2<Real>* __restrict__ s, Scalars c, int slices, int block) {
  wait_for_previous_kernel();
  const int k = int(blockIdx.y);
  if (!c.step[k]) return;
  double2 sum[2] = {{0, 0}, {0, 0}};
  for_rhs_elements(k, slices, c.rhs, block, [&](std::size_t i) {
    const auto u = t[i];
    add_conj_product(sum[0], u, s[i]);
    add_square(sum[1], u);
  });
  store_partials(sum, {t_s, t_norm}, c, k);
}

/// x += α p (x_step) and, stepping, + ω s; r = s − ω t and the partial sums of r̂·r and ‖r‖² (stepping rhs).
template <class Real>
__global__ void __launch_bounds__(threads_per_block)
    update_solution(Complex2<Real>* __restrict__ x, const Complex2<Real>* __restrict__ p,
                    const Complex2<Real>* __restrict__ s, const Complex2<Real>* __restrict__ t,
                    Complex2<Real>* __restrict__ r, const Complex2<Real>* __restrict__ r_hat, Scalars c, int slices,
                    int block) {
  wait_for_previous_kernel();
  const int k = int(blockIdx.y);
  if (!c.x_step[k]) return;
  const double2 a = c.alpha[k], w = c.omega[k];
  const Real ar = Real(a.x), ai = Real(a.y);
  if (!c.step[k]) {  // the host's half step: x += α p, and the rhs has claimed
    for_rhs_elements(k, slices, c.rhs, block, [&](std::size_t i) { x[i] = plus_product(x[i], ar, ai, p[i]); });
    return;
  }
  const Real wr = Real(w.x), wi = Real(w.y);
  double2 sum[2] = {{0, 0}, {0, 0}};
  for_rhs_elements(k, slices, c.rhs, block, [&](std::size_t i) {
    const auto si = s[i];
    x[i] = plus_product(plus_product(x[i], ar, ai, p[i]), wr, wi, si);
    const auto u = plus_product(si, -wr, -wi, t[i]);
    r[i] = u;
    add_conj_product(sum[0], r_hat[i], u);
    add_square(sum[1], u);
  });
  store_partials(sum, {r_hat_r, r_norm}, c, k);
}

/// The restart of the claimed rhs with again[r]: r = r̂ = true_r, p = v = 0, and the partial sums of r̂·r.
template <class Real>
__global__ void __launch_bounds__(threads_per_block)
    restart_rows(const Complex2<Real>* __restrict__ true_r, Complex2<Real>* __restrict__ r,
                 Complex2<Real>* __restrict__ r_hat, Complex2<Real>* __restrict__ p, Complex2<Real>* __restrict__ v,
                 const int* __restrict__ again, Scalars c, int slices, int block) {
  wait_for_previous_kernel();
  const int k = int(blockIdx.y);
  if (c.state[k] != claimed || !again[k]) return;
  double2 sum[1] = {{0, 0}};
  for_rhs_elements(k, slices, c.rhs, block, [&](std::size_t i) {
    const auto u = true_r[i];
    r[i] = u;
    r_hat[i] = u;
    p[i] = {0, 0};
    v[i] = {0, 0};
    add_conj_product(sum[0], u, u);
  });
  store_partials(sum, {r_hat_r}, c, k);
}

// ---- scalar kernels: a warp per rhs, warps_per_block rhs per block -----------------------------------------------

__device__ int warp_rhs() { return int((blockIdx.x * blockDim.x + threadIdx.x) / 32); }

__global__ void take_alpha(Scalars c) {
  wait_for_previous_kernel();
  const int r = warp_rhs(), lane = int(threadIdx.x) % 32;
  if (r >= c.rhs || !c.step[r]) return;  // uniform per warp
  const double2 d = warp_sum_partials(c.sums(r_hat_v, r), c.blocks, lane);
  if (lane != 0) return;
  c.iterations[r]++;
  c.products[r]++;
  if (is_zero(d)) return claim(c, r);
  c.alpha[r] = divide(c.rho_new[r], d);
  c.rho[r] = c.rho_new[r];
}

__global__ void take_half(Scalars c) {
  wait_for_previous_kernel();
  const int r = warp_rhs(), lane = int(threadIdx.x) % 32;
  if (r >= c.rhs) return;
  if (!c.step[r]) {
    if (lane == 0) c.x_step[r] = 0;
    return;
  }
  const double norm = sqrt(warp_sum_partials(c.sums(s_norm, r), c.blocks, lane).x);
  if (lane != 0) return;
  c.x_step[r] = 1;
  if (norm <= c.tolerance * c.b_norm[r]) claim(c, r);
}

__global__ void take_omega(Scalars c) {
  wait_for_previous_kernel();
  const int r = warp_rhs(), lane = int(threadIdx.x) % 32;
  if (r >= c.rhs || !c.step[r]) return;
  const double2 ts = warp_sum_partials(c.sums(t_s, r), c.blocks, lane);
  const double2 tt = warp_sum_partials(c.sums(t_norm, r), c.blocks, lane);
  if (lane != 0) return;
  c.products[r]++;
  c.omega[r] = is_zero(tt) ? double2{0, 0} : divide(ts, tt);
}

__global__ void end_iteration(Scalars c) {
  wait_for_previous_kernel();
  const int r = warp_rhs(), lane = int(threadIdx.x) % 32;
  if (r >= c.rhs || !c.step[r]) return;
  const double2 rho_new = warp_sum_partials(c.sums(r_hat_r, r), c.blocks, lane);
  const double norm = sqrt(warp_sum_partials(c.sums(r_norm, r), c.blocks, lane).x);
  if (lane != 0) return;
  c.rho_new[r] = rho_new;
  if (norm <= c.tolerance * c.b_norm[r] || c.iterations[r] >= c.max_iterations || !isfinite(norm)) return claim(c, r);
  begin_iteration(c, r);
}

/// One thread: iteration i's claims flag to host slot i mod event_ring (mapped pinned memory).
__global__ void publish_claims(Scalars c, int* slots) {
  wait_for_previous_kernel();
  const int i = *c.published;
  *reinterpret_cast<volatile int*>(slots + i % event_ring) = *c.claims;
  *c.published = i + 1;
}

__global__ void settle_claims(const int* __restrict__ again, Scalars c) {
  wait_for_previous_kernel();
  const int r = warp_rhs(), lane = int(threadIdx.x) % 32;
  if (r >= c.rhs || c.state[r] != claimed) return;
  if (!again[r]) {
    if (lane == 0) c.state[r] = done;
    return;
  }
  const double2 rho_new = warp_sum_partials(c.sums(r_hat_r, r), c.blocks, lane);
  if (lane != 0) return;
  c.rho[r] = c.alpha[r] = c.omega[r] = {1, 0};
  c.rho_new[r] = rho_new;
  c.state[r] = stepping;
  begin_iteration(c, r);
}

/// Blocks per rhs of the vector kernels (device_scalars::blocks_per_rhs), by update_solution's occupancy; a chunk is
/// threads_per_block elements of a rhs.
template <class Real>
int vector_blocks_per_rhs(const BatchLayout& l) {
  int resident = 0;
  GS_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, update_solution<Real>, threads_per_block, 0));
  return device_scalars::blocks_per_rhs(resident, (l.slices * l.block + threads_per_block - 1) / threads_per_block);
}

template <class Real>
class DeviceBiCGStabImpl final : public DeviceBiCGStab<Real> {
 public:
  using V = Complex2<Real>;
  using Vectors = typename DeviceBiCGStab<Real>::Vectors;

  DeviceBiCGStabImpl(VectorSpace<Real>& space, const Vectors& vectors, double tolerance, int max_iterations,
                     std::span<const double> b_norm)
      : space_(space),
        vectors_(vectors),
        layout_(space.layout()),
        rhs_(int(space.layout().rhs)),
        stream_(space.stream()),
        blocks_(vector_blocks_per_rhs<Real>(space.layout())),
        complex_(std::size_t(5) * rhs_),
        flags_(std::size_t(5) * rhs_),
        b_norm_(rhs_),
        partial_(std::size_t(sum_kinds) * rhs_ * std::size_t(blocks_)),
        again_(rhs_),
        counters_(2),
        again_host_(rhs_),
        state_host_(std::size_t(3) * rhs_),
        slots_(event_ring) {
    GS_EXPECTS(space.memory() == Memory::device, "device BiCGStab: the vector space is not in device memory");
    const int ids[] = {vectors.x, vectors.r, vectors.r_hat, vectors.p, vectors.v, vectors.s, vectors.t, vectors.true_r};
    for (int a : ids) {
      GS_EXPECTS(a >= 0 && a < space.count(), "device BiCGStab: vector " + std::to_string(a) + " is not in the space");
      GS_EXPECTS(std::count(std::begin(ids), std::end(ids), a) == 1, "device BiCGStab: the vectors must be distinct");
    }
    GS_EXPECTS(b_norm.size() == layout_.rhs, "device BiCGStab: one ‖b‖ per right-hand side");
    GS_EXPECTS(max_iterations >= 1, "device BiCGStab: max_iterations must be ≥ 1");
    GS_EXPECTS(layout_.slices <= 0x7fffffffu && layout_.block <= 0x7fffffffu && layout_.rhs <= 65535,
               "device BiCGStab: layout too large");
    // Every scalar defined before use; every rhs starts claimed (the host confirms the initial residual first).
    // All on stream_, which every later kernel follows: a copy on another stream is not ordered before them. (A
    // cudaMemcpy here, on the legacy default stream, landed after the first kernels where other threads kept
    // blocking streams busy: every rhs then read as done after 0 iterations, and its result was the initial
    // guess; found in a 33-wavelength sweep on an H200, 12 of 66 solves.)
    GS_CUDA_TRY(cudaMemsetAsync(complex_.data(), 0, complex_.bytes(), stream_));
    GS_CUDA_TRY(cudaMemsetAsync(partial_.data(), 0, partial_.bytes(), stream_));
    GS_CUDA_TRY(cudaMemsetAsync(flags_.data(), 0, flags_.bytes(), stream_));
    GS_CUDA_TRY(cudaMemsetAsync(counters_.data(), 0, counters_.bytes(), stream_));
    PinnedBuffer<double> b_norm_host(rhs_);
    std::copy(b_norm.begin(), b_norm.end(), b_norm_host.data());
    std::fill(again_host_.data(), again_host_.data() + rhs_, int(claimed));
    GS_CUDA_TRY(cudaMemcpyAsync(b_norm_.data(), b_norm_host.data(), b_norm_.bytes(), cudaMemcpyHostToDevice, stream_));
    GS_CUDA_TRY(cudaMemcpyAsync(flags_.data(), again_host_.data(), std::size_t(rhs_) * sizeof(int),
                                cudaMemcpyHostToDevice, stream_));
    GS_CUDA_TRY(cudaStreamSynchronize(stream_));  // the staging is free again when the constructor returns
    std::fill(slots_.data(), slots_.data() + event_ring, 0);
    GS_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&slots_device_), slots_.data(), 0));
    const auto slot = [&](int i) { return complex_.data() + std::size_t(i) * rhs_; };
    const auto flag = [&](int i) { return flags_.data() + std::size_t(i) * rhs_; };
    // flags_ in the order state, iterations, products, step, x_step: what fetch_state() reads is one copy.
    scalars_ = Scalars{slot(0), slot(1), slot(2), slot(3), slot(4), flag(0), flag(3), flag(4), flag(1), flag(2),
                       b_norm_.data(), partial_.data(), counters_.data(), counters_.data() + 1, tolerance,
                       max_iterations, rhs_, blocks_};
    for (cudaEvent_t& e : events_) GS_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }

  ~DeviceBiCGStabImpl() override {
    // Buffers are freed in the order of this thread's default stream only (core/device_buffer.hpp): wait for the
    // work of stream_ that may still use them (graph replays included).
    cudaStreamSynchronize(stream_);  // no throw from a destructor
    if (graph_) cudaGraphExecDestroy(graph_);
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
  }
  DeviceBiCGStabImpl(const DeviceBiCGStabImpl&) = delete;
  DeviceBiCGStabImpl& operator=(const DeviceBiCGStabImpl&) = delete;

  void iterate(const std::function<void(int x, int y)>& product, bool graph) override {
    if (graph) {
      if (graph_ == nullptr) graph_ = capture_graph(stream_, [&] { enqueue_iteration(product); });
      GS_CUDA_TRY(cudaGraphLaunch(graph_, stream_));
    } else {
      enqueue_iteration(product);
    }
    GS_CUDA_TRY(cudaEventRecord(events_[enqueued_ % event_ring], stream_));
    ++enqueued_;
  }

  bool claims_after(long iteration) override {
    GS_EXPECTS(iteration >= 0 && iteration < enqueued_ && iteration >= enqueued_ - event_ring,
               "device BiCGStab: iteration " + std::to_string(iteration) + " is not among the last enqueued");
    GS_CUDA_TRY(cudaEventSynchronize(events_[iteration % event_ring]));  // that iteration (and what preceded it) only
    return *reinterpret_cast<volatile const int*>(slots_.data() + iteration % event_ring) != 0;
  }

  [[nodiscard]] long iterations_enqueued() const override { return enqueued_; }

  void fetch_state() override {
    // flags_: state, iterations, products, step, x_step (rhs each): the first three, as state_host_ holds them.
    GS_CUDA_TRY(cudaMemcpyAsync(state_host_.data(), flags_.data(), 3 * std::size_t(rhs_) * sizeof(int),
                                cudaMemcpyDeviceToHost, stream_));
  }
  [[nodiscard]] typename DeviceBiCGStab<Real>::RhsState state(int r) const override {
    GS_EXPECTS(r >= 0 && r < rhs_, "device BiCGStab: no right-hand side " + std::to_string(r));
    const int* h = state_host_.data();
    return {h[r] == claimed, h[rhs_ + r], h[2 * rhs_ + r]};
  }

  void settle(std::span<const char> again) override {
    GS_EXPECTS(again.size() == std::size_t(rhs_), "device BiCGStab: one flag per right-hand side");
    // The stream is idle (the host synchronised since fetch_state()): the previous copy from the pinned staging
    // has completed.
    GS_CUDA_TRY(cudaMemsetAsync(counters_.data(), 0, sizeof(int), stream_));  // the claims flag
    for (int r = 0; r < rhs_; ++r) again_host_.data()[r] = again[r] ? 1 : 0;
    GS_CUDA_TRY(cudaMemcpyAsync(again_.data(), again_host_.data(), again_.bytes(), cudaMemcpyHostToDevice, stream_));
    launch_after_previous(restart_rows<Real>, vector_grid(), threads_per_block, 0, vec(vectors_.true_r),
                          vec(vectors_.r), vec(vectors_.r_hat), vec(vectors_.p), vec(vectors_.v), again_.data(),
                          scalars_, slices(), block());
    launch_after_previous(settle_claims, scalar_grid(), threads_per_block, 0, again_.data(), scalars_);
  }

 private:
  /// One iteration's kernels and products (the file's header); capturable.
  void enqueue_iteration(const std::function<void(int, int)>& product) {
    const Vectors& n = vectors_;
    const Scalars& c = scalars_;
    launch_after_previous(update_direction<Real>, vector_grid(), threads_per_block, 0, vec(n.p), vec(n.v), vec(n.r),
                          c, slices(), block());
    product(n.p, n.v);
    launch_after_previous(dot_r_hat_v<Real>, vector_grid(), threads_per_block, 0, vec(n.r_hat), vec(n.v), c, slices(),
                          block());
    launch_after_previous(take_alpha, scalar_grid(), threads_per_block, 0, c);
    launch_after_previous(update_s<Real>, vector_grid(), threads_per_block, 0, vec(n.r), vec(n.v), vec(n.s), c,
                          slices(), block());
    launch_after_previous(take_half, scalar_grid(), threads_per_block, 0, c);
    product(n.s, n.t);
    launch_after_previous(dot_t<Real>, vector_grid(), threads_per_block, 0, vec(n.t), vec(n.s), c, slices(), block());
    launch_after_previous(take_omega, scalar_grid(), threads_per_block, 0, c);
    launch_after_previous(update_solution<Real>, vector_grid(), threads_per_block, 0, vec(n.x), vec(n.p), vec(n.s),
                          vec(n.t), vec(n.r), vec(n.r_hat), c, slices(), block());
    launch_after_previous(end_iteration, scalar_grid(), threads_per_block, 0, c);
    launch_after_previous(publish_claims, 1, 1, 0, c, slots_device_);
  }

  [[nodiscard]] V* vec(int i) const { return reinterpret_cast<V*>(space_.data(i)); }
  [[nodiscard]] dim3 vector_grid() const { return {unsigned(blocks_), unsigned(rhs_)}; }
  [[nodiscard]] dim3 scalar_grid() const { return {unsigned((rhs_ + warps_per_block - 1) / warps_per_block)}; }
  [[nodiscard]] int slices() const { return int(layout_.slices); }
  [[nodiscard]] int block() const { return int(layout_.block); }

  /// launch_after_previous on this object's stream (core/dependent_launch.cuh).
  template <class... Params, class... Args>
  void launch_after_previous(void (*kernel)(Params...), dim3 grid, dim3 threads, std::size_t shared, Args... args) {
    gratingsim::launch_after_previous(kernel, grid, threads, shared, stream_, args...);
  }

  VectorSpace<Real>& space_;
  Vectors vectors_;
  BatchLayout layout_;
  int rhs_;
  cudaStream_t stream_;
  int blocks_;
  DeviceBuffer<double2> complex_;  // ρ, ρ_new, α, ω, β
  DeviceBuffer<int> flags_;        // state, iterations, products, step, x_step
  DeviceBuffer<double> b_norm_;
  DeviceBuffer<double2> partial_;
  DeviceBuffer<int> again_;
  DeviceBuffer<int> counters_;  // the claims flag, the iterations published
  PinnedBuffer<int> again_host_, state_host_, slots_;
  int* slots_device_ = nullptr;  // slots_, mapped
  Scalars scalars_{};
  cudaEvent_t events_[event_ring] = {};
  cudaGraphExec_t graph_ = nullptr;
  long enqueued_ = 0;
};

}  // namespace

template <class Real>
std::unique_ptr<DeviceBiCGStab<Real>> make_device_bicgstab(VectorSpace<Real>& space,
                                                           const typename DeviceBiCGStab<Real>::Vectors& vectors,
                                                           double tolerance, int max_iterations,
                                                           std::span<const double> b_norm) {
  return std::make_unique<DeviceBiCGStabImpl<Real>>(space, vectors, tolerance, max_iterations, b_norm);
}
template std::unique_ptr<DeviceBiCGStab<float>> make_device_bicgstab<float>(VectorSpace<float>&,
                                                                            const DeviceBiCGStab<float>::Vectors&,
                                                                            double, int, std::span<const double>);
template std::unique_ptr<DeviceBiCGStab<double>> make_device_bicgstab<double>(VectorSpace<double>&,
                                                                              const DeviceBiCGStab<double>::Vectors&,
                                                                              double, int, std::span<const double>);

}  // namespace gratingsim::physics
