#pragma once
// Geometries batched (issue #11, physics/solver.hpp's solve(pairs)): the structures of a fit's
// finite-difference Jacobian solved as one batch must give what solving each structure alone gives.
// Shared by the host and the GPU tests.
#include <string>
#include <vector>

#include "physics/materials.hpp"
#include "physics/solver.hpp"
#include "validation/physics/batched_wavelengths.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"

namespace gratingsim::test {

/// Metrology's grating, lengths in nm: a Si trapezoid line (bottom width cd, height, sidewall angle)
/// on an SiO2 film on Si, in air; 6 + 2 slices unless `line_slices` says otherwise.
inline physics::Structure trapezoid_on_film(double cd, double height, double swa_deg, double film, int line_slices = 6) {
  using namespace physics;
  Structure s;
  s.lattice = {400, 0};
  s.superstrate = library_material("air", 1);
  s.substrate = library_material("Si", 1);
  Layer lines;
  lines.thickness = height;
  lines.slices = line_slices;
  lines.background = library_material("air", 1);
  TrapezoidLine line;
  line.bottom_width = cd;
  line.sidewall_angle_deg = swa_deg;
  line.material = library_material("Si", 1);
  lines.shapes = {line};
  Layer oxide;
  oxide.thickness = film;
  oxide.slices = 2;
  oxide.background = library_material("SiO2", 1);
  s.layers = {lines, oxide};
  return s;
}

/// A Jacobian's structures and one more: the start point, a width, height, sidewall and film change
/// (the height and film changes move the z-grid, not the slice count), the start rotated by 20° (solved
/// in its own frame, batched with the others), and the start with 7 line slices instead of 6 (a batch
/// of its own).
inline std::vector<physics::Structure> jacobian_structures() {
  std::vector<physics::Structure> s{trapezoid_on_film(120, 150, 86, 40), trapezoid_on_film(120.6, 150, 86, 40),
                                    trapezoid_on_film(120, 151.3, 86, 40), trapezoid_on_film(120, 150, 85.2, 40),
                                    trapezoid_on_film(120, 150, 86, 41.1), trapezoid_on_film(120, 150, 86, 40),
                                    trapezoid_on_film(120, 150, 86, 40, 7)};
  s[5].lattice.rotation_deg = 20;
  return s;
}

/// A crossed grating's structures: crossed() with the ellipse's x semi-axis, then the pattern layer's
/// thickness changed.
inline std::vector<physics::Structure> crossed_structures() {
  std::vector<physics::Structure> s(3, dispersive_crossed(3));
  std::get<physics::Ellipse>(s[1].layers[0].shapes[0]).semi_axis_x += 0.013;
  s[2].layers[0].thickness += 0.021;
  return s;
}

/// Every structure solved alone and all of them in one call of solve(pairs) that batches every
/// member it may (max_wavelengths_per_batch large), in `o`'s backend, precision and formulation at
/// two wavelengths × two angles; check_same_results(tol) per structure. With keep_fields the fields
/// and their z-grids too (each structure's own grid).
inline void check_geometries_batched(const std::vector<physics::Structure>& structures,
                                     const std::vector<physics::Incidence>& incidences, physics::SolverOptions o,
                                     double tol) {
  using namespace physics;
  std::vector<SolveResult> alone;
  o.max_wavelengths_per_batch = 1;
  for (const Structure& s : structures) alone.push_back(solve(s, incidences, o));
  std::vector<StructureIncidences> pairs;
  for (const Structure& s : structures) pairs.push_back({s, incidences});
  o.max_wavelengths_per_batch = 100;
  const std::vector<SolveResult> batched = solve(pairs, o);
  REQUIRE(batched.size() == structures.size());
  for (std::size_t k = 0; k < structures.size(); ++k) {
    INFO("structure " << k);
    check_same_results(batched[k], alone[k], tol);
    if (!o.keep_fields) continue;
    for (std::size_t i = 0; i < incidences.size(); ++i) {
      REQUIRE(batched[k].incidences[i].fields);
      CHECK(batched[k].incidences[i].fields->z == alone[k].incidences[i].fields->z);
      CHECK(batched[k].incidences[i].fields->harmonics == alone[k].incidences[i].fields->harmonics);
    }
  }
}

/// check_geometries_batched on the trapezoid lines (1D) and the crossed grating (2D) in `formulation`,
/// `backend`, `precision`, where the backend serves it.
inline void check_geometry_cases(physics::Formulation formulation, conv::Backend backend, Precision precision,
                                 double tol) {
  using namespace physics;
  SolverOptions o;
  o.formulation = formulation;
  o.backend = backend;
  o.precision = precision;
  o.tolerance = precision == Precision::single ? 1e-5 : 1e-10;
  if (serves(backend, precision, formulation, true)) {
    o.m1 = 6;
    INFO("trapezoid lines");
    check_geometries_batched(jacobian_structures(), {{633, 65, 0}, {633, 40, 30}, {500, 65, 0}, {500, 40, 30}}, o, tol);
  }
  if (serves(backend, precision, formulation, false)) {
    o.m1 = o.m2 = 2;
    INFO("crossed");
    check_geometries_batched(crossed_structures(), {{0.93, 0, 0}, {0.93, 25, 35}, {1.05, 0, 0}, {1.05, 25, 35}}, o,
                             tol);
  }
}

}  // namespace gratingsim::test
