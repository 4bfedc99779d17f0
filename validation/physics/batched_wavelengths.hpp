#pragma once
// Wavelengths batched (issue #10, physics/problem.hpp): a solve of several wavelengths in one problem
// must give what solving each wavelength alone gives. Shared by the host and the GPU solver tests.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "physics/materials.hpp"
#include "physics/solver.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"

namespace gratingsim::test {

/// Si lines on SiO2 in air, lengths in nm (library materials: both dispersive, Si absorbing).
inline physics::Structure silicon_lines() {
  using namespace physics;
  Structure s;
  s.lattice = {500, 0};
  s.superstrate = library_material("air", 1);
  s.substrate = library_material("SiO2", 1);
  Layer l;
  l.thickness = 150;
  l.slices = 6;
  l.background = library_material("air", 1);
  Rectangle line;
  line.width_x = 200;
  line.material = library_material("Si", 1);
  l.shapes = {line};
  s.layers = {l};
  return s;
}

/// crossed() with dispersive media, lengths in µm: the ellipse of Si3N4 and the superstrate SiO2 (so
/// that k1 = 2π n1(λ)/λ is not 2π/λ).
inline physics::Structure dispersive_crossed(int slices) {
  using namespace physics;
  Structure s = crossed(slices);
  s.superstrate = library_material("SiO2", 1000);
  std::get<Ellipse>(s.layers[0].shapes[0]).material = library_material("Si3N4", 1000);
  return s;
}

/// A case: a structure, its harmonics and a sweep's incidences (every wavelength with the same θ, φ).
struct BatchCase {
  const char* name;
  physics::Structure structure;
  int m1, m2;
  std::vector<double> wavelengths;
  std::vector<std::array<double, 2>> angles;  // θ, φ in degrees
  physics::Preconditioning preconditioner = physics::Preconditioning::automatic;
  [[nodiscard]] std::vector<physics::Incidence> incidences() const {
    std::vector<physics::Incidence> out;
    for (double wavelength : wavelengths)
      for (const auto& [theta, phi] : angles) out.push_back({wavelength, theta, phi});
    return out;
  }
};

inline std::vector<BatchCase> batch_cases() {
  return {{"Si lines (1D, nm)", silicon_lines(), 5, 0, {700, 633, 900, 810}, {{10, 0}, {40, 30}}},
          {"dispersive crossed (2D, µm)", dispersive_crossed(3), 2, 2, {0.93, 0.85, 1.05}, {{0, 0}, {25, 35}}},
          // The sweep's set-up inverts every member's slice matrices in one batch on the device (device_inverse.hpp).
          {"Si lines with the sweep (1D, nm)", silicon_lines(), 7, 0, {633, 700, 810, 900}, {{40, 30}, {10, 0}},
           physics::Preconditioning::sweep}};
}

template <class T>
bool identical(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Every order's R, T and Jones amplitudes of `a` and `b` differ by at most `tol` (0: equal bit for
/// bit, the solves' iterations and residuals too); the warnings are the same lines.
inline void check_same_results(const physics::SolveResult& a, const physics::SolveResult& b, double tol) {
  using namespace physics;
  REQUIRE(a.incidences.size() == b.incidences.size());
  for (std::size_t i = 0; i < a.incidences.size(); ++i) {
    const IncidenceResult &x = a.incidences[i], &y = b.incidences[i];
    INFO("incidence " << i << ": λ = " << x.incidence.wavelength << ", θ = " << x.incidence.theta_deg);
    REQUIRE(x.incidence.wavelength == y.incidence.wavelength);
    REQUIRE(x.orders.size() == y.orders.size());
    REQUIRE(!x.orders.empty());
    const auto near = [&](Complex u, Complex v) { return tol == 0 ? identical(u, v) : std::abs(u - v) <= tol; };
    const auto near_jones = [&](const Jones& u, const Jones& v) {
      return near(u.s_from_s, v.s_from_s) && near(u.s_from_p, v.s_from_p) && near(u.p_from_s, v.p_from_s) &&
             near(u.p_from_p, v.p_from_p);
    };
    for (std::size_t k = 0; k < x.orders.size(); ++k) {
      const DiffractionOrder &u = x.orders[k], &v = y.orders[k];
      INFO("order (" << u.m1 << ", " << u.m2 << ")");
      REQUIRE((u.m1 == v.m1 && u.m2 == v.m2));
      for (int pol : {s_pol, p_pol}) {
        CHECK(near(u.R[pol], v.R[pol]));
        CHECK(near(u.T[pol], v.T[pol]));
      }
      CHECK(near_jones(u.reflection, v.reflection));
      CHECK(near_jones(u.transmission, v.transmission));
    }
    REQUIRE(x.solves.size() == y.solves.size());
    for (std::size_t run = 0; run < x.solves.size(); ++run)
      for (int pol : {s_pol, p_pol}) {
        CHECK(x.solves[run][pol].converged);
        CHECK(y.solves[run][pol].converged);
        if (tol == 0) {
          CHECK(x.solves[run][pol].iterations == y.solves[run][pol].iterations);
          CHECK(identical(x.solves[run][pol].residual, y.solves[run][pol].residual));
        }
      }
  }
  std::vector<std::string> wa = a.warnings, wb = b.warnings;
  std::sort(wa.begin(), wa.end());
  std::sort(wb.begin(), wb.end());
  CHECK(wa == wb);
}

/// Solves every case's sweep with all wavelengths in one batch and one wavelength per batch, in
/// `formulation`, `backend` and `precision`, and compares them with check_same_results(tol).
inline void check_batched_equals_separate(physics::Formulation formulation, conv::Backend backend,
                                          Precision precision, double tol) {
  using namespace physics;
  for (const BatchCase& c : batch_cases()) {
    INFO(c.name);
    if (!serves(backend, precision, formulation, c.structure.lattice.one_dimensional())) {
      WARN(std::string(conv::to_string(backend)) + " does not serve this formulation here: skipped");
      continue;
    }
    SolverOptions o;
    o.formulation = formulation;
    o.backend = backend;
    o.precision = precision;
    o.m1 = c.m1;
    o.m2 = c.m2;
    o.preconditioner = c.preconditioner;
    o.tolerance = precision == Precision::single ? 1e-5 : 1e-10;
    o.max_wavelengths_per_batch = 1;
    const SolveResult separate = solve(c.structure, c.incidences(), o);
    o.max_wavelengths_per_batch = int(c.wavelengths.size());  // all in one problem
    const SolveResult batched = solve(c.structure, c.incidences(), o);
    check_same_results(batched, separate, tol);
  }
}

}  // namespace gratingsim::test
