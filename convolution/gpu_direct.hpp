#pragma once
// Internal: the shape-dependent choices of gpu-direct, exposed so that its tests cover every form and
// tile on every shape, and so that the crossover study can time them one by one.
#include "convolution/backends.hpp"

namespace gratingsim::conv::detail {

/// The largest N1·N2 gpu-direct serves (N = 31 square). Beyond it the O(N1²N2²) sum loses to the FFT
/// route by a growing factor (N = 63: about 16× the arithmetic of N = 31 per field).
inline constexpr int gpu_direct_max_field_size = 31 * 31;

enum class DirectForm {
  /// One field at a time: each thread keeps R consecutive outputs of a row and a sliding window of R
  /// kernel coefficients in registers (the Toeplitz structure along axis 2).
  direct_sum,
  /// The block-Toeplitz matrix of χ_p (built on the fly from χ_p in shared memory) times the
  /// N1N2 × per_slice matrix of the fields that share it; each thread keeps TM outputs × 4 fields.
  toeplitz_product,
};

struct DirectTiling {
  DirectForm form = DirectForm::direct_sum;
  int outputs_per_thread = 1;  ///< direct sum: R ∈ {1, 2, 4, 8}; Toeplitz product: TM ∈ {1, 2, 4}
};

/// The rule gpu-direct uses for a shape on the current device (documented in gpu_direct.cu).
DirectTiling choose_direct_tiling(const Problem& geometry);

/// gpu-direct with a given form and tile (make_gpu_direct uses choose_direct_tiling). Throws
/// Unsupported where N1·N2 > gpu_direct_max_field_size or the shared memory does not fit, and
/// InvalidArgument for a tile outside the lists above.
template <class Real>
Plan<Real> make_gpu_direct(const Problem& geometry, Kernels kernels, DirectTiling tiling);

}  // namespace gratingsim::conv::detail
