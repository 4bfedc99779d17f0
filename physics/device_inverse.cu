// Batched Gauss–Jordan inversion (device_inverse.hpp).
//
// In place, with the pivots' rows not moved: eliminating column k with pivot row r scales row r by 1/p
// (p = a_rk) and subtracts f_i = a_ik times it from every other row i, and stores column r of the
// accumulated row operation T in column k's place (a_rk ← 1/p, a_ik ← −f_i/p), the only column of T that
// step changes. After all n columns the storage S holds T = Q A⁻¹ with Q's row r_k = e_kᵀ (r_k the pivot row
// of column k), column r_k of T in slot k: A⁻¹(k, c) = T(r_k, c) = S(r_k, q_c), q_c the column that row c
// pivoted. Blocked: the steps of a panel of w columns touch only the panel, and their composite T_K differs
// from I only in the columns R_K of the panel's pivot rows, which the panel then holds (slot s: T_K's
// column r_s), so every other column j is updated once per panel,
//   a_ij ← [i ∉ R_K] a_ij + Σ_s panel(i, s) a_{r_s j}     (a rank-w update, n² w multiply-adds),
// with the pivot rows' old values a_{r_s j} gathered first. n³ complex multiply-adds in all, as LU with the
// inverse from its factors.
//
// Per panel two launches: `eliminate_panel_in_registers` (n ≤ 512; the panel in the block's registers) or
// `eliminate_panel` (beyond; in shared memory), one block per matrix, runs the panel's w steps (each a pivot
// search and a rank-1 update of the n × w panel) and gathers the pivot rows; `apply_panel` updates the
// other columns, a block per 64 × 32 tile of every matrix, so that one matrix alone spreads over the device.
// The update of an element is the same sum in the same order whatever the tiling or the batch. `permute`
// writes A⁻¹ out of place.
#include "physics/device_inverse.hpp"

#include <algorithm>
#include <string>

#include "core/cuda_check.hpp"
#include "core/error.hpp"

namespace gratingsim::physics {
namespace {

constexpr int panel_threads = 512;
constexpr int panel_warps = panel_threads / 32;
constexpr int widest_panel = 32;
/// apply_panel's tile: 64 rows × 32 columns, 256 threads, each 2 rows × 4 columns (its panel values serve
/// four columns, its gathered values two rows).
constexpr int tile_rows = 64, tile_columns = 32, apply_threads = 256;

__device__ double2 times(double2 a, double2 b) { return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; }

/// A pivot candidate's size as LAPACK's izamax measures it, |re| + |im|, a non-finite value largest (so that
/// the smallest-pivot test sees it).
__device__ double pivot_size(double2 v) {
  const double m = fabs(v.x) + fabs(v.y);
  return isfinite(m) ? m : INFINITY;
}

/// (best, row) ← the largest of the warp's candidates, ties to the lower row; every lane gets it.
__device__ void warp_pivot(double& best, int& row) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const double other = __shfl_xor_sync(~0u, best, offset);
    const int other_row = __shfl_xor_sync(~0u, row, offset);
    if (other > best || (other == best && other_row < row)) {
      best = other;
      row = other_row;
    }
  }
}

/// Per matrix in the workspace: each column's pivot row and each row's column (n ints each, −1 before),
/// padded to a complex128, then the gathered pivot rows (w × n complex128, (s, j) at j·w + s).
__host__ __device__ std::size_t pivot_bytes(int n) {
  return (2 * std::size_t(n) * sizeof(int) + sizeof(double2) - 1) / sizeof(double2) * sizeof(double2);
}
std::size_t workspace_per_matrix(int n) { return pivot_bytes(n) + std::size_t(widest_panel) * n * sizeof(double2); }

struct Workspace {
  int* pivot_row;
  int* row_column;
  double2* gathered;
};
__device__ Workspace workspace_of(unsigned char* base, int n, std::size_t per_matrix, int k) {
  unsigned char* w = base + std::size_t(k) * per_matrix;
  return {reinterpret_cast<int*>(w), reinterpret_cast<int*>(w) + n, reinterpret_cast<double2*>(w + pivot_bytes(n))};
}

/// Dynamic shared memory of eliminate_panel: the panel (n × w) and the multipliers (n) in complex128, each
/// row's column (n ints).
std::size_t panel_bytes(int n, int width) {
  return (std::size_t(n) * width + std::size_t(n)) * sizeof(double2) + std::size_t(n) * sizeof(int);
}

