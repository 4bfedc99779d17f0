#pragma once
// Batched inversion of dense complex128 matrices on the device, the same arithmetic for a matrix
// whatever else is in its batch (the sweep preconditioner's N_p⁻¹, docs/solver.md §6.3). Declared only in
// CUDA builds; no CUDA header here (device_inverse.cu defines it).
#include "core/config.hpp"

#if GRATINGSIM_HAVE_CUDA
#include <complex>
#include <cstddef>

#include "core/vocabulary.hpp"

namespace gratingsim::physics {

/// inverses[k] ← matrices[k]⁻¹ for k < count: n×n complex128 matrices, column-major, leading dimension n,
/// by Gauss–Jordan elimination with partial pivoting (the pivot of column c the remaining row of largest
/// |re| + |im|, ties to the lower row: LAPACK's izamax, the same pivots as its getrf), blocked: a panel of
/// `inverse_panel_width(n)` columns is eliminated by one thread block per matrix (the panel in its registers
/// for n ≤ 512, in shared memory beyond), then
/// applied to the other columns as one rank-width update by a block per 64 × 32 tile, so one matrix alone
/// uses the device. Each element's arithmetic depends on n and the device's shared memory only: a matrix's
/// inverse is the same bits in any batch, at any position (cuBLAS's getrfBatched and gemmBatched change in
/// the last bits with the batch count; cuSOLVER's one-matrix getrf is latency-bound, 0.68 ms at n = 242
/// on an H100, and cannot serve several matrices at once).
/// matrices[k] is overwritten (scratch). smallest_pivot[k] ← min |pivot| (0 where a pivot is not finite):
/// compare it with the largest element to call a matrix singular (a pivot exactly 0 leaves non-finite
/// values in inverses[k]). `workspace`: inverse_workspace_bytes(n, count) bytes of device memory. Every
/// pointer, and the pointer arrays, in device memory. 2·n/width + 1 launches on `stream`, asynchronous.
/// Throws InvalidArgument where n exceeds what shared memory holds (about 6000 on an H100).
void invert_batched(std::complex<double>* const* matrices, std::complex<double>* const* inverses,
                    double* const* smallest_pivot, int n, int count, void* workspace, Stream stream);

/// The device memory invert_batched needs for `count` n×n matrices: 2n ints and 32n complex128 per matrix.
std::size_t inverse_workspace_bytes(int n, int count);

/// The panel width invert_batched uses for n×n matrices on the current device (≤ 32; fewer columns
/// where n of them do not fit in a block's shared memory).
int inverse_panel_width(int n);

}  // namespace gratingsim::physics
#endif
