// Gratings: the 1D lamellar reference (both formulations), energy balance of lossless gratings, and
// the consistency checks of docs/reference-cases.md §4 (1D-in-2D, mirror symmetry, 90° rotation with
// s ↔ p) in the default normal-vector formulation.
#include <cmath>

#include "physics/solver.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

namespace {
IncidenceResult solve_one(const Structure& s, const Incidence& inc, const SolverOptions& o) {
  return solve(s, std::vector<Incidence>{inc}, o).incidences.at(0);
}
}  // namespace

TEST_CASE("1D lamellar reference: s within 5e-4 of converged RCWA at M1 = 20 with extrapolation", "[physics][grating]") {
  SolverOptions o;
  o.formulation = Formulation::laurent;  // the p value below is Laurent's (docs/reference-cases.md §3)
  o.m1 = 20;
  o.richardson = true;  // 10 and 20 slices, as in docs/reference-cases.md §3
  const IncidenceResult r = solve_one(test::lamellar(10), {1.0, 10, 0}, o);
  const DiffractionOrder* zero = test::find_order(r, 0, 0);
  REQUIRE(zero != nullptr);
  // docs/reference-cases.md §3, converged RCWA (Li's rules, 161 orders): s: R0 = 0.004755, T0 = 0.098122,
  // ΣR = 0.060816, ΣT = 0.939184.
  CHECK(std::abs(zero->R[s_pol] - 0.004755) < 5e-4);
  CHECK(std::abs(zero->T[s_pol] - 0.098122) < 5e-4);
  CHECK(std::abs(r.total_R[s_pol] - 0.060816) < 5e-4);
  CHECK(std::abs(r.total_T[s_pol] - 0.939184) < 5e-4);
  // docs/reference-cases.md §3: "The spectral VIE with M1 = 20 and 10/20 slices, Richardson-extrapolated in z, gives
  // s-T0 = 0.09802 (RCWA at the same 41 orders: 0.098024)".
  CHECK(std::abs(zero->T[s_pol] - 0.09802) < 2e-5);
  // docs/reference-cases.md §3: "In p, Laurent's rule converges slowly: T0 ≈ 0.066 at M1 = 20".
  CHECK(std::abs(zero->T[p_pol] - 0.066) < 1e-3);
  CHECK(r.energy_balance_error[s_pol] < 5e-5);
  CHECK(r.energy_balance_error[p_pol] < 5e-5);
}

TEST_CASE("1D lamellar reference: p-polarised T0 moves toward 0.062423 as M1 grows", "[physics][grating]") {
  SolverOptions o;
  o.richardson = true;
  double previous_error = 1;
  for (int m1 : {5, 10, 20}) {
    o.m1 = m1;
    const IncidenceResult r = solve_one(test::lamellar(10), {1.0, 10, 0}, o);
    const double t0 = test::find_order(r, 0, 0)->T[p_pol];
    const double error = std::abs(t0 - 0.062423);  // docs/reference-cases.md §3, p: T0 = 0.062423 (converged RCWA)
    INFO("M1 = " << m1 << ": p-T0 = " << t0 << ", distance to the converged value " << error);
    CHECK(error < previous_error);
    previous_error = error;
  }
}