/// The w steps of the panel of columns [k0, k0 + w) of matrix blockIdx.x, in shared memory; the panel written
/// back, the pivots recorded, the pivot rows' values of the other columns gathered; smallest ← the least
/// |pivot| so far (0 once one is not finite).
__global__ void __launch_bounds__(panel_threads)
    eliminate_panel(double2* const* matrices, double* const* smallest, unsigned char* workspace, std::size_t per_matrix,
                    int n, int k0, int w) {
  extern __shared__ double2 shared[];
  double2* panel = shared;               // (i, s) at s·n + i
  double2* multiplier = panel + std::size_t(n) * w;  // the column being eliminated, before its step
  int* row_column = reinterpret_cast<int*>(multiplier + n);
  __shared__ double2 pivot_line[widest_panel];  // the pivot row's panel values, scaled by 1/p
  __shared__ double warp_value[panel_warps];
  __shared__ int warp_row[panel_warps], chosen;
  double2* a = matrices[blockIdx.x];
  const Workspace ws = workspace_of(workspace, n, per_matrix, int(blockIdx.x));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int first_row = int(threadIdx.x) % n, first_column = int(threadIdx.x) / n;
  const int row_step = int(blockDim.x) % n, column_step = int(blockDim.x) / n;
  double least = k0 == 0 ? INFINITY : *smallest[blockIdx.x];  // thread 0's
  for (int i = threadIdx.x; i < n; i += blockDim.x) row_column[i] = k0 == 0 ? -1 : ws.row_column[i];
  for (int e = threadIdx.x; e < n * w; e += blockDim.x) panel[e] = a[std::size_t(k0) * n + e];
  __syncthreads();
  for (int s = 0; s < w; ++s) {
    // The pivot: the remaining row of largest pivot_size, ties to the lower row.
    const double2* column = panel + std::size_t(s) * n;
    double best = -1;
    int row = n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const double2 v = column[i];
      multiplier[i] = v;
      if (row_column[i] < 0 && pivot_size(v) > best) {
        best = pivot_size(v);
        row = i;
      }
    }
    warp_pivot(best, row);
    if (lane == 0) {
      warp_value[warp] = best;
      warp_row[warp] = row;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int k = 1; k < panel_warps; ++k)
        if (warp_value[k] > best || (warp_value[k] == best && warp_row[k] < row)) {
          best = warp_value[k];
          row = warp_row[k];
        }
      row_column[row] = k0 + s;
      ws.pivot_row[k0 + s] = row;
      chosen = row;
      const double2 p = column[row];
      const double magnitude = hypot(p.x, p.y);
      least = isfinite(magnitude) ? fmin(least, magnitude) : 0.0;
      const double scale = 1 / (p.x * p.x + p.y * p.y);
      pivot_line[s] = {p.x * scale, -p.y * scale};
    }
    __syncthreads();
    const int r = chosen;
    if (int c = threadIdx.x; c < w && c != s) pivot_line[c] = times(panel[std::size_t(c) * n + r], pivot_line[s]);
    __syncthreads();
    // Element e = c·n + i for e = threadIdx.x, + blockDim.x, …: (i, c) advanced by (blockDim.x mod n,
    // blockDim.x div n) with a carry, not divided per element (the division was most of the step's
    // instructions, and the step is instruction-bound on its one SM).
    for (int i = first_row, c = first_column; c < w;) {
      double2& a_ic = panel[std::size_t(c) * n + i];
      if (i == r) {
        a_ic = pivot_line[c];
      } else {
        const double2 f = times(multiplier[i], pivot_line[c]);
        a_ic = c == s ? double2{-f.x, -f.y} : double2{a_ic.x - f.x, a_ic.y - f.y};
      }
      i += row_step;
      c += column_step;
      if (i >= n) {
        i -= n;
        ++c;
      }
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < n * w; e += blockDim.x) a[std::size_t(k0) * n + e] = panel[e];
  for (int i = threadIdx.x; i < n; i += blockDim.x) ws.row_column[i] = row_column[i];
  for (int e = threadIdx.x; e < n * w; e += blockDim.x) {
    const int s = e % w, j = e / w;
    if (j < k0 || j >= k0 + w) ws.gathered[e] = a[std::size_t(j) * n + ws.pivot_row[k0 + s]];
  }
  if (threadIdx.x == 0) *smallest[blockIdx.x] = least;
}

