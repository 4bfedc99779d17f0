#pragma once
// The words every library shares: the working precision of a computation, where its buffers live, and
// the CUDA stream its device work is enqueued on. Kept here, below convolution/, physics/ and io/, so
// that none of them borrows another's vocabulary.
#include <string_view>
#include <type_traits>

struct CUstream_st;  // so that no interface needs a CUDA header

namespace gratingsim {

/// A CUDA stream (cudaStream_t); nullptr is the legacy default stream. Ignored by host code.
using Stream = CUstream_st*;

/// The working precision: complex64 (single) or complex128 (double_). Double is always available.
enum class Precision { single, double_ };
std::string_view to_string(Precision precision);  ///< "single" / "double"
/// Parses "single" or "double"; throws InvalidArgument otherwise.
Precision parse_precision(std::string_view name);

template <class Real>
constexpr Precision precision_of() {
  static_assert(std::is_same_v<Real, float> || std::is_same_v<Real, double>);
  return std::is_same_v<Real, float> ? Precision::single : Precision::double_;
}

/// Where a computation expects its buffers.
enum class Memory { host, device };

}  // namespace gratingsim