TEST_CASE("energy balance of lossless gratings falls as Δz²", "[physics][grating]") {
  // The truncated system conserves energy exactly (only the z-discretisation breaks the balance) when
  // the truncated source operator is Hermitian for real ε: Laurent's Toeplitz [[χ]] always; the
  // normal-vector one in 1D, where J_x = [[1 − ε1/ε]] [[ε1/ε]]⁻¹ E_x = ([[ε1/ε]]⁻¹ − 1) E_x. In 2D
  // the truncated products [[C]][[M]]⁻¹ do not commute into a Hermitian form, so the normal-vector
  // balance error there also has a truncation part (tested against M in the next test case).
  struct Case {
    const char* name;
    Structure (*make)(int);
    Incidence incidence;
    int m1, m2, slices;
    double bound;  // at `slices`; docs/formulation.md §9: about 2e-3 at 10 slices per 0.5 λ
    Formulation formulation;
  };
  const Case cases[] = {
      {"1D, oblique", test::lamellar, {1.0, 10, 0}, 10, 0, 10, 3e-3, Formulation::normal_vector},
      {"1D, conical", test::lamellar, {1.0, 25, 40}, 10, 0, 10, 3e-3, Formulation::normal_vector},
      {"1D, oblique", test::lamellar, {1.0, 10, 0}, 10, 0, 10, 3e-3, Formulation::laurent},
      {"crossed, oblique", test::crossed, {1.0, 30, 0}, 2, 2, 4, 5e-3, Formulation::laurent},
      {"crossed, conical", test::crossed, {1.0, 25, 35}, 2, 2, 4, 5e-3, Formulation::laurent},
  };
  for (const Case& c : cases) {
    INFO(to_string(c.formulation));
    SolverOptions o;
    o.formulation = c.formulation;
    o.m1 = c.m1;
    o.m2 = c.m2;
    const IncidenceResult coarse = solve_one(c.make(c.slices), c.incidence, o);
    const IncidenceResult fine = solve_one(c.make(2 * c.slices), c.incidence, o);
    REQUIRE(coarse.lossless);
    for (int pol : {s_pol, p_pol}) {
      INFO(c.name << (pol == s_pol ? ", s" : ", p") << ": |1 − ΣR − ΣT| = " << coarse.energy_balance_error[pol]
                  << " at " << c.slices << " slices, " << fine.energy_balance_error[pol] << " at " << 2 * c.slices);
      CHECK(coarse.energy_balance_error[pol] < c.bound);
      CHECK(coarse.energy_balance_error[pol] / fine.energy_balance_error[pol] > 3.0);  // ≈ 4 for O(Δz²)
      CHECK(coarse.total_R[pol] > 0.001);  // a real grating, not a trivial case
      CHECK(coarse.orders.size() > 3);
    }
  }
}

TEST_CASE("a 1D grating computed on a 2D lattice equals the M2 = 0 result", "[physics][grating][consistency]") {
  SolverOptions o1;
  o1.m1 = 8;
  SolverOptions o2 = o1;
  o2.m2 = 2;
  Structure s2 = test::lamellar(6);
  s2.lattice.period_y = 0.7;
  std::get<Rectangle>(s2.layers[0].shapes[0]).width_y = 0.7;  // uniform in y: spans the period
  for (const Incidence inc : {Incidence{1.0, 10, 0}, Incidence{1.0, 20, 35}}) {
    INFO("θ = " << inc.theta_deg << ", φ = " << inc.phi_deg);
    const IncidenceResult r1 = solve_one(test::lamellar(6), inc, o1);
    const IncidenceResult r2 = solve_one(s2, inc, o2);
    for (const DiffractionOrder& d : r2.orders) {
      const DiffractionOrder* ref = test::find_order(r1, d.m1, 0);
      for (int pol : {s_pol, p_pol}) {
        if (d.m2 != 0) {  // not excited: only the solver's residual (1e-10 in amplitude) remains
          CHECK(d.R[pol] < 1e-16);
          CHECK(d.T[pol] < 1e-16);
          continue;
        }
        REQUIRE(ref != nullptr);
        CHECK(std::abs(d.R[pol] - ref->R[pol]) < 1e-9);
        CHECK(std::abs(d.T[pol] - ref->T[pol]) < 1e-9);
      }
    }
    for (int pol : {s_pol, p_pol}) CHECK(std::abs(r1.total_R[pol] - r2.total_R[pol]) < 1e-9);
  }
}