/// Between row k of a thread's register panel v (k < Rows, known only at run time) and `line`: line ← v[·][k]
/// when `read`, else v[·][k] ← line, for columns [first, last). A switch on k, so that registers are addressed
/// statically.
template <int Rows, int Columns, int First = 0, int Last = Columns>
__device__ __forceinline__ void copy_row(double2 (&v)[Columns][Rows], int k, double2 (&line)[Columns], bool read) {
#define GS_ROW_CASE(K)                                  \
  case K:                                               \
    if constexpr (K < Rows) {                           \
      for (int j = First; j < Last; ++j)                \
        if (read)                                       \
          line[j] = v[j][K];                            \
        else                                            \
          v[j][K] = line[j];                            \
    }                                                   \
    break;
  switch (k) {
    GS_ROW_CASE(0) GS_ROW_CASE(1) GS_ROW_CASE(2) GS_ROW_CASE(3) GS_ROW_CASE(4) GS_ROW_CASE(5) GS_ROW_CASE(6)
    GS_ROW_CASE(7) GS_ROW_CASE(8) GS_ROW_CASE(9) GS_ROW_CASE(10) GS_ROW_CASE(11) GS_ROW_CASE(12) GS_ROW_CASE(13)
    GS_ROW_CASE(14) GS_ROW_CASE(15)
  }
#undef GS_ROW_CASE
  static_assert(Rows <= 16, "copy_row: rows 0 to 15");
}

/// The register panel of eliminate_panel_in_registers: warp g holds the panel's columns Columns·g …
/// Columns·g + Columns − 1, lane l their rows l, l + 32, …, l + 32(Rows − 1) (rows past n are carried and never
/// stored). Shared between the warps: the multipliers of a step (its column before the step) and its pivot,
/// double-buffered, and the recorded pivots.
template <int Rows, int Columns>
struct RegisterPanel {
  double2 (&v)[Columns][Rows];
  unsigned& unavailable;  // bit k: row lane + 32k pivoted an earlier column, or is past n
  double2 (*multiplier)[32 * Rows];
  double2* inverse_pivot;
  int* chosen;
  int* pivot_rows;
  double* least;
  Workspace ws;
  int lane, n, k0;

  /// Step s's pivot from column j (this warp's): its values become the step's multipliers (buffer s & 1), the
  /// pivot is the remaining row of largest pivot_size (ties to the lower row, as eliminate_panel), recorded with
  /// 1/p and the least |pivot| so far.
  template <int J>
  __device__ __forceinline__ void search(int s) {
    const int buffer = s & 1;
    double best = -1;
    int row = n;
#pragma unroll
    for (int k = 0; k < Rows; ++k) {
      const double2 value = v[J][k];
      const int i = lane + 32 * k;
      multiplier[buffer][i] = value;
      if (!(unavailable >> k & 1u) && pivot_size(value) > best) {
        best = pivot_size(value);
        row = i;
      }
    }
    warp_pivot(best, row);
    __syncwarp();
    if (lane == 0) {
      chosen[buffer] = row;
      pivot_rows[s] = row;
      ws.pivot_row[k0 + s] = row;
      ws.row_column[row] = k0 + s;
      const double2 p = multiplier[buffer][row];
      const double scale = 1 / (p.x * p.x + p.y * p.y);
      inverse_pivot[buffer] = {p.x * scale, -p.y * scale};
      const double magnitude = hypot(p.x, p.y);
      *least = isfinite(magnitude) ? fmin(*least, magnitude) : 0.0;
    }
  }
};

