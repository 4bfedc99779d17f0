#pragma once
// The one table of a result file's per-point datasets (io/SCHEMA.md §2.2): for each, its path, the
// PointResult member it holds, its shape after the sweep dimensions, element type, unit and meaning.
// HDF5 creation and binding (results.cpp), the point codec of distributed runs (point_codec.cpp),
// PointResult's equality and the schema test (validation/io/test_result_fields.cpp) all iterate it;
// a new per-point result is one new member and one new row. Vendor-free: no HDF5 type here.
#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "io/results.hpp"

namespace gratingsim::io {

/// Element type of a dataset. Complex values are stored as f64 with a trailing dimension of 2
/// (re, im), the file's `complex_layout` convention; the table's shape leaves that 2 out.
enum class ElementKind { f64, c128, i32, u8 };

/// Which files have the dataset.
enum class Presence {
  always,
  both_polarizations,           ///< polarization: both (P = 2)
  fields,                       ///< output.fields
  each_map,                     ///< output.fields, once per field map K: "map_K" in the path is map_0, map_1, ...
  accuracy,                     ///< accuracy on demand (the `accuracy` group)
  accuracy_both_polarizations,  ///< both of the above
};

/// An extent of the layout (named as in io/SCHEMA.md §2.2), or a fixed one.
enum class Extent {
  fixed,
  polarizations,  ///< P
  orders,         ///< No
  slices,         ///< Nz
  harmonics,      ///< Nm = (2M1+1)(2M2+1)
  map_first,      ///< N1 of map K
  map_second,     ///< N2 of map K
};

/// One dimension after the sweep dimensions [Nw][Nθ][Nφ].
struct Dim {
  Extent extent = Extent::fixed;
  std::size_t size = 0;   ///< the extent when fixed
  std::string_view name;  ///< its dimension scale in the file (io/SCHEMA.md §2.4; io/dimension_scales.cpp)
};

/// A dataset's dimensions after the sweep dimensions, slowest first; rank 0: one value per point.
struct DatasetShape {
  static constexpr std::size_t max_rank = 4;
  std::array<Dim, max_rank> dims{};
  std::size_t rank = 0;
  constexpr DatasetShape() = default;
  constexpr DatasetShape(std::initializer_list<Dim> list) {
    for (const Dim d : list) dims[rank++] = d;
  }
};

namespace dim {
inline constexpr Dim P{Extent::polarizations, 0, "polarization"}, No{Extent::orders, 0, "order"},
    Nz{Extent::slices, 0, "slice_z"}, Nm{Extent::harmonics, 0, "harmonic"}, N1{Extent::map_first, 0, "first"},
    N2{Extent::map_second, 0, "second"};
constexpr Dim fixed(std::size_t n, std::string_view name) { return {Extent::fixed, n, name}; }
}  // namespace dim

/// `fields/map_K/abs_E`: |E| computed from field_maps[K] when writing; not read back (no member).
struct MapMagnitude {};
/// `done`: 1 for every written point, written last; not a member.
struct DoneFlag {};

/// Where a dataset's values live in a PointResult: a member, or one of the two datasets without one.
using FieldSource =
    std::variant<std::vector<double> PointResult::*, std::vector<std::complex<double>> PointResult::*,
                 std::vector<std::int32_t> PointResult::*, std::vector<std::uint8_t> PointResult::*,
                 double PointResult::*, std::int32_t PointResult::*, std::uint8_t PointResult::*,
                 std::array<double, 16> PointResult::*, std::array<double, physics::phase_count> PointResult::*,
                 std::array<std::int32_t, 2> PointResult::*,
                 std::vector<std::vector<std::complex<double>>> PointResult::*,  // field_maps: one vector per map
                 MapMagnitude, DoneFlag>;

/// One per-point dataset.
struct ResultField {
  std::string_view path;    ///< in the file ("map_K": see Presence::each_map)
  std::string_view member;  ///< the PointResult member's name ("" for MapMagnitude, DoneFlag)
  FieldSource source;
  ElementKind kind;
  DatasetShape shape;  ///< after [Nw][Nθ][Nφ]; complex values without their trailing 2
  Presence presence;
  std::string_view unit;  ///< "1": dimensionless (efficiencies, amplitudes per unit incident amplitude, counts, flags)
  std::string_view doc;   ///< one line; io/SCHEMA.md §2.2 says more

