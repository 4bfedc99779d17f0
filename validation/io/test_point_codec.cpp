// The point codec of distributed runs: random points (NaNs included) survive encode → decode
// bitwise, several back to back; truncated bytes are refused, never read past.
#include <cmath>
#include <vector>

#include "io/point_codec.hpp"
#include "validation/io/result_fixtures.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;
using test::random_point;

TEST_CASE("points survive encoding bitwise, back to back", "[io][codec]") {
  io::ResultLayout with_fields = test::full_layout();
  io::ResultLayout plain = with_fields;
  plain.fields = false;
  plain.maps.clear();
  plain.polarization = io::Polarization::s;
  plain.accuracy.reset();
  REQUIRE(with_fields.fields);
  REQUIRE(with_fields.accuracy);
  REQUIRE(!with_fields.maps.empty());

  const std::vector<io::PointResult> points{random_point(with_fields), random_point(plain), random_point(with_fields)};
  std::vector<std::byte> bytes;
  for (const auto& p : points) io::encode_point(p, bytes);
  REQUIRE(!bytes.empty());

  std::size_t offset = 0;
  for (const auto& expected : points) {
    io::PointResult decoded = io::decode_point(bytes, offset);
    CHECK(decoded == expected);  // bitwise, NaN directions and timing included
    CHECK(std::isnan(decoded.reflected_direction[0]));
    CHECK(decoded.field_maps.size() == expected.field_maps.size());
  }
  CHECK(offset == bytes.size());
}

TEST_CASE("truncated bytes are refused", "[io][codec]") {
  const io::ResultLayout l = test::full_layout();
  std::vector<std::byte> bytes;
  io::encode_point(random_point(l), bytes);
  for (std::size_t keep : {std::size_t(0), std::size_t(7), bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    INFO("keeping " << keep << " of " << bytes.size() << " bytes");
    const std::vector<std::byte> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(keep));
    std::size_t offset = 0;
    CHECK_THROWS_AS(io::decode_point(cut, offset), InvalidArgument);
  }
}
