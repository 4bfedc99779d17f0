#pragma once
// A sweep point's result as bytes and back, for sending it between the processes of a distributed
// run, and the byte primitives it is made of (for the rest of such messages). The bytes are for
// this build on this kind of machine (native byte order, no versioning): both ends are the same
// executable. Every value travels bitwise, NaNs included.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "io/results.hpp"

namespace gratingsim::io {

/// Appends a trivially copyable value, bitwise.
template <class T>
void put_value(const T& value, std::vector<std::byte>& bytes) {
  static_assert(std::is_trivially_copyable_v<T>);
  const std::size_t at = bytes.size();
  bytes.resize(at + sizeof(T));
  std::memcpy(bytes.data() + at, &value, sizeof(T));
}

/// Appends a 64-bit element count, then the elements bitwise.
template <class T>
void put_vector(std::span<const T> values, std::vector<std::byte>& bytes) {
  static_assert(std::is_trivially_copyable_v<T>);
  put_value(std::uint64_t(values.size()), bytes);
  const std::size_t at = bytes.size();
  bytes.resize(at + values.size_bytes());
  if (!values.empty()) std::memcpy(bytes.data() + at, values.data(), values.size_bytes());
}
template <class T>
void put_vector(const std::vector<T>& values, std::vector<std::byte>& bytes) {
  put_vector(std::span<const T>(values), bytes);
}

/// Reads what put_value and put_vector wrote, from `offset` on, advancing it. InvalidArgument when
/// the bytes end early or a count is impossible.
class ByteReader {
 public:
  ByteReader(std::span<const std::byte> bytes, std::size_t& offset) : bytes_(bytes), offset_(offset) {}

  template <class T>
  T value() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }

  template <class T>
  std::vector<T> vector() {
    const auto count = value<std::uint64_t>();
    GS_EXPECTS(count <= (bytes_.size() - offset_) / sizeof(T),
            "encoded bytes: a vector of " + std::to_string(count) + " elements runs past the end");
    std::vector<T> v(count);
    if (count) std::memcpy(v.data(), take(count * sizeof(T)), count * sizeof(T));
    return v;
  }

  /// A string written as put_vector of its characters.
  std::string text() {
    const std::vector<char> chars = vector<char>();
    return {chars.begin(), chars.end()};
  }

 private:
  const std::byte* take(std::size_t n) {
    GS_EXPECTS(offset_ <= bytes_.size() && n <= bytes_.size() - offset_, "encoded bytes end early");
    const std::byte* p = bytes_.data() + offset_;
    offset_ += n;
    return p;
  }

  std::span<const std::byte> bytes_;
  std::size_t& offset_;
};

/// Appends the encoding of `result` to `bytes`.
void encode_point(const PointResult& result, std::vector<std::byte>& bytes);

/// Decodes one point starting at bytes[offset] and advances offset past it. InvalidArgument when
/// the bytes end early or a length is impossible.
PointResult decode_point(std::span<const std::byte> bytes, std::size_t& offset);

}  // namespace gratingsim::io