TEST_CASE("mirror symmetry in x at normal incidence: R(m1, m2) = R(−m1, m2)", "[physics][grating][consistency]") {
  Structure s = test::crossed(4);
  // Make the pattern symmetric under x → −x: a centred ellipse, a triangle with its apex on x = 0.
  Ellipse e = std::get<Ellipse>(s.layers[0].shapes[0]);
  e.center = {0, -0.1};
  e.rotation_deg = 0;
  Polygon tri;
  tri.vertices = {{-0.4, 0.1}, {0.4, 0.1}, {0.0, 0.45}};
  tri.material = Material::constant_index(1.7);
  s.layers[0].shapes = {e, tri};
  SolverOptions o;
  o.m1 = o.m2 = 2;
  const IncidenceResult r = solve_one(s, {0.6, 0, 0}, o);  // λ = 0.6: several propagating orders
  int pairs = 0;
  for (const DiffractionOrder& d : r.orders) {
    const DiffractionOrder* mirror = test::find_order(r, -d.m1, d.m2);
    REQUIRE(mirror != nullptr);
    for (int pol : {s_pol, p_pol}) {
      CHECK(std::abs(d.R[pol] - mirror->R[pol]) < 1e-9);
      CHECK(std::abs(d.T[pol] - mirror->T[pol]) < 1e-9);
    }
    pairs += d.m1 != 0 && (d.R[0] > 1e-4 || d.T[0] > 1e-4);
  }
  CHECK(pairs >= 4);  // the symmetry is tested on orders that carry power
}

TEST_CASE("rotating the structure by 90° and swapping s and p gives the same efficiencies", "[physics][grating][consistency]") {
  // Original: an L-shaped polygon and a rotated ellipse (no symmetry) on a 1.0 × 0.8 lattice.
  const auto build = [](bool rotated) {
    Structure s;
    s.lattice = rotated ? Lattice{0.8, 1.0} : Lattice{1.0, 0.8};
    s.superstrate = Material::constant_index(1.0);
    s.substrate = Material::constant_index(1.45);
    const auto r = [&](Point p) { return rotated ? Point{-p.y, p.x} : p; };  // rotation by +90°
    Layer l;
    l.thickness = 0.2;
    l.slices = 4;
    l.background = Material::constant_index(1.0);
    Polygon L;
    for (Point p : {Point{-0.4, -0.3}, Point{0.2, -0.3}, Point{0.2, -0.15}, Point{-0.2, -0.15}, Point{-0.2, 0.3},
                    Point{-0.4, 0.3}})
      L.vertices.push_back(r(p));
    L.material = Material::constant_index(2.1);
    Ellipse e;
    e.center = r({0.15, 0.15});
    e.semi_axis_x = 0.2;
    e.semi_axis_y = 0.1;
    e.rotation_deg = 30 + (rotated ? 90 : 0);
    e.material = Material::constant_index(1.6);
    l.shapes = {L, e};
    s.layers = {l};
    return s;
  };
  SolverOptions o;
  o.m1 = o.m2 = 2;
  const IncidenceResult a = solve_one(build(false), {0.55, 0, 0}, o);
  const IncidenceResult b = solve_one(build(true), {0.55, 0, 0}, o);
  // Order (m1, m2) with G = 2π(m1/Λx, m2/Λy) maps to R G, i.e. order (−m2, m1) of the rotated lattice;
  // the s field ê = ŷ maps to R ŷ = −x̂ = p̂− of the rotated problem, and p to s.
  for (const DiffractionOrder& d : a.orders) {
    const DiffractionOrder* image = test::find_order(b, -d.m2, d.m1);
    REQUIRE(image != nullptr);
    CHECK(std::abs(d.R[s_pol] - image->R[p_pol]) < 1e-9);
    CHECK(std::abs(d.R[p_pol] - image->R[s_pol]) < 1e-9);
    CHECK(std::abs(d.T[s_pol] - image->T[p_pol]) < 1e-9);
    CHECK(std::abs(d.T[p_pol] - image->T[s_pol]) < 1e-9);
  }
  CHECK(a.orders.size() == b.orders.size());
  CHECK(std::abs(a.total_R[s_pol] - b.total_R[p_pol]) < 1e-9);
  CHECK(std::abs(a.total_R[s_pol] - a.total_R[p_pol]) > 1e-4);  // s and p do differ: the swap is tested
}
