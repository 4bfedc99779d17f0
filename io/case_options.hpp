#pragma once
// The choices of a case that a result file records too: the incident polarisations, the planes of
// field maps and accuracy on demand. Their own header so that the result layout (io/results.hpp)
// does not include the case reader's (io/case.hpp), which includes it through io/problem.hpp.
#include <string_view>

namespace gratingsim::io {

enum class Polarization { s, p, both };

constexpr std::string_view to_string(Polarization polarization) {
  switch (polarization) {
    case Polarization::s:
      return "s";
    case Polarization::p:
      return "p";
    case Polarization::both:
      return "both";
  }
  return "?";
}

/// The plane of a field map: xz (at a y), yz (at an x) or xy (at a z); io/case.hpp's FieldPlane.
enum class PlaneKind { xz, yz, xy };

constexpr std::string_view to_string(PlaneKind kind) {
  switch (kind) {
    case PlaneKind::xz:
      return "xz";
    case PlaneKind::yz:
      return "yz";
    case PlaneKind::xy:
      return "xy";
  }
  return "?";
}

/// Accuracy on demand (`numerics.harmonics: auto`, `numerics.slices: auto`, io/SCHEMA.md §1.7.1):
/// per sweep point the harmonics, then the slices, are raised along a ladder until two successive
/// rungs give efficiencies (every stored R_m, T_m) that differ by at most the target; the ladder
/// stops at the maxima below, and a point that has not agreed by then is reported unconverged.
struct AccuracyTarget {
  bool harmonics = false;   ///< raise M1 (and M2): ×1.5 per rung, rounded, at least +1
  bool slices = false;      ///< raise the slices: every layer's count doubled per rung
  double target_error = 0;  ///< absolute, on diffraction efficiencies (fractions of the incident power)
  int max_harmonics = 0;    ///< highest M1 (and M2) the ladder tries
  int max_slices = 0;       ///< most slices in all (before Richardson's doubling) the ladder tries
  bool operator==(const AccuracyTarget&) const = default;
};

}  // namespace gratingsim::io
