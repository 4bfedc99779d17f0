// gpu-direct: the convolution sum itself on the GPU, for small N (the crossover study against the FFT
// backends):
//     out_b(m) = Σ_{m'} χ_p(m − m') in_b(m'),   p = b / per_slice,   O(N1²·N2²) complex FMAs per block.
// With 0-based indices i = (i1, i2) of m and j of m', χ_p(m − m') sits at (i1 − j1 + N1 − 1)·K2 +
// (i2 − j2 + N2 − 1) = c + off(i) − off(j) in the kernel block, off(i) = i1·K2 + i2, c = off(N1 − 1, N2 − 1).
//
// Two forms, one per plan (DirectForm in gpu_direct.hpp):
//  direct sum: one CUDA block per (slice, chunk of F fields), χ_p (rows padded by R − 1 zeros on both
//    sides) and the F fields (rows padded with zeros to a multiple of R) in shared memory. A thread
//    computes R consecutive outputs i2_0 … i2_0 + R − 1 of one row of one field. Along a row of χ the
//    outputs need shifted coefficients χ(·, i2_0 + r − j2 + N2 − 1): a window of R coefficients in
//    registers, rotated at compile time (slot (r − j2) mod R), takes one new coefficient per j2. Per
//    inner step: 1 χ load, 1 field load (the same address across the warp: a broadcast), R complex FMAs.
//  Toeplitz product: Out_p = T_p · X_p, T_p[i][j] = χ_p(m_i − m_j) the N1N2 × N1N2 block-Toeplitz matrix,
//    X_p the N1N2 × per_slice matrix of the fields sharing χ_p. T_p is never stored: entry (i, j) is
//    χ_p[c + off(i) − off(j)] read from χ_p in shared memory. A CUDA block computes (RG·TM outputs) ×
//    (4·C fields); X_p streams through shared memory in chunks of 32 rows (j). A thread keeps TM outputs
//    (strided by RG, so that a warp reads consecutive χ entries) × 4 fields: per inner step TM χ loads,
//    4 field loads (broadcast), 1 offset load (broadcast), 4·TM complex FMAs.
//
// The rule (choose_direct_tiling), from timings of every tile on the problem cases (H100, both
// precisions: the direct sum with R = 8 was fastest for N = 31 by 8–20 %, the forms were within noise
// of each other for N = 7 and 15): the direct sum with the largest R ∈ {8, 4, 2} whose row padding
// wastes at most a quarter of the work and that still gives at least 4 warps per SM in total (small
// problems are latency-bound: parallelism first). Where no R ≥ 2 qualifies (short rows, e.g. 1D
// gratings, or a tiny batch): the Toeplitz product if at least 4 fields share a kernel (its field tile
// is then full and each χ load serves 4 fields), with the largest TM ∈ {4, 2} that keeps 4 warps per
// SM; otherwise the direct sum with R = 1.
//
// Precision: products and sums in the working precision Real (complex64 accumulates in float), unlike
// cpu-direct's complex128. Each output is a sum of N1N2 ≤ 961 terms with a rounding error per step of
// relative size 2^-24: the block-relative error stays near √(N1N2)·2^-24 ≈ 2·10^-6 for random data,
// inside the 1e-5 tolerance of complex64; complex128 is ~10^-15.
//
// Limits: N1·N2 ≤ gpu_direct_max_field_size (961); beyond it the plan is declined (Unsupported).
//
// Streams: execute() is one kernel launch on the caller's stream and does not synchronise;
// set_kernels() synchronises with the whole device before (no execute in flight reads the kernels being
// replaced) and after (the copy is complete on return).
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "convolution/backends.hpp"
#include "convolution/cuda_check.hpp"
#include "convolution/device_buffer.hpp"
#include "convolution/gpu_direct.hpp"

