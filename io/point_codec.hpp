#pragma once
// A sweep point's result as bytes and back, for sending it between the processes of a distributed
// run. The bytes are for this build on this kind of machine (native byte order, no versioning):
// both ends are the same executable. Every value travels bitwise, NaNs included.
#include <cstddef>
#include <span>
#include <vector>

#include "io/results.hpp"

namespace gratingsim::io {

/// Appends the encoding of `result` to `bytes`.
void encode_point(const PointResult& result, std::vector<std::byte>& bytes);

/// Decodes one point starting at bytes[offset] and advances offset past it. InvalidArgument when
/// the bytes end early or a length is impossible.
PointResult decode_point(std::span<const std::byte> bytes, std::size_t& offset);

}  // namespace gratingsim::io