/// eliminate_panel with the panel in registers (RegisterPanel), for n ≤ 32·Rows. The shared-memory kernel's
/// step was bound by the panel's round trip through shared memory (n·w complex128 read and written per step)
/// and its block-wide pivot search; here only the multipliers pass through shared memory, double-buffered so
/// that a step has one barrier, the pivot search is the owning warp's alone, and a column's pivot-row value comes
/// by a shuffle within its warp. The update a_ic − m_i·line_c is fused (four FMAs; eliminate_panel rounds the
/// product first), so the two kernels' inverses differ in the last bits; which kernel serves a matrix depends on
/// n only. (Searching step s + 1's pivot ahead, in the warp holding that column while the others still update
/// theirs, measured 5–8 % slower at n = 242–482 on an H100: the step is bound by the update's instructions, not
/// by the search.)
template <int Rows, int Columns>
__global__ void __launch_bounds__(panel_threads, 1)
    eliminate_panel_in_registers(double2* const* matrices, double* const* smallest, unsigned char* workspace,
                                 std::size_t per_matrix, int n, int k0, int w) {
  static_assert(Columns == 1 || Columns == 2, "eliminate_panel_in_registers: one or two columns per warp");
  __shared__ double2 multiplier[2][32 * Rows];
  __shared__ double2 inverse_pivot[2];
  __shared__ int chosen[2], pivot_rows[32];
  __shared__ double least;
  double2* a = matrices[blockIdx.x];
  const Workspace ws = workspace_of(workspace, n, per_matrix, int(blockIdx.x));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, first_column = Columns * warp;
  if (k0 == 0)
    for (int i = threadIdx.x; i < n; i += blockDim.x) ws.row_column[i] = -1;
  double2 v[Columns][Rows];
  unsigned unavailable = 0;
#pragma unroll
  for (int k = 0; k < Rows; ++k) {
    const int i = lane + 32 * k;
    if (i >= n || (k0 > 0 && ws.row_column[i] >= 0)) unavailable |= 1u << k;
#pragma unroll
    for (int j = 0; j < Columns; ++j) {
      const int c = first_column + j;
      v[j][k] = i < n && c < w ? a[std::size_t(k0 + c) * n + i] : double2{0, 0};
    }
  }
  if (threadIdx.x == 0) least = k0 == 0 ? INFINITY : *smallest[blockIdx.x];
  RegisterPanel<Rows, Columns> panel{v, unavailable, multiplier, inverse_pivot, chosen, pivot_rows, &least, ws, lane, n, k0};
  __syncthreads();  // row_column's reset and least before the first pivot is recorded
  for (int s = 0; s < w; ++s) {
    const int buffer = s & 1;
    if (warp == s / Columns) {
      if (s % Columns == 0)
        panel.template search<0>(s);
      else if constexpr (Columns == 2)
        panel.template search<1>(s);
    }
    __syncthreads();
    const int r = chosen[buffer];
    const double2 pivot = inverse_pivot[buffer];
    if (r % 32 == lane) unavailable |= 1u << (r / 32);
    if (first_column >= w) continue;  // the warp holds no column of this panel
    // The pivot row's values of the warp's columns, from the lane holding row r (r / 32 is the same in every
    // lane: a uniform switch, not a select per register), scaled by 1/p.
    double2 line[Columns];
    if (lane == r % 32) copy_row<Rows, Columns>(v, r / 32, line, true);
#pragma unroll
    for (int j = 0; j < Columns; ++j) {
      const double2 at_r{__shfl_sync(~0u, line[j].x, r % 32), __shfl_sync(~0u, line[j].y, r % 32)};
      line[j] = first_column + j == s ? pivot : times(at_r, pivot);
    }
    // Every row as if it were not the pivot's (rows past n too: their values are never stored), then the pivot
    // row's values set: a_ic ← a_ic − m_i·line_c, column s's slot taking −m_i·line_s (its old values zeroed
    // first). One shared load of m_i serves both columns; no per-row branch, which kept the loads from being
    // issued ahead.
#pragma unroll
    for (int j = 0; j < Columns; ++j)
      if (first_column + j == s)
#pragma unroll
        for (int k = 0; k < Rows; ++k) v[j][k] = {0, 0};
#pragma unroll
    for (int k = 0; k < Rows; ++k) {
      const double2 m = multiplier[buffer][lane + 32 * k];
#pragma unroll
      for (int j = 0; j < Columns; ++j)
        v[j][k] = {fma(m.y, line[j].y, fma(-m.x, line[j].x, v[j][k].x)),
                   fma(-m.y, line[j].x, fma(-m.x, line[j].y, v[j][k].y))};
    }
    if (lane == r % 32) copy_row<Rows, Columns>(v, r / 32, line, false);
  }
  __syncthreads();  // the last step's pivot recorded
#pragma unroll
  for (int k = 0; k < Rows; ++k)
#pragma unroll
    for (int j = 0; j < Columns; ++j) {
      const int i = lane + 32 * k, c = first_column + j;
      if (i < n && c < w) a[std::size_t(k0 + c) * n + i] = v[j][k];
    }
  // The pivot rows' values of the other columns.
#pragma unroll 4
  for (int e = threadIdx.x; e < n * w; e += blockDim.x) {
    const int s = e % w, j = e / w;
    if (j < k0 || j >= k0 + w) ws.gathered[e] = a[std::size_t(j) * n + pivot_rows[s]];
  }
  if (threadIdx.x == 0) *smallest[blockIdx.x] = least;
}