  /// Field datasets are chunked one point per chunk, shuffled, gzip-compressed and checksummed; the
  /// others are contiguous and allocated with the file (io/SCHEMA.md §2.2).
  [[nodiscard]] constexpr bool chunked() const {
    return presence == Presence::fields || presence == Presence::each_map;
  }
  [[nodiscard]] constexpr bool has_member() const {
    return !std::holds_alternative<MapMagnitude>(source) && !std::holds_alternative<DoneFlag>(source);
  }
};

/// Every per-point dataset, in the order a file's datasets are created and a point's values
/// written (rows of one map, Presence::each_map, repeat per map); `done` last: its flag is written
/// once the point's other values are on disk.
inline constexpr std::array result_fields = {
    // clang-format off
    ResultField{"results/R", "reflectance", &PointResult::reflectance, ElementKind::f64, {dim::P, dim::No}, Presence::always, "1", "reflection efficiency R_m per incident polarisation and order"},
    ResultField{"results/T", "transmittance", &PointResult::transmittance, ElementKind::f64, {dim::P, dim::No}, Presence::always, "1", "transmission efficiency T_m per incident polarisation and order"},
    ResultField{"results/jones_r", "jones_r", &PointResult::jones_r, ElementKind::c128, {dim::No, dim::fixed(2, "outgoing"), dim::P}, Presence::always, "1", "reflected (s, p) amplitude of each order per unit incident amplitude"},
    ResultField{"results/jones_t", "jones_t", &PointResult::jones_t, ElementKind::c128, {dim::No, dim::fixed(2, "outgoing"), dim::P}, Presence::always, "1", "transmitted (s, p) amplitude of each order per unit incident amplitude"},
    ResultField{"results/reflected_direction", "reflected_direction", &PointResult::reflected_direction, ElementKind::f64, {dim::No, dim::fixed(3, "k_component")}, Presence::always, "1", "unit wavevector (kx, ky, kz) of each reflected order; NaN if evanescent"},
    ResultField{"results/transmitted_direction", "transmitted_direction", &PointResult::transmitted_direction, ElementKind::f64, {dim::No, dim::fixed(3, "k_component")}, Presence::always, "1", "unit wavevector (kx, ky, kz) of each transmitted order; NaN if evanescent"},
    ResultField{"results/absorption", "absorption", &PointResult::absorption, ElementKind::f64, {dim::P}, Presence::always, "1", "1 - sum R - sum T"},
    ResultField{"results/energy_balance_error", "energy_balance_error", &PointResult::energy_balance_error, ElementKind::f64, {dim::P}, Presence::always, "1", "|1 - sum R - sum T| when lossless, else NaN"},
    ResultField{"results/psi_deg", "psi_deg", &PointResult::psi_deg, ElementKind::f64, {}, Presence::both_polarizations, "deg", "ellipsometric Psi of order-0 reflection"},
    ResultField{"results/delta_deg", "delta_deg", &PointResult::delta_deg, ElementKind::f64, {}, Presence::both_polarizations, "deg", "ellipsometric Delta of order-0 reflection"},
    ResultField{"results/mueller", "mueller", &PointResult::mueller, ElementKind::f64, {dim::fixed(4, "stokes_out"), dim::fixed(4, "stokes_in")}, Presence::both_polarizations, "1", "Mueller matrix of order-0 reflection, row-major"},
    ResultField{"solver/iterations", "iterations", &PointResult::iterations, ElementKind::i32, {dim::P}, Presence::always, "1", "Krylov iterations"},
    ResultField{"solver/matvecs", "matvecs", &PointResult::matvecs, ElementKind::i32, {dim::P}, Presence::always, "1", "batched operator applications"},
    ResultField{"solver/residual", "residual", &PointResult::residual, ElementKind::f64, {dim::P}, Presence::always, "1", "largest final relative residual"},
    ResultField{"solver/converged", "converged", &PointResult::converged, ElementKind::u8, {dim::P}, Presence::always, "1", "1 if every solve converged"},
    ResultField{"solver/method", "method", &PointResult::method, ElementKind::u8, {}, Presence::always, "1", "solver method that ran: 1 GMRES, 2 BiCGStab, 3 direct (dense LU), 0 not recorded (attribute `methods`)"},
    ResultField{"solver/seconds", "solve_seconds", &PointResult::solve_seconds, ElementKind::f64, {}, Presence::always, "s", "wall time of the solve of the point's batch"},
    ResultField{"solver/phase_seconds", "phase_seconds", &PointResult::phase_seconds, ElementKind::f64, {dim::fixed(physics::phase_count, "timing_phase")}, Presence::always, "s", "wall time per phase of the point's batch (attribute `phases`)"},
    ResultField{"fields/harmonics", "field_harmonics", &PointResult::field_harmonics, ElementKind::c128, {dim::P, dim::Nz, dim::fixed(3, "field_component"), dim::Nm}, Presence::fields, "1", "harmonics of the total field (Ex, Ey, Ez) at the slice centres"},
    ResultField{"fields/map_K/E", "field_maps", &PointResult::field_maps, ElementKind::c128, {dim::P, dim::fixed(3, "field_component"), dim::N1, dim::N2}, Presence::each_map, "1", "field (Ex, Ey, Ez) on the grid of map K"},
    ResultField{"fields/map_K/abs_E", "", MapMagnitude{}, ElementKind::f64, {dim::P, dim::N1, dim::N2}, Presence::each_map, "1", "|E| on the grid of map K"},
    ResultField{"accuracy/harmonics", "used_harmonics", &PointResult::used_harmonics, ElementKind::i32, {dim::fixed(2, "lattice_axis")}, Presence::accuracy, "1", "(M1, M2) of the point's result"},
    ResultField{"accuracy/slices", "used_slices", &PointResult::used_slices, ElementKind::i32, {}, Presence::accuracy, "1", "slices in all, before Richardson's doubling"},
    ResultField{"accuracy/estimated_error", "estimated_error", &PointResult::estimated_error, ElementKind::f64, {}, Presence::accuracy, "1", "change of the efficiencies between the last rungs"},
    ResultField{"accuracy/reached", "target_reached", &PointResult::target_reached, ElementKind::u8, {}, Presence::accuracy, "1", "1 when the point reached target_error"},
    ResultField{"accuracy/psi_change_deg", "psi_change_deg", &PointResult::psi_change_deg, ElementKind::f64, {}, Presence::accuracy_both_polarizations, "deg", "change of Psi over the last rungs"},
    ResultField{"accuracy/delta_change_deg", "delta_change_deg", &PointResult::delta_change_deg, ElementKind::f64, {}, Presence::accuracy_both_polarizations, "deg", "change of Delta over the last rungs"},
    ResultField{"done", "", DoneFlag{}, ElementKind::u8, {}, Presence::always, "1", "1 once the point is complete (written last)"},
    // clang-format on
};

/// A dataset of one file: a row of result_fields for one layout (and one map, for Presence::each_map).
struct ResultDataset {
  const ResultField* field;
  std::size_t map = 0;                    ///< K, for Presence::each_map
  std::string path;                       ///< "map_K" replaced
  std::vector<std::size_t> tail;          ///< dimensions after [Nw][Nθ][Nφ], complex: with the trailing 2
  [[nodiscard]] std::size_t values() const;  ///< elements of one point: of tail, complex counted once
};

/// The per-point datasets of a file with this layout, in result_fields' order.
std::vector<ResultDataset> result_datasets(const ResultLayout& layout);

/// Bytes of one stored element (f64: 8, complex: 8 per part, i32: 4, u8: 1).
std::size_t stored_element_bytes(ElementKind kind);

}  // namespace gratingsim::io