namespace gratingsim::conv::detail {
namespace {

// float2 / double2: the layout of std::complex<Real> on the device.
template <class Real>
using Complex2 = std::conditional_t<std::is_same_v<Real, float>, float2, double2>;

/// acc + a·b in the working precision, four fused multiply-adds.
template <class C>
__device__ __forceinline__ C multiply_add(C a, C b, C acc) {
  acc.x = fma(a.x, b.x, acc.x);
  acc.x = fma(-a.y, b.y, acc.x);
  acc.y = fma(a.x, b.y, acc.y);
  acc.y = fma(a.y, b.x, acc.y);
  return acc;
}

/// Launch parameters fixed by the plan. All counts are small (N1·N2 ≤ 961), so int suffices except
/// for batch offsets, which are computed in std::size_t.
struct DirectParams {
  int n1, n2, k1, k2;
  int per_slice;
  int chunks;            ///< CUDA blocks per slice along the fields
  int fields_per_block;  ///< direct sum: F; Toeplitz product: 4·C
  // direct sum
  int n2_padded;  ///< N2 rounded up to a multiple of R
  int chi_width;  ///< K2 + 2(R − 1): a χ row with R − 1 zeros on each side
  // Toeplitz product
  int row_groups;    ///< RG threads along the outputs (32 or 64); C = blockDim.x / RG along the fields
  int output_tiles;  ///< ⌈N1N2 / (RG·TM)⌉ CUDA blocks per (slice, chunk)
};

constexpr int product_depth = 32;      // rows j of X_p per shared-memory chunk
constexpr int fields_per_thread = 4;   // the 4 of the Toeplitz product's register tile
constexpr int max_direct_sum_threads = 256;
constexpr int max_product_field_groups = 4;  // 64 × 4 threads: up to 255 registers each

extern __shared__ __align__(16) unsigned char shared_memory[];

template <class C, int R>
__global__ void __launch_bounds__(max_direct_sum_threads)
    direct_sum_kernel(const C* __restrict__ in, C* __restrict__ out, const C* __restrict__ kernels, DirectParams p) {
  const int width = p.chi_width, n2p = p.n2_padded, field_size = p.n1 * p.n2;
  C* chi = reinterpret_cast<C*>(shared_memory);  // K1 × width
  C* fields = chi + p.k1 * width;                 // F × N1 × n2p
  const int slice = blockIdx.x / p.chunks;
  const int first = (blockIdx.x % p.chunks) * p.fields_per_block;
  const int count = min(p.fields_per_block, p.per_slice - first);
  const std::size_t first_block = std::size_t(slice) * p.per_slice + first;

  const C* chi_global = kernels + std::size_t(slice) * p.k1 * p.k2;
  for (int e = threadIdx.x; e < p.k1 * width; e += blockDim.x) {
    const int row = e / width, column = e - row * width - (R - 1);
    chi[e] = (column >= 0 && column < p.k2) ? chi_global[row * p.k2 + column] : C{0, 0};
  }
  const C* in_global = in + first_block * field_size;
  for (int e = threadIdx.x; e < count * p.n1 * n2p; e += blockDim.x) {
    const int row = e / n2p, column = e - row * n2p;  // row = f·N1 + j1
    fields[e] = column < p.n2 ? in_global[row * p.n2 + column] : C{0, 0};
  }
  __syncthreads();

  const int tiles = n2p / R;
  for (int task = threadIdx.x; task < count * p.n1 * tiles; task += blockDim.x) {
    const int f = task / (p.n1 * tiles), rest = task - f * p.n1 * tiles;
    const int i1 = rest / tiles, i2_first = (rest - i1 * tiles) * R;
    C acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = C{0, 0};
    for (int j1 = 0; j1 < p.n1; ++j1) {
      // chi_row[r − j2] = χ(i1 − j1, i2_first + r − j2) in centred indices.
      const C* chi_row = chi + (i1 - j1 + p.n1 - 1) * width + (R - 1) + i2_first + p.n2 - 1;
      const C* field_row = fields + (f * p.n1 + j1) * n2p;
      C window[R];  // slot (r − j2) mod R holds chi_row[r − j2]
#pragma unroll
      for (int r = 1; r < R; ++r) window[r] = chi_row[r];
      for (int j2_first = 0; j2_first < n2p; j2_first += R) {
#pragma unroll
        for (int s = 0; s < R; ++s) {
          const int j2 = j2_first + s;
          window[(R - s) % R] = chi_row[-j2];  // enters as r = 0, replacing the r = R − 1 of step j2 − 1
          const C x = field_row[j2];
#pragma unroll
          for (int r = 0; r < R; ++r) acc[r] = multiply_add(window[(r - s + R) % R], x, acc[r]);
        }
      }
    }
    C* out_block = out + (first_block + f) * field_size + i1 * p.n2;
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (i2_first + r < p.n2) out_block[i2_first + r] = acc[r];
  }
}

template <class C, int TM>
__global__ void __launch_bounds__(64 * max_product_field_groups)
    toeplitz_product_kernel(const C* __restrict__ in, C* __restrict__ out, const C* __restrict__ kernels,
                            DirectParams p) {
  const int field_size = p.n1 * p.n2, kernel_size = p.k1 * p.k2, width = p.fields_per_block;
  C* chi = reinterpret_cast<C*>(shared_memory);              // K1·K2
  C* x_chunk = chi + kernel_size;                             // product_depth × width, field fastest
  int* offsets = reinterpret_cast<int*>(x_chunk + product_depth * width);  // c − off(j) per chunk row
  const int tile = blockIdx.x % p.output_tiles, rest = blockIdx.x / p.output_tiles;
  const int slice = rest / p.chunks, first = (rest % p.chunks) * width;
  const int count = min(width, p.per_slice - first);
  const std::size_t first_block = std::size_t(slice) * p.per_slice + first;

  const C* chi_global = kernels + std::size_t(slice) * kernel_size;
  for (int e = threadIdx.x; e < kernel_size; e += blockDim.x) chi[e] = chi_global[e];

  const int group = threadIdx.x % p.row_groups, field0 = (threadIdx.x / p.row_groups) * fields_per_thread;
  const int centre = (p.n1 - 1) * p.k2 + (p.n2 - 1);
  int output[TM], output_offset[TM];
#pragma unroll
  for (int t = 0; t < TM; ++t) {
    output[t] = tile * p.row_groups * TM + group + t * p.row_groups;
    const int i = min(output[t], field_size - 1);  // past the end: computed on a valid entry, not stored
    output_offset[t] = (i / p.n2) * p.k2 + i % p.n2;
  }
  C acc[TM][fields_per_thread];
#pragma unroll
  for (int t = 0; t < TM; ++t)
#pragma unroll
    for (int u = 0; u < fields_per_thread; ++u) acc[t][u] = C{0, 0};

  const C* in_global = in + first_block * field_size;
  for (int j_first = 0; j_first < field_size; j_first += product_depth) {
    __syncthreads();  // the previous chunk has been consumed (and, first time, χ is not yet needed)
    for (int e = threadIdx.x; e < product_depth * width; e += blockDim.x) {
      const int f = e / product_depth, jj = e - f * product_depth, j = j_first + jj;  // j fastest: coalesced
      x_chunk[jj * width + f] = (j < field_size && f < count) ? in_global[std::size_t(f) * field_size + j] : C{0, 0};
    }
    for (int jj = threadIdx.x; jj < product_depth; jj += blockDim.x) {
      const int j = j_first + jj;  // rows past the end have zero fields; any valid offset will do
      offsets[jj] = j < field_size ? centre - ((j / p.n2) * p.k2 + j % p.n2) : centre;
    }
    __syncthreads();
#pragma unroll 4
    for (int jj = 0; jj < product_depth; ++jj) {
      const int base = offsets[jj];
      C a[TM], x[fields_per_thread];
#pragma unroll
      for (int t = 0; t < TM; ++t) a[t] = chi[base + output_offset[t]];
#pragma unroll
      for (int u = 0; u < fields_per_thread; ++u) x[u] = x_chunk[jj * width + field0 + u];
#pragma unroll
      for (int t = 0; t < TM; ++t)
#pragma unroll
        for (int u = 0; u < fields_per_thread; ++u) acc[t][u] = multiply_add(a[t], x[u], acc[t][u]);
    }
  }
#pragma unroll
  for (int t = 0; t < TM; ++t)
#pragma unroll
    for (int u = 0; u < fields_per_thread; ++u)
      if (output[t] < field_size && field0 + u < count)
        out[(first_block + field0 + u) * field_size + output[t]] = acc[t][u];
}

struct DeviceLimits {
  int multiprocessors = 0;
  int shared_bytes_per_block = 0;  ///< the opt-in maximum of dynamic shared memory
};

DeviceLimits current_device_limits() {
  int device = 0;
  DeviceLimits limits;
  CUDA_TRY(cudaGetDevice(&device));
  CUDA_TRY(cudaDeviceGetAttribute(&limits.multiprocessors, cudaDevAttrMultiProcessorCount, device));
  CUDA_TRY(cudaDeviceGetAttribute(&limits.shared_bytes_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return limits;
}

/// Threads for 4 resident warps per SM: fewer leave the device idle.
std::size_t parallelism_target(const DeviceLimits& limits) { return std::size_t(128) * limits.multiprocessors; }

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
int round_up(int a, int b) { return int(ceil_div(a, b)) * b; }

template <class Real>
class GpuDirect final : public Convolution<Real> {
 public:
  using typename Convolution<Real>::Complex;
  using C = Complex2<Real>;
  using KernelFunction = void (*)(const C*, C*, const C*, DirectParams);

  GpuDirect(const Problem& g, Kernels kernels, DirectTiling tiling)
      : Convolution<Real>(g), kernels_device_(g.kernels_total()), kernels_host_(g.kernels_total()) {
    const DeviceLimits limits = current_device_limits();
    params_ = DirectParams{.n1 = g.n1, .n2 = g.n2, .k1 = 2 * g.n1 - 1, .k2 = 2 * g.n2 - 1,
                           .per_slice = g.per_slice, .chunks = 1, .fields_per_block = 1, .n2_padded = g.n2,
                           .chi_width = 2 * g.n2 - 1, .row_groups = 32, .output_tiles = 1};
    std::size_t blocks = 0;
    if (tiling.form == DirectForm::direct_sum)
      blocks = plan_direct_sum(tiling.outputs_per_thread, limits);
    else
      blocks = plan_toeplitz_product(tiling.outputs_per_thread, limits);
    SUPPORTS(shared_bytes_ <= std::size_t(limits.shared_bytes_per_block),
             "gpu-direct needs " + std::to_string(shared_bytes_) + " bytes of shared memory per block for N1xN2 = " +
                 std::to_string(g.n1) + "x" + std::to_string(g.n2) + ", above the device's " +
                 std::to_string(limits.shared_bytes_per_block));
    SUPPORTS(blocks <= std::size_t(INT32_MAX), "gpu-direct: batch too large for one grid (" + std::to_string(blocks) +
                                                   " CUDA blocks, limit 2^31 - 1)");
    blocks_ = static_cast<unsigned>(blocks);
    CUDA_TRY(cudaFuncSetAttribute(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes_)));
    set_kernels(kernels);
  }

  void set_kernels(Kernels kernels) override {
    check_kernels(this->problem_, kernels);
    for (std::size_t i = 0; i < kernels.size(); ++i) kernels_host_[i] = Complex(kernels[i]);
    CUDA_TRY(cudaDeviceSynchronize());
    kernels_device_.upload(kernels_host_);
    CUDA_TRY(cudaDeviceSynchronize());
  }

  void execute(const Complex* in, Complex* out, Stream stream) override {
    EXPECTS(in != nullptr && out != nullptr, "gpu-direct execute: null buffer");
    const auto bytes = this->problem_.input_size() * sizeof(Complex);
    const auto in_address = reinterpret_cast<std::uintptr_t>(in), out_address = reinterpret_cast<std::uintptr_t>(out);
    EXPECTS(in_address + bytes <= out_address || out_address + bytes <= in_address,
            "gpu-direct execute: input and output buffers overlap");
    kernel_<<<blocks_, threads_, shared_bytes_, stream>>>(reinterpret_cast<const C*>(in), reinterpret_cast<C*>(out),
                                                          reinterpret_cast<const C*>(kernels_device_.data()), params_);
    CUDA_CHECK_LAUNCH();
  }

  [[nodiscard]] Backend backend() const override { return Backend::gpu_direct; }

 private:
  /// Fields in shared memory per block: at most this many bytes, so that two blocks fit on an SM.
  static constexpr std::size_t direct_sum_field_bytes = 32 * 1024;

  std::size_t plan_direct_sum(int r, const DeviceLimits& limits) {
    const Problem& g = this->problem_;
    switch (r) {
      case 1: kernel_ = direct_sum_kernel<C, 1>; break;
      case 2: kernel_ = direct_sum_kernel<C, 2>; break;
      case 4: kernel_ = direct_sum_kernel<C, 4>; break;
      case 8: kernel_ = direct_sum_kernel<C, 8>; break;
      default: EXPECTS(false, "gpu-direct: direct-sum tile R must be 1, 2, 4 or 8, got " + std::to_string(r));
    }
    DirectParams& p = params_;
    p.n2_padded = round_up(g.n2, r);
    p.chi_width = p.k2 + 2 * (r - 1);
    const std::size_t field_bytes = std::size_t(g.n1) * p.n2_padded * sizeof(C);
    const std::size_t most_fields = std::max<std::size_t>(1, direct_sum_field_bytes / field_bytes);
    // Enough blocks for two per SM where the batch allows, within the shared-memory budget.
    const std::size_t chunks = std::min<std::size_t>(
        g.per_slice, std::max(ceil_div(g.per_slice, most_fields), ceil_div(2 * limits.multiprocessors, g.slices)));
    p.fields_per_block = static_cast<int>(ceil_div(g.per_slice, chunks));
    p.chunks = static_cast<int>(ceil_div(g.per_slice, p.fields_per_block));
    const int tasks = p.fields_per_block * g.n1 * (p.n2_padded / r);
    threads_ = static_cast<unsigned>(std::min(max_direct_sum_threads, round_up(tasks, 32)));
    shared_bytes_ = (std::size_t(p.k1) * p.chi_width + std::size_t(p.fields_per_block) * g.n1 * p.n2_padded) * sizeof(C);
    return std::size_t(g.slices) * p.chunks;
  }

  std::size_t plan_toeplitz_product(int tm, const DeviceLimits& limits) {
    const Problem& g = this->problem_;
    switch (tm) {
      case 1: kernel_ = toeplitz_product_kernel<C, 1>; break;
      case 2: kernel_ = toeplitz_product_kernel<C, 2>; break;
      case 4: kernel_ = toeplitz_product_kernel<C, 4>; break;
      default: EXPECTS(false, "gpu-direct: Toeplitz-product tile TM must be 1, 2 or 4, got " + std::to_string(tm));
    }
    DirectParams& p = params_;
    const int field_size = g.n1 * g.n2;
    p.row_groups = std::min(64, round_up(int(ceil_div(field_size, tm)), 32));
    p.output_tiles = static_cast<int>(ceil_div(field_size, std::size_t(p.row_groups) * tm));
    // Field groups of 4, split evenly over the fewest blocks with at most max_product_field_groups groups
    // each; more blocks where that leaves under two per SM.
    const int groups = static_cast<int>(ceil_div(g.per_slice, fields_per_thread));
    const auto blocks_for = [&](std::size_t chunks) { return std::size_t(p.output_tiles) * g.slices * chunks; };
    std::size_t chunks = ceil_div(groups, max_product_field_groups);
    while (chunks < std::size_t(groups) && blocks_for(chunks) < std::size_t(2 * limits.multiprocessors)) ++chunks;
    const int groups_per_block = static_cast<int>(ceil_div(groups, chunks));
    p.fields_per_block = fields_per_thread * groups_per_block;
    p.chunks = static_cast<int>(ceil_div(groups, groups_per_block));
    threads_ = static_cast<unsigned>(p.row_groups * groups_per_block);
    shared_bytes_ = (std::size_t(p.k1) * p.k2 + std::size_t(product_depth) * p.fields_per_block) * sizeof(C) +
                    product_depth * sizeof(int);
    return blocks_for(p.chunks);
  }

  DeviceBuffer<Complex> kernels_device_;  // slices × K1×K2, χ_p rounded to Real
  std::vector<Complex> kernels_host_;     // staging for the rounding, so set_kernels allocates nothing
  DirectParams params_{};
  KernelFunction kernel_ = nullptr;
  unsigned blocks_ = 0, threads_ = 0;
  std::size_t shared_bytes_ = 0;
};

}  // namespace

DirectTiling choose_direct_tiling(const Problem& geometry) {
  const Problem g = resolve(geometry);
  const std::size_t target = parallelism_target(current_device_limits());
  for (int r : {8, 4, 2}) {
    const bool little_padding = 4 * round_up(g.n2, r) <= 5 * g.n2;
    if (little_padding && g.input_blocks() * g.n1 * ceil_div(g.n2, r) >= target) return {DirectForm::direct_sum, r};
  }
  if (g.per_slice >= fields_per_thread) {
    const std::size_t field_size = std::size_t(g.n1) * g.n2;
    const std::size_t columns = std::size_t(g.slices) * ceil_div(g.per_slice, fields_per_thread);
    for (int tm : {4, 2})
      if (ceil_div(field_size, tm) * columns >= target) return {DirectForm::toeplitz_product, tm};
    return {DirectForm::toeplitz_product, 1};
  }
  return {DirectForm::direct_sum, 1};
}

// Until gpu-direct sums a whole pattern per group, it serves scalar problems only.
Support can_implement_gpu_direct(const Problem& g, Precision) {
  if (!cuda_device_present()) return unsupported("needs a CUDA device, and none is present");
  if (!g.scalar()) return unsupported("serves scalar problems only (K = P = Q = 1)");
  if (g.field_size() > std::size_t(gpu_direct_max_field_size))
    return unsupported("serves N1*N2 <= " + std::to_string(gpu_direct_max_field_size) + " (N = 31 square), got " +
                       std::to_string(g.n1) + "*" + std::to_string(g.n2) + " = " + std::to_string(g.field_size()) +
                       "; use an FFT backend");
  return {};
}
std::size_t workspace_gpu_direct(const Problem& g, Precision precision) {
  return g.kernels_total() * (precision == Precision::single ? 8 : 16);
}

template <class Real>
Plan<Real> make_gpu_direct(const Problem& geometry, Kernels kernels, DirectTiling tiling) {
  const Problem g = resolve(geometry);
  check_kernels(g, kernels);
  SUPPORTS(g.field_size() <= std::size_t(gpu_direct_max_field_size),
           "gpu-direct serves N1*N2 <= " + std::to_string(gpu_direct_max_field_size) + " (N = 31 square), got " +
               std::to_string(g.n1) + "*" + std::to_string(g.n2) + " = " + std::to_string(g.field_size()) +
               "; use an FFT backend");
  return std::make_unique<GpuDirect<Real>>(g, kernels, tiling);
}

template <class Real>
Plan<Real> make_gpu_direct(const Problem& g, Kernels kernels) {
  return make_gpu_direct<Real>(g, kernels, choose_direct_tiling(g));
}

template Plan<float> make_gpu_direct<float>(const Problem&, Kernels, DirectTiling);
template Plan<double> make_gpu_direct<double>(const Problem&, Kernels, DirectTiling);
template Plan<float> make_gpu_direct<float>(const Problem&, Kernels);
template Plan<double> make_gpu_direct<double>(const Problem&, Kernels);
}  // namespace gratingsim::conv::detail
