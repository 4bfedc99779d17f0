// gpu-direct: the convolution sums themselves on the GPU, for small N (the crossover study against the
// FFT backends). For group g of slice p = g / per_slice and output o:
//     out_{g,o}(m) = Σ_{terms (o, q, k)} Σ_{m'} χ_{p,k}(m − m') in_{g,q}(m'),   O(N1²·N2²) complex FMAs per term.
// Below, "field" is a group's input or output block and χ_p the term's kernel χ_{p,k}: a scalar problem
// (K = P = Q = 1) is one term per output; a pattern runs the same loops once per term of the output.
// With 0-based indices i = (i1, i2) of m and j of m', χ_p(m − m') sits at (i1 − j1 + N1 − 1)·K2 +
// (i2 − j2 + N2 − 1) = c + off(i) − off(j) in the kernel block, off(i) = i1·K2 + i2, c = off(N1 − 1, N2 − 1).
//
// Two forms, one per plan (DirectForm in gpu_direct.hpp):
//  direct sum: one CUDA block per (slice, chunk of F groups, output o), per term χ_p (rows padded by R − 1 zeros on both
//    sides) and the F fields (rows padded with zeros to a multiple of R) in shared memory. A thread
//    computes R consecutive outputs i2_0 … i2_0 + R − 1 of one row of one field. Along a row of χ the
//    outputs need shifted coefficients χ(·, i2_0 + r − j2 + N2 − 1): a window of R coefficients in
//    registers, rotated at compile time (slot (r − j2) mod R), takes one new coefficient per j2. Per
//    inner step: 1 χ load, 1 field load (the same address across the warp: a broadcast), R complex FMAs.
//    Patterns: the terms of o run one after another through shared memory; a thread stores its sums for
//    the first term and adds them to what it stored for every further one (each thread owns the same
//    outputs for every term), so a term costs one extra read of the output block.
//  Toeplitz product: Out_p = T_p · X_p, T_p[i][j] = χ_p(m_i − m_j) the N1N2 × N1N2 block-Toeplitz matrix,
//    X_p the N1N2 × per_slice matrix of the fields sharing χ_p. T_p is never stored: entry (i, j) is
//    χ_p[c + off(i) − off(j)] read from χ_p in shared memory. A CUDA block computes (RG·TM outputs) ×
//    (4·C fields); X_p streams through shared memory in chunks of 32 rows (j). A thread keeps TM outputs
//    (strided by RG, so that a warp reads consecutive χ entries) × 4 fields: per inner step TM χ loads,
//    4 field loads (broadcast), 1 offset load (broadcast), 4·TM complex FMAs.
//    Patterns: a CUDA block per (output tile, slice, chunk, output o); Out_{p,o} = Σ_{terms (o, q, k)}
//    T_{p,k} · X_{p,q}, each term's χ and X streamed in turn, the accumulators in registers throughout.
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
// Limits: N1·N2 ≤ gpu_direct_max_field_size (961); beyond it the plan is declined (Unsupported); any
// pattern; at most 2^31 − 1 CUDA blocks per launch (can_implement_gpu_direct).
//
// Streams: execute() is one kernel launch on the caller's stream and does not synchronise;
// set_kernels() synchronises with the whole device before (no execute in flight reads the kernels being
// replaced) and after (the copy is complete on return).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "convolution/backends.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/device_complex.cuh"
#include "convolution/gpu_direct.hpp"

