#pragma once
// The device's complex storage type per precision, for .cu files only (CUDA's vector types).
#include <vector_types.h>

#include <type_traits>

namespace gratingsim {

/// float2 / double2: the layout of std::complex<Real> (and of cufftComplex / cufftDoubleComplex) on the
/// device, .x the real part, .y the imaginary part.
template <class Real>
using Complex2 = std::conditional_t<std::is_same_v<Real, float>, float2, double2>;

}  // namespace gratingsim