/// The signature of the panel kernels.
using PanelKernel = void (*)(double2* const*, double* const*, unsigned char*, std::size_t, int, int, int);

/// The register kernels' shapes: rows per lane and columns per warp (the panel is panel_warps · columns wide).
/// Two columns share each multiplier read where both fit 128 registers a thread beside the kernel's own (probed
/// with -Xptxas -v: no spills up to 8 rows with two columns, 16 with one; 10 rows with two spilled); rows in
/// steps of one or two, since the rows past n cost as much as the others.
struct RegisterShape {
  int rows, columns;
  PanelKernel kernel;
};
template <int Rows, int Columns>
constexpr RegisterShape shape_of() {
  return {Rows, Columns, &eliminate_panel_in_registers<Rows, Columns>};
}
constexpr RegisterShape register_shapes[] = {shape_of<1, 2>(),  shape_of<2, 2>(),  shape_of<3, 2>(),  shape_of<4, 2>(),
                                             shape_of<5, 2>(),  shape_of<6, 2>(),  shape_of<7, 2>(),  shape_of<8, 2>(),
                                             shape_of<10, 1>(), shape_of<12, 1>(), shape_of<14, 1>(), shape_of<16, 1>()};

/// The shape serving n×n matrices; rows 0 where n is too large for registers (then eliminate_panel).
RegisterShape register_shape(int n) {
  for (const RegisterShape& shape : register_shapes)
    if (n <= 32 * shape.rows) return shape;
  return {0, 0, nullptr};
}

/// The rank-w update of the columns outside the panel [k0, k0 + w), tile (blockIdx.x: 64 rows, blockIdx.y:
/// 32 columns) of matrix blockIdx.z.
__global__ void __launch_bounds__(apply_threads)
    apply_panel(double2* const* matrices, unsigned char* workspace, std::size_t per_matrix, int n, int k0, int w) {
  __shared__ double2 panel[widest_panel][tile_rows], gathered[widest_panel][tile_columns];
  double2* a = matrices[blockIdx.z];
  const Workspace ws = workspace_of(workspace, n, per_matrix, int(blockIdx.z));
  const int row0 = int(blockIdx.x) * tile_rows, column0 = int(blockIdx.y) * tile_columns;
  if (column0 >= k0 && column0 + tile_columns <= k0 + w) return;  // the tile is the panel's
  for (int e = threadIdx.x; e < w * tile_rows; e += apply_threads) {
    const int s = e / tile_rows, i = row0 + e % tile_rows;
    panel[s][e % tile_rows] = i < n ? a[std::size_t(k0 + s) * n + i] : double2{0, 0};
  }
  for (int e = threadIdx.x; e < w * tile_columns; e += apply_threads) {
    const int s = e % w, j = column0 + e / w;
    gathered[s][e / w] = j < n ? ws.gathered[std::size_t(j) * w + s] : double2{0, 0};
  }
  const int lane = threadIdx.x % 32, quad = threadIdx.x / 32;  // rows lane, lane + 32; columns 4·quad …
  double2 old[2][4];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = row0 + lane + 32 * r, j = column0 + 4 * quad + u;
      old[r][u] = i < n && j < n ? a[std::size_t(j) * n + i] : double2{0, 0};
    }
  __syncthreads();
  double2 sum[2][4] = {};
  for (int s = 0; s < w; ++s) {
    const double2 f[2] = {panel[s][lane], panel[s][lane + 32]};
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const double2 g = gathered[s][4 * quad + u];
#pragma unroll
      for (int r = 0; r < 2; ++r)
        sum[r][u] = {sum[r][u].x + f[r].x * g.x - f[r].y * g.y, sum[r][u].y + f[r].x * g.y + f[r].y * g.x};
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + lane + 32 * r;
    if (i >= n) continue;
    const bool pivots_here = ws.row_column[i] >= k0;  // rows of later panels are still −1
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int j = column0 + 4 * quad + u;
      if (j >= n || (j >= k0 && j < k0 + w)) continue;
      a[std::size_t(j) * n + i] =
          pivots_here ? sum[r][u] : double2{old[r][u].x + sum[r][u].x, old[r][u].y + sum[r][u].y};
    }
  }
}