namespace gratingsim::conv::detail {
namespace {

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
  int kernels, inputs, outputs;  ///< K, Q, P
  const int2* terms;             ///< the pattern sorted by output: (input q, kernel k) pairs
  const int* term_begin;         ///< output o's terms are terms[term_begin[o] .. term_begin[o + 1])
  int chunks;                    ///< CUDA blocks per (slice, output) along the groups
  int fields_per_block;          ///< groups per CUDA block: direct sum F; Toeplitz product 4·C
  // direct sum
  int n2_padded;  ///< N2 rounded up to a multiple of R
  int chi_width;  ///< K2 + 2(R − 1): a χ row with R − 1 zeros on each side
  // Toeplitz product
  int row_groups;    ///< RG threads along the outputs (32 or 64); C = blockDim.x / RG along the fields
  int output_tiles;  ///< ⌈N1N2 / (RG·TM)⌉ CUDA blocks per (slice, chunk, output)
};

constexpr int product_depth = 32;      // rows j of X_p per shared-memory chunk
constexpr int fields_per_thread = 4;   // the 4 of the Toeplitz product's register tile
constexpr int max_direct_sum_threads = 256;
constexpr int max_product_field_groups = 4;  // 64 × 4 threads: up to 255 registers each

extern __shared__ __align__(16) unsigned char shared_memory[];

// CUDA block (slice, chunk of F groups, output o), blockIdx.x = (slice·chunks + chunk)·P + o. Per term
// (o, q, k) of the pattern, χ_{p,k} and input q of the F groups pass through shared memory; each thread's
// tasks (R outputs of a row) are summed in registers and stored; every further term starts from the
// stored value (the same thread owns the same outputs for every term: no race).
template <class C, int R>
__global__ void __launch_bounds__(max_direct_sum_threads)
    direct_sum_kernel(const C* __restrict__ in, C* __restrict__ out, const C* __restrict__ kernels, DirectParams p) {
  const int width = p.chi_width, n2p = p.n2_padded, field_size = p.n1 * p.n2;
  C* chi = reinterpret_cast<C*>(shared_memory);  // K1 × width
  C* fields = chi + p.k1 * width;                 // F × N1 × n2p
  const int o = blockIdx.x % p.outputs, rest = blockIdx.x / p.outputs;
  const int slice = rest / p.chunks;
  const int first = (rest % p.chunks) * p.fields_per_block;
  const int count = min(p.fields_per_block, p.per_slice - first);
  const std::size_t first_group = std::size_t(slice) * p.per_slice + first;
  const int tiles = n2p / R;

  for (int term = p.term_begin[o]; term < p.term_begin[o + 1]; ++term) {
    const int2 qk = p.terms[term];  // (input, kernel)
    __syncthreads();  // the previous term's χ and fields have been consumed
    const C* chi_global = kernels + (std::size_t(slice) * p.kernels + qk.y) * p.k1 * p.k2;
    for (int e = threadIdx.x; e < p.k1 * width; e += blockDim.x) {
      const int row = e / width, column = e - row * width - (R - 1);
      chi[e] = (column >= 0 && column < p.k2) ? chi_global[row * p.k2 + column] : C{0, 0};
    }
    for (int e = threadIdx.x; e < count * p.n1 * n2p; e += blockDim.x) {
      const int row = e / n2p, column = e - row * n2p;  // row = f·N1 + j1
      const int f = row / p.n1, j1 = row - f * p.n1;
      const C* field = in + ((first_group + f) * p.inputs + qk.x) * field_size;
      fields[e] = column < p.n2 ? field[j1 * p.n2 + column] : C{0, 0};
    }
    __syncthreads();

    for (int task = threadIdx.x; task < count * p.n1 * tiles; task += blockDim.x) {
      const int f = task / (p.n1 * tiles), rest_task = task - f * p.n1 * tiles;
      const int i1 = rest_task / tiles, i2_first = (rest_task - i1 * tiles) * R;
      // Every term after the first continues the sum stored by the previous one, so that the products
      // are added in one sequence (terms in order, then j1, then j2), the sequence of the Toeplitz
      // product: a result is then bit for bit the same whichever form the batch size selects.
      C* out_block = out + ((first_group + f) * p.outputs + o) * field_size + i1 * p.n2;
      const bool first_term = term == p.term_begin[o];
      C acc[R];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = (!first_term && i2_first + r < p.n2) ? out_block[i2_first + r] : C{0, 0};
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
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (i2_first + r < p.n2) out_block[i2_first + r] = acc[r];
    }
  }
}

// CUDA block (output tile, slice, chunk of 4·C groups, output o), blockIdx.x =
// ((slice·chunks + chunk)·P + o)·output_tiles + tile. Out_{p,o} = Σ_{terms (o, q, k)} T_{p,k} · X_{p,q}:
// per term, χ_{p,k} in shared memory and X_{p,q} streamed through it; each thread's TM × 4 accumulators
// stay in registers across all terms and are stored once.
template <class C, int TM>
__global__ void __launch_bounds__(64 * max_product_field_groups)
    toeplitz_product_kernel(const C* __restrict__ in, C* __restrict__ out, const C* __restrict__ kernels,
                            DirectParams p) {
  const int field_size = p.n1 * p.n2, kernel_size = p.k1 * p.k2, width = p.fields_per_block;
  C* chi = reinterpret_cast<C*>(shared_memory);              // K1·K2
  C* x_chunk = chi + kernel_size;                             // product_depth × width, field fastest
  int* offsets = reinterpret_cast<int*>(x_chunk + product_depth * width);  // c − off(j) per chunk row
  const int tile = blockIdx.x % p.output_tiles, rest = blockIdx.x / p.output_tiles;
  const int o = rest % p.outputs, slice_chunk = rest / p.outputs;
  const int slice = slice_chunk / p.chunks, first = (slice_chunk % p.chunks) * width;
  const int count = min(width, p.per_slice - first);
  const std::size_t first_group = std::size_t(slice) * p.per_slice + first;

  const int group = threadIdx.x % p.row_groups, field0 = (threadIdx.x / p.row_groups) * fields_per_thread;
  const int centre = (p.n1 - 1) * p.k2 + (p.n2 - 1);
  const int output0 = tile * p.row_groups * TM + group;  // this thread's outputs: output0 + t·RG
  int output_offset[TM];
#pragma unroll
  for (int t = 0; t < TM; ++t) {
    const int i = min(output0 + t * p.row_groups, field_size - 1);  // past the end: computed on a valid entry, not stored
    output_offset[t] = (i / p.n2) * p.k2 + i % p.n2;
  }
  C acc[TM][fields_per_thread];
#pragma unroll
  for (int t = 0; t < TM; ++t)
#pragma unroll
    for (int u = 0; u < fields_per_thread; ++u) acc[t][u] = C{0, 0};

  const C* in_groups = in + first_group * p.inputs * field_size;  // input 0 of the chunk's first group
  const int term_end = p.term_begin[o + 1];
#pragma unroll 1
  for (int term = p.term_begin[o]; term < term_end; ++term) {
    const int2 qk = p.terms[term];  // (input, kernel)
    __syncthreads();  // the previous term's χ and last chunk have been consumed
    const C* chi_global = kernels + (std::size_t(slice) * p.kernels + qk.y) * kernel_size;
    for (int e = threadIdx.x; e < kernel_size; e += blockDim.x) chi[e] = chi_global[e];
    const C* in_term = in_groups + std::size_t(qk.x) * field_size;  // input q of the chunk's first group

    for (int j_first = 0; j_first < field_size; j_first += product_depth) {
      __syncthreads();  // the previous chunk has been consumed (and, first time, χ is not yet needed)
      for (int e = threadIdx.x; e < product_depth * width; e += blockDim.x) {
        const int f = e / product_depth, jj = e - f * product_depth, j = j_first + jj;  // j fastest: coalesced
        x_chunk[jj * width + f] =
            (j < field_size && f < count) ? in_term[std::size_t(f) * p.inputs * field_size + j] : C{0, 0};
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
  }
#pragma unroll
  for (int t = 0; t < TM; ++t)
#pragma unroll
    for (int u = 0; u < fields_per_thread; ++u)
      if (output0 + t * p.row_groups < field_size && field0 + u < count)
        out[((first_group + field0 + u) * p.outputs + o) * field_size + output0 + t * p.row_groups] = acc[t][u];
}

struct DeviceLimits {
  int multiprocessors = 0;
  int shared_bytes_per_block = 0;  ///< the opt-in maximum of dynamic shared memory
};

DeviceLimits current_device_limits() {
  int device = 0;
  DeviceLimits limits;
  GS_CUDA_TRY(cudaGetDevice(&device));
  GS_CUDA_TRY(cudaDeviceGetAttribute(&limits.multiprocessors, cudaDevAttrMultiProcessorCount, device));
  GS_CUDA_TRY(cudaDeviceGetAttribute(&limits.shared_bytes_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
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
    // The pattern sorted by output, (input, kernel) pairs, and the P + 1 offsets of each output's terms.
    std::vector<int2> terms;
    std::vector<int> term_begin;
    for (int o = 0; o < g.outputs; ++o) {
      term_begin.push_back(static_cast<int>(terms.size()));
      for (const Term& t : g.pattern)
        if (t.output == o) terms.push_back(int2{t.input, t.kernel});
    }
    term_begin.push_back(static_cast<int>(terms.size()));
    terms_ = DeviceBuffer<int2>(terms.size());
    term_begin_ = DeviceBuffer<int>(term_begin.size());
    terms_.upload(terms);
    term_begin_.upload(term_begin);
    params_ = DirectParams{.n1 = g.n1, .n2 = g.n2, .k1 = 2 * g.n1 - 1, .k2 = 2 * g.n2 - 1,
                           .per_slice = g.per_slice, .kernels = g.kernels, .inputs = g.inputs, .outputs = g.outputs,
                           .terms = terms_.data(), .term_begin = term_begin_.data(), .chunks = 1,
                           .fields_per_block = 1, .n2_padded = g.n2, .chi_width = 2 * g.n2 - 1, .row_groups = 32,
                           .output_tiles = 1};
    std::size_t blocks = 0;
    if (tiling.form == DirectForm::direct_sum)
      blocks = plan_direct_sum(tiling.outputs_per_thread, limits);
    else
      blocks = plan_toeplitz_product(tiling.outputs_per_thread, limits);
    GS_SUPPORTS(shared_bytes_ <= std::size_t(limits.shared_bytes_per_block),
             "gpu-direct needs " + std::to_string(shared_bytes_) + " bytes of shared memory per block for N1xN2 = " +
                 std::to_string(g.n1) + "x" + std::to_string(g.n2) + ", above the device's " +
                 std::to_string(limits.shared_bytes_per_block));
    GS_SUPPORTS(blocks <= std::size_t(INT32_MAX), "gpu-direct: batch too large for one grid (" + std::to_string(blocks) +
                                                   " CUDA blocks, limit 2^31 - 1)");
    blocks_ = static_cast<unsigned>(blocks);
    // The attribute belongs to the kernel function, shared by every plan that instantiates it: set to this
    // plan's need, a later plan needing less would make this one's launches fail (cudaErrorInvalidValue).
    // The device's opt-in maximum serves every plan.
    GS_CUDA_TRY(cudaFuncSetAttribute(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize, limits.shared_bytes_per_block));
    set_kernels(kernels);
  }

  void set_kernels(Kernels kernels) override {
    check_kernels(this->problem_, kernels);
    for (std::size_t i = 0; i < kernels.size(); ++i) kernels_host_[i] = Complex(kernels[i]);
    kernels_device_.upload(kernels_host_);  // waits for its copy (executes reading the old kernels: the caller's)
  }

  void execute(const Complex* in, Complex* out, Stream stream) override {
    check_execute_buffers(this->problem_, backend(), in, out, sizeof(Complex));
    kernel_<<<blocks_, threads_, shared_bytes_, stream>>>(reinterpret_cast<const C*>(in), reinterpret_cast<C*>(out),
                                                          reinterpret_cast<const C*>(kernels_device_.data()), params_);
    GS_CUDA_CHECK_LAUNCH();
  }

  [[nodiscard]] Backend backend() const override { return Backend::gpu_direct; }
  /// One kernel launch on `stream`, arguments fixed by the plan and the buffers (convolution.hpp).
  [[nodiscard]] bool capturable() const override { return true; }

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
      default: GS_EXPECTS(false, "gpu-direct: direct-sum tile R must be 1, 2, 4 or 8, got " + std::to_string(r));
    }
    DirectParams& p = params_;
    p.n2_padded = round_up(g.n2, r);
    p.chi_width = p.k2 + 2 * (r - 1);
    const std::size_t field_bytes = std::size_t(g.n1) * p.n2_padded * sizeof(C);
    const std::size_t most_fields = std::max<std::size_t>(1, direct_sum_field_bytes / field_bytes);
    // Enough blocks for two per SM where the batch allows, within the shared-memory budget (P blocks per
    // (slice, chunk): one per output).
    const std::size_t chunks = std::min<std::size_t>(
        g.per_slice, std::max(ceil_div(g.per_slice, most_fields),
                              ceil_div(2 * limits.multiprocessors, std::size_t(g.slices) * g.outputs)));
    p.fields_per_block = static_cast<int>(ceil_div(g.per_slice, chunks));
    p.chunks = static_cast<int>(ceil_div(g.per_slice, p.fields_per_block));
    const int tasks = p.fields_per_block * g.n1 * (p.n2_padded / r);
    threads_ = static_cast<unsigned>(std::min(max_direct_sum_threads, round_up(tasks, 32)));
    shared_bytes_ = (std::size_t(p.k1) * p.chi_width + std::size_t(p.fields_per_block) * g.n1 * p.n2_padded) * sizeof(C);
    return std::size_t(g.slices) * p.chunks * g.outputs;
  }

  std::size_t plan_toeplitz_product(int tm, const DeviceLimits& limits) {
    const Problem& g = this->problem_;
    switch (tm) {
      case 1: kernel_ = toeplitz_product_kernel<C, 1>; break;
      case 2: kernel_ = toeplitz_product_kernel<C, 2>; break;
      case 4: kernel_ = toeplitz_product_kernel<C, 4>; break;
      default: GS_EXPECTS(false, "gpu-direct: Toeplitz-product tile TM must be 1, 2 or 4, got " + std::to_string(tm));
    }
    DirectParams& p = params_;
    const int field_size = g.n1 * g.n2;
    p.row_groups = std::min(64, round_up(int(ceil_div(field_size, tm)), 32));
    p.output_tiles = static_cast<int>(ceil_div(field_size, std::size_t(p.row_groups) * tm));
    // Field groups of 4, split evenly over the fewest blocks with at most max_product_field_groups groups
    // each; more blocks where that leaves under two per SM.
    const int groups = static_cast<int>(ceil_div(g.per_slice, fields_per_thread));
    const auto blocks_for = [&](std::size_t chunks) {
      return std::size_t(p.output_tiles) * g.slices * chunks * g.outputs;
    };
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

  DeviceBuffer<Complex> kernels_device_;  // slices·K × K1×K2, χ_{p,k} rounded to Real
  std::vector<Complex> kernels_host_;     // staging for the rounding, so set_kernels allocates nothing
  DeviceBuffer<int2> terms_;              // the pattern sorted by output: (input, kernel)
  DeviceBuffer<int> term_begin_;          // P + 1 offsets into terms_
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
    if (little_padding && g.output_blocks() * g.n1 * ceil_div(g.n2, r) >= target) return {DirectForm::direct_sum, r};
  }
  if (g.per_slice >= fields_per_thread) {
    const std::size_t field_size = std::size_t(g.n1) * g.n2;
    const std::size_t columns = std::size_t(g.slices) * g.outputs * ceil_div(g.per_slice, fields_per_thread);
    for (int tm : {4, 2})
      if (ceil_div(field_size, tm) * columns >= target) return {DirectForm::toeplitz_product, tm};
    return {DirectForm::toeplitz_product, 1};
  }
  return {DirectForm::direct_sum, 1};
}

// Any pattern (both forms sum the terms); L is irrelevant (no FFT). Limits: N1·N2 ≤ 961, and a grid of
// at most 2^31 − 1 CUDA blocks: every form launches at most output_blocks·⌈N1N2/32⌉ (the Toeplitz product's
// output tiles times its field chunks; the direct sum fewer), so larger batches are refused here.
// Shared memory per CUDA block does not grow with the pattern (one term's χ and fields at a time); a
// forced tile that does not fit is declined when planning (Unsupported).
Support can_implement_gpu_direct(const Problem& g, Precision) {
  if (!cuda_device_present()) return unsupported("needs a CUDA device, and none is present");
  if (g.field_size() > std::size_t(gpu_direct_max_field_size))
    return unsupported("serves N1*N2 <= " + std::to_string(gpu_direct_max_field_size) + " (N = 31 square), got " +
                       std::to_string(g.n1) + "*" + std::to_string(g.n2) + " = " + std::to_string(g.field_size()) +
                       "; use an FFT backend");
  if (g.output_blocks() * ceil_div(g.field_size(), 32) > std::size_t(INT32_MAX))
    return unsupported("serves at most " + std::to_string(INT32_MAX / ceil_div(g.field_size(), 32)) +
                       " output blocks of N1*N2 = " + std::to_string(g.field_size()) + " (one grid), got " +
                       std::to_string(g.output_blocks()));
  return {};
}
// Device bytes: the kernels (rounded to the working precision) and the pattern's term lists.
std::size_t workspace_gpu_direct(const Problem& g, Precision precision) {
  return g.kernels_total() * (precision == Precision::single ? 8 : 16) + g.pattern.size() * sizeof(int2) +
         (g.outputs + 1) * sizeof(int);
}

template <class Real>
Plan<Real> make_gpu_direct(const Problem& geometry, Kernels kernels, DirectTiling tiling) {
  const Problem g = resolve(geometry);
  check_kernels(g, kernels);
  GS_SUPPORTS(g.field_size() <= std::size_t(gpu_direct_max_field_size),
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
