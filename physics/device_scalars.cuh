#pragma once
// Per-rhs scalar arithmetic of the device Krylov iterations (device_gmres.cu, device_bicgstab.cu), for .cu files
// only: complex128 as double2 (.x real, .y imaginary) and the deterministic sums of per-block partial sums.
#include <cuda_runtime.h>
#include <vector_types.h>

#include <algorithm>
#include <cstddef>

#include "core/error.hpp"

namespace gratingsim::physics::device_scalars {

/// Blocks per rhs of a device iteration's per-rhs vector kernels: a quarter of the blocks the device holds at once
/// (`resident` per SM: the least occupancy among those kernels), so that a batch of 4k rhs runs in k whole waves
/// (no tail); at least one, at most `chunks` (a rhs's chunks of threads_per_block elements) and 65535 (grid.x).
/// Independent of the number of rhs, so that a rhs's sums, hence its results, do not depend on the batch it is
/// solved in (the distributed sweep's bit-for-bit promise). Host code.
inline int blocks_per_rhs(int resident, std::size_t chunks) {
  int device = 0, sms = 0;
  GS_CUDA_TRY(cudaGetDevice(&device));
  GS_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t per_rhs = std::size_t(std::max(resident, 1)) * std::size_t(std::max(sms, 1)) / 4;
  return int(std::clamp<std::size_t>(per_rhs, 1, std::min<std::size_t>(chunks, 65535)));
}

__device__ inline double2 mul(double2 a, double2 b) { return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; }
__device__ inline double2 add(double2 a, double2 b) { return {a.x + b.x, a.y + b.y}; }
__device__ inline double2 sub(double2 a, double2 b) { return {a.x - b.x, a.y - b.y}; }
__device__ inline double2 scaled(double c, double2 a) { return {c * a.x, c * a.y}; }
__device__ inline double2 conjugate(double2 a) { return {a.x, -a.y}; }
__device__ inline double magnitude(double2 a) { return hypot(a.x, a.y); }
__device__ inline double2 divide(double2 a, double2 b) {
  const double d = b.x * b.x + b.y * b.y;
  return {(a.x * b.x + a.y * b.y) / d, (a.y * b.x - a.x * b.y) / d};
}
__device__ inline bool is_zero(double2 a) { return a.x == 0 && a.y == 0; }

/// Sum over the 32 lanes of a warp (every lane gets it).
__device__ inline double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return __shfl_sync(0xffffffffu, v, 0);
}

/// Σ_b partial[b] for b < blocks by the 32 lanes of a warp (lane l adds b ≡ l mod 32 in order, then a fixed
/// shuffle tree: deterministic); every lane gets the sum.
__device__ inline double2 warp_sum_partials(const double2* __restrict__ partial, int blocks, int lane) {
  double re = 0, im = 0;
  for (int b = lane; b < blocks; b += 32) {
    re += partial[b].x;
    im += partial[b].y;
  }
  return {warp_sum(re), warp_sum(im)};
}

}  // namespace gratingsim::physics::device_scalars