/// inverses[k](row, c) = S(pivot_row[row], row_column[c]); blockIdx.y the matrix.
__global__ void permute(double2* const* matrices, double2* const* inverses, unsigned char* workspace,
                        std::size_t per_matrix, int n) {
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= std::size_t(n) * n) return;
  const Workspace ws = workspace_of(workspace, n, per_matrix, int(blockIdx.y));
  const int row = int(e % n), c = int(e / n);
  inverses[blockIdx.y][e] = matrices[blockIdx.y][std::size_t(ws.row_column[c]) * n + ws.pivot_row[row]];
}

/// Dynamic shared memory eliminate_panel may have on the current device: the opt-in maximum less its static
/// arrays.
std::size_t available_shared_bytes() {
  int device = 0, limit = 0;
  GS_CUDA_TRY(cudaGetDevice(&device));
  GS_CUDA_TRY(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attributes{};
  GS_CUDA_TRY(cudaFuncGetAttributes(&attributes, eliminate_panel));
  return std::size_t(limit) - attributes.sharedSizeBytes;
}

/// The panel width for n×n matrices with `available` bytes of dynamic shared memory per block.
int panel_width(int n, std::size_t available) {
  GS_EXPECTS(n >= 1, "invert_batched: matrices of at least 1 × 1");
  GS_EXPECTS(panel_bytes(n, 1) <= available,
             "invert_batched: " + std::to_string(n) + " × " + std::to_string(n) + " matrices need " +
                 std::to_string(panel_bytes(n, 1)) + " bytes of shared memory per block, the device allows " +
                 std::to_string(available));
  int width = 1;
  while (width < widest_panel && panel_bytes(n, width + 1) <= available) ++width;
  return width;
}

}  // namespace

int inverse_panel_width(int n) {
  const RegisterShape shape = register_shape(n);
  return shape.rows > 0 ? panel_warps * shape.columns : panel_width(n, available_shared_bytes());
}

std::size_t inverse_workspace_bytes(int n, int count) { return workspace_per_matrix(n) * std::size_t(std::max(count, 0)); }

void invert_batched(std::complex<double>* const* matrices, std::complex<double>* const* inverses,
                    double* const* smallest_pivot, int n, int count, void* workspace, Stream stream) {
  GS_EXPECTS(count >= 0, "invert_batched: a negative count");
  if (count == 0) return;
  const RegisterShape shape = register_shape(n);
  const std::size_t available = shape.rows > 0 ? 0 : available_shared_bytes();
  const int width = shape.rows > 0 ? panel_warps * shape.columns : panel_width(n, available);
  const std::size_t per_matrix = workspace_per_matrix(n);
  auto* a = reinterpret_cast<double2* const*>(matrices);
  auto* ws = static_cast<unsigned char*>(workspace);
  // The device's maximum, not this call's need: the attribute is the kernel's, shared by every thread
  // calling it, and one needing less must not lower another's limit.
  if (shape.rows == 0)
    GS_CUDA_TRY(cudaFuncSetAttribute(eliminate_panel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(available)));
  const dim3 tiles{unsigned((n + tile_rows - 1) / tile_rows), unsigned((n + tile_columns - 1) / tile_columns),
                   unsigned(count)};
  for (int k0 = 0; k0 < n; k0 += width) {
    const int w = std::min(width, n - k0);
    if (shape.rows == 0)
      eliminate_panel<<<unsigned(count), panel_threads, panel_bytes(n, w), stream>>>(a, smallest_pivot, ws, per_matrix,
                                                                                      n, k0, w);
    else
      shape.kernel<<<unsigned(count), panel_threads, 0, stream>>>(a, smallest_pivot, ws, per_matrix, n, k0, w);
    GS_CUDA_CHECK_LAUNCH();
    if (w < n) {
      apply_panel<<<tiles, apply_threads, 0, stream>>>(a, ws, per_matrix, n, k0, w);
      GS_CUDA_CHECK_LAUNCH();
    }
  }
  const std::size_t elements = std::size_t(n) * n;
  permute<<<dim3{unsigned((elements + 255) / 256), unsigned(count)}, 256, 0, stream>>>(
      a, reinterpret_cast<double2* const*>(inverses), ws, per_matrix, n);
  GS_CUDA_CHECK_LAUNCH();
}

}  // namespace gratingsim::physics
