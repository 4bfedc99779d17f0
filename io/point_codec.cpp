#include "io/point_codec.hpp"

namespace gratingsim::io {

// Layout: the fields in declaration order, vectors by put_vector, scalars by put_value; field maps
// as a count of maps, then each map as a vector.

void encode_point(const PointResult& r, std::vector<std::byte>& bytes) {
  put_vector(r.reflectance, bytes);
  put_vector(r.transmittance, bytes);
  put_vector(r.jones_r, bytes);
  put_vector(r.jones_t, bytes);
  put_vector(r.reflected_direction, bytes);
  put_vector(r.transmitted_direction, bytes);
  put_value(r.psi_deg, bytes);
  put_value(r.delta_deg, bytes);
  put_value(r.mueller, bytes);
  put_vector(r.absorption, bytes);
  put_vector(r.energy_balance_error, bytes);
  put_vector(r.iterations, bytes);
  put_vector(r.matvecs, bytes);
  put_vector(r.residual, bytes);
  put_vector(r.converged, bytes);
  put_value(r.solve_seconds, bytes);
  put_value(r.phase_seconds, bytes);
  put_vector(r.field_harmonics, bytes);
  put_value(std::uint64_t(r.field_maps.size()), bytes);
  for (const auto& map : r.field_maps) put_vector(map, bytes);
  put_value(r.used_harmonics, bytes);
  put_value(r.used_slices, bytes);
  put_value(r.estimated_error, bytes);
  put_value(r.psi_change_deg, bytes);
  put_value(r.delta_change_deg, bytes);
  put_value(r.target_reached, bytes);
}

PointResult decode_point(std::span<const std::byte> bytes, std::size_t& offset) {
  ByteReader in(bytes, offset);
  PointResult r;
  r.reflectance = in.vector<double>();
  r.transmittance = in.vector<double>();
  r.jones_r = in.vector<std::complex<double>>();
  r.jones_t = in.vector<std::complex<double>>();
  r.reflected_direction = in.vector<double>();
  r.transmitted_direction = in.vector<double>();
  r.psi_deg = in.value<double>();
  r.delta_deg = in.value<double>();
  r.mueller = in.value<std::array<double, 16>>();
  r.absorption = in.vector<double>();
  r.energy_balance_error = in.vector<double>();
  r.iterations = in.vector<std::int32_t>();
  r.matvecs = in.vector<std::int32_t>();
  r.residual = in.vector<double>();
  r.converged = in.vector<std::uint8_t>();
  r.solve_seconds = in.value<double>();
  r.phase_seconds = in.value<decltype(r.phase_seconds)>();
  r.field_harmonics = in.vector<std::complex<double>>();
  const auto maps = in.value<std::uint64_t>();
  GS_EXPECTS(maps <= bytes.size(), "encoded point: impossible field-map count " + std::to_string(maps));
  for (std::uint64_t k = 0; k < maps; ++k) r.field_maps.push_back(in.vector<std::complex<double>>());
  r.used_harmonics = in.value<std::array<std::int32_t, 2>>();
  r.used_slices = in.value<std::int32_t>();
  r.estimated_error = in.value<double>();
  r.psi_change_deg = in.value<double>();
  r.delta_change_deg = in.value<double>();
  r.target_reached = in.value<std::uint8_t>();
  return r;
}

}  // namespace gratingsim::io
