#include "io/point_codec.hpp"

#include "io/result_fields.hpp"

namespace gratingsim::io {

// Layout: PointResult's members in the order of io/result_fields.hpp's table; vectors by put_vector,
// scalars and fixed arrays by put_value; field maps as a count of maps, then each map as a vector.

namespace {
using FieldMaps = std::vector<std::vector<std::complex<double>>>;
template <class T>
inline constexpr bool is_vector = false;
template <class T>
inline constexpr bool is_vector<std::vector<T>> = true;
}  // namespace

void encode_point(const PointResult& r, std::vector<std::byte>& bytes) {
  for (const ResultField& f : result_fields)
    std::visit(
        [&](auto member) {
          if constexpr (std::is_member_object_pointer_v<decltype(member)>) {
            const auto& value = r.*member;
            using T = std::remove_cvref_t<decltype(value)>;
            if constexpr (std::is_same_v<T, FieldMaps>) {
              put_value(std::uint64_t(value.size()), bytes);
              for (const auto& map : value) put_vector(map, bytes);
            } else if constexpr (is_vector<T>) {
              put_vector(value, bytes);
            } else {
              put_value(value, bytes);
            }
          }
        },
        f.source);
}

PointResult decode_point(std::span<const std::byte> bytes, std::size_t& offset) {
  ByteReader in(bytes, offset);
  PointResult r;
  for (const ResultField& f : result_fields)
    std::visit(
        [&](auto member) {
          if constexpr (std::is_member_object_pointer_v<decltype(member)>) {
            auto& value = r.*member;
            using T = std::remove_cvref_t<decltype(value)>;
            if constexpr (std::is_same_v<T, FieldMaps>) {
              const auto maps = in.value<std::uint64_t>();
              GS_EXPECTS(maps <= bytes.size(), "encoded point: impossible field-map count " + std::to_string(maps));
              for (std::uint64_t k = 0; k < maps; ++k) value.push_back(in.vector<std::complex<double>>());
            } else if constexpr (is_vector<T>) {
              value = in.vector<typename T::value_type>();
            } else {
              value = in.value<T>();
            }
          }
        },
        f.source);
  return r;
}

}  // namespace gratingsim::io
