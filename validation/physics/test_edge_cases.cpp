// Edge cases and outputs: ellipsometry (Ψ, Δ, Mueller) against Airy, normal incidence, Rayleigh
// anomalies, evanescent orders, absorbing substrates, invalid input, memory limits, z-varying
// shapes and rasters in layers, field output.
#include <cmath>
#include <numbers>
#include <random>

#include "physics/discretisation.hpp"
#include "physics/solver.hpp"
#include "validation/physics/airy.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;
using C = std::complex<double>;

namespace {
constexpr double deg = 180 / std::numbers::pi;

Structure slab(C film, double d, C substrate, int slices) {
  Structure s;
  s.lattice = {1.0, 0.0};
  s.superstrate = Material::constant_index(1.0);
  s.substrate = Material::constant_index(substrate);
  Layer l;
  l.thickness = d;
  l.slices = slices;
  l.background = Material::constant_index(film);
  s.layers = {l};
  return s;
}

IncidenceResult solve_one(const Structure& s, const Incidence& inc, const SolverOptions& o = {}) {
  return solve(s, std::vector<Incidence>{inc}, o).incidences.at(0);
}

double max_difference(const IncidenceResult& a, const IncidenceResult& b) {
  REQUIRE(a.orders.size() == b.orders.size());
  double m = 0;
  for (std::size_t k = 0; k < a.orders.size(); ++k)
    for (int pol : {s_pol, p_pol})
      m = std::max({m, std::abs(a.orders[k].R[pol] - b.orders[k].R[pol]), std::abs(a.orders[k].T[pol] - b.orders[k].T[pol])});
  return m;
}
}  // namespace

TEST_CASE("ellipsometry: Ψ, Δ and the Mueller matrix of a lossy film against Airy", "[physics][edge]") {
  // S3 of docs/reference-cases.md §2: air, film ε = 4 + 1i, d = 0.3, substrate n = 1.5, θ = 30°.
  const C film = std::sqrt(C(4, 1));
  SolverOptions o;
  o.m1 = 0;
  o.richardson = true;
  const IncidenceResult r = solve_one(slab(film, 0.3, 1.5, 20), {1.0, 30, 0}, o);
  const C rho = test::airy_reflection(1.0, {{film, 0.3}}, 1.5, 1.0, 30, true) /
                test::airy_reflection(1.0, {{film, 0.3}}, 1.5, 1.0, 30, false);
  const Ellipsometry& e = r.zeroth_order;
  CHECK(std::abs(e.psi_deg - std::atan(std::abs(rho)) * deg) < 1e-4);
  CHECK(std::abs(e.delta_deg - std::arg(rho) * deg) < 1e-4);
  // Isotropic sample: M/M00 = [[1, −N, 0, 0], [−N, 1, 0, 0], [0, 0, C, S], [0, 0, −S, C]].
  const double psi = e.psi_deg / deg, delta = e.delta_deg / deg;
  const double n = std::cos(2 * psi), c = std::sin(2 * psi) * std::cos(delta), s = std::sin(2 * psi) * std::sin(delta);
  const double expected[4][4] = {{1, -n, 0, 0}, {-n, 1, 0, 0}, {0, 0, c, s}, {0, 0, -s, c}};
  const auto& m = e.mueller;
  // M00 comes from the extrapolated amplitudes, R from the extrapolated efficiencies: O(Δz⁴) apart.
  CHECK(std::abs(m[0][0] - 0.5 * (r.total_R[s_pol] + r.total_R[p_pol])) < 1e-6);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) CHECK(std::abs(m[i][j] / m[0][0] - expected[i][j]) < 1e-9);
  // No cross-polarisation for an isotropic film.
  const Jones& j = r.orders[0].reflection;
  CHECK(std::abs(j.s_from_p) < 1e-12);
  CHECK(std::abs(j.p_from_s) < 1e-12);
}

TEST_CASE("normal incidence: t̂ = (cos φ, sin φ, 0) fixes s and p", "[physics][edge]") {
  SolverOptions o;
  o.m1 = 0;
  // A slab: independent of φ, and r_pp = −r_ss (Δ = 180°, Ψ = 45°).
  const IncidenceResult a = solve_one(slab(2.0, 0.3, 1.5, 10), {1.0, 0, 0}, o);
  const IncidenceResult b = solve_one(slab(2.0, 0.3, 1.5, 10), {1.0, 0, 37}, o);
  CHECK(std::abs(a.total_R[s_pol] - b.total_R[s_pol]) < 1e-12);
  CHECK(std::abs(a.total_R[s_pol] - a.total_R[p_pol]) < 1e-12);
  CHECK(std::abs(std::abs(a.zeroth_order.delta_deg) - 180) < 1e-9);
  CHECK(std::abs(a.zeroth_order.psi_deg - 45) < 1e-9);
  // A 1D grating: at φ = 90° the s field ê = ẑ × ŷ = −x̂ is the TM field of φ = 0.
  o.m1 = 6;
  const IncidenceResult g0 = solve_one(test::lamellar(6), {1.0, 0, 0}, o);
  const IncidenceResult g90 = solve_one(test::lamellar(6), {1.0, 0, 90}, o);
  CHECK(std::abs(g0.total_R[s_pol] - g90.total_R[p_pol]) < 1e-9);
  CHECK(std::abs(g0.total_R[p_pol] - g90.total_R[s_pol]) < 1e-9);
  CHECK(std::abs(g0.total_R[s_pol] - g0.total_R[p_pol]) > 1e-3);
}

TEST_CASE("ellipsometry: −180° < Δ ≤ 180°, r_pp = −r_ss giving +180°", "[physics][edge]") {
  // A ratio r_pp/r_ss on the negative real axis, with Im = −0 (std::arg: −180°) or an imaginary part
  // within rounding of 0 of either sign.
  for (const double im : {-0.0, 0.0, -1e-17, 1e-17, -3e-16, 3e-16, -1e-14, 1e-14}) {
    Jones r;
    r.s_from_s = C(0.3, -0.2);
    r.p_from_p = -r.s_from_s * C(1.0, im);
    INFO("Im " << im);
    CHECK(ellipsometry(r).delta_deg == 180);
  }
  // Just off the axis, both sides keep their sign (no wrap of genuine values).
  Jones r;
  r.s_from_s = 1;
  r.p_from_p = std::polar(1.0, -179.999 / deg);
  CHECK(std::abs(ellipsometry(r).delta_deg + 179.999) < 1e-9);
  r.p_from_p = std::polar(1.0, 179.999 / deg);
  CHECK(std::abs(ellipsometry(r).delta_deg - 179.999) < 1e-9);
  // Normal incidence on films of random thickness and index, every azimuth: Δ = 180° exactly.
  SolverOptions o;
  o.m1 = 0;
  std::mt19937 random(std::random_device{}());
  std::uniform_real_distribution<double> uniform(0, 1);
  for (int trial = 0; trial < 8; ++trial) {
    const double d = 0.05 + uniform(random), n = 1.2 + 2 * uniform(random), phi = 360 * uniform(random) - 180;
    INFO("d " << d << ", n " << n << ", φ " << phi);
    const IncidenceResult a = solve_one(slab(C(n, 0.1 * uniform(random)), d, 1.5, 6), {1.0, 0, phi}, o);
    CHECK(a.zeroth_order.delta_deg > -180);
    CHECK(a.zeroth_order.delta_deg <= 180);
    CHECK(std::abs(a.zeroth_order.delta_deg - 180) < 1e-9);
  }
}

TEST_CASE("orders: only propagating ones are reported, with unit directions", "[physics][edge]") {
  SolverOptions o;
  o.m1 = 6;
  const IncidenceResult r = solve_one(test::lamellar(6), {1.0, 10, 0}, o);
  // λ = 1, Λ = 1.5, θ = 10°: kx/k0 = sin 10° + m/1.5 has modulus < 1 (air) for m = −1, 0, 1 and
  // < 1.5 (substrate) for m = −2, −1, 0, 1; the other 9 of the 13 orders are evanescent on both sides.
  CHECK(r.orders.size() == 4);
  for (const DiffractionOrder& d : r.orders) {
    const double sine = std::sin(10 / deg) + d.m1 / 1.5;
    CHECK(d.reflected == (std::abs(sine) < 1));
    CHECK(d.transmitted == (std::abs(sine) < 1.5));
    if (d.reflected) {
      const auto& k = d.reflected_direction;
      CHECK(std::abs(k[0] * k[0] + k[1] * k[1] + k[2] * k[2] - 1) < 1e-12);
      CHECK(k[2] > 0);
      CHECK(std::abs(k[0] - (std::sin(10 / deg) + d.m1 / 1.5)) < 1e-12);
    } else {
      CHECK(d.R[s_pol] == 0);
    }
    CHECK(d.transmitted_direction[2] < 0);
  }
}

TEST_CASE("a Rayleigh anomaly is perturbed and reported as a warning", "[physics][edge]") {
  SolverOptions o;
  o.m1 = 6;
  // The perturbed kz leaves the complex128 operator a residual floor near 1e-10 (s: GMRES's true residual
  // wanders between 1.1e-10 and 2.2e-10 cycle after cycle in the Debug build, session 18), where the
  // default tolerance would ask for luck and GMRES now stops at the floor (docs/solver.md §4).
  o.tolerance = 1e-9;
  // Λ = 1.5, θ = 0: orders ±1 graze the superstrate at λ = 1.5.
  const SolveResult r = solve(test::lamellar(8), std::vector<Incidence>{{1.5, 0, 0}}, o);
  REQUIRE(r.warnings.size() >= 2);
  CHECK(r.warnings[0].find("Rayleigh anomaly: order (-1, 0)") != std::string::npos);
  const IncidenceResult& a = r.incidences[0];
  for (int pol : {s_pol, p_pol}) {
    CHECK(std::isfinite(a.total_R[pol]));
    CHECK(a.energy_balance_error[pol] < 1e-2);
    CHECK(a.solves[0][pol].converged);
  }
  // Continuity: just off the anomaly the answer is close.
  const IncidenceResult near = solve_one(test::lamellar(8), {1.5 * (1 - 1e-7), 0, 0}, o);
  CHECK(std::abs(near.total_R[s_pol] - a.total_R[s_pol]) < 1e-3);
}

TEST_CASE("an absorbing substrate: no T, absorption includes it", "[physics][edge]") {
  // An SiO2 grating on Si, lengths in nm: library materials with nm_per_unit = 1.
  Structure s;
  s.lattice = {400, 0};
  s.superstrate = library_material("air", 1);
  s.substrate = library_material("Si", 1);
  Layer l;
  l.thickness = 100;
  l.slices = 6;
  l.background = library_material("air", 1);
  Rectangle line;
  line.width_x = 150;
  line.material = library_material("SiO2", 1);
  l.shapes = {line};
  s.layers = {l};
  SolverOptions o;
  o.m1 = 6;
  const SolveResult r = solve(s, std::vector<Incidence>{{633, 20, 0}}, o);
  const IncidenceResult& a = r.incidences[0];
  CHECK_FALSE(a.substrate_lossless);
  CHECK_FALSE(a.lossless);
  for (int pol : {s_pol, p_pol}) {
    CHECK(std::isnan(a.total_T[pol]));
    CHECK(std::isnan(a.energy_balance_error[pol]));
    CHECK(std::abs(a.absorption[pol] - (1 - a.total_R[pol])) < 1e-15);
    CHECK(a.total_R[pol] > 0.2);  // silicon reflects ~35 %
    CHECK(a.total_R[pol] < 0.6);
  }
  for (const DiffractionOrder& d : a.orders) CHECK_FALSE(d.transmitted);
  bool warned = false;
  for (const std::string& w : r.warnings) warned = warned || w.find("substrate absorbs") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("invalid input is refused with a clear message", "[physics][edge]") {
  const std::vector<Incidence> inc{{1.0, 10, 0}};
  SolverOptions o;
  o.m1 = 3;
  const auto refuses = [&](Structure s, const char* text) {
    CHECK_THROWS_AS(solve(s, inc, o), InvalidArgument);
    CHECK_THROWS_WITH(solve(s, inc, o), Catch::Contains(text));
  };
  Structure s = test::lamellar(4);
  s.layers[0].thickness = -0.5;
  refuses(s, "layer 0: thickness must be positive");
  s = test::lamellar(0);
  refuses(s, "zero slices");
  s = test::lamellar(4);
  std::get<Rectangle>(s.layers[0].shapes[0]).width_x = -0.1;
  refuses(s, "layer 0, shape 0: rectangle widths must be positive");
  s = test::lamellar(4);
  s.lattice.period_x = 0;
  refuses(s, "period_x must be positive");
  s = test::lamellar(4);
  s.superstrate = Material::constant_index(C(1.0, 0.1));
  refuses(s, "superstrate must be lossless");
  s = test::lamellar(4);
  TrapezoidLine t;
  t.bottom_width = 0.3;
  t.sidewall_angle_deg = 60;  // narrows by 2·0.5/tan 60° = 0.58 over the layer
  t.material = Material::constant_index(2.0);
  s.layers[0].shapes = {t};
  refuses(s, "must stay positive through the layer");
  s = test::lamellar(4);
  Ellipse e;
  e.semi_axis_x = e.semi_axis_y = 0.2;
  s.layers[0].shapes = {e};
  refuses(s, "1D lattice");
  s = test::lamellar(4);
  CHECK_THROWS_WITH(solve(s, std::vector<Incidence>{{1.0, 95, 0}}, o), Catch::Contains("polar angle"));
  o.m2 = 1;
  CHECK_THROWS_WITH(solve(s, inc, o), Catch::Contains("1D lattice needs M2 = 0"));
}

TEST_CASE("problems too large are refused, saying how much memory they need", "[physics][edge]") {
  SolverOptions o;
  o.m1 = o.m2 = 31;
  o.memory_limit_bytes = std::size_t(1) << 30;
  Structure s = test::crossed(128);
  CHECK_THROWS_WITH(solve(s, std::vector<Incidence>{{1.0, 10, 0}}, o),
                    Catch::Contains("problem too large") && Catch::Contains("needs about") && Catch::Contains("GiB"));
}

TEST_CASE("z-varying shapes: trapezoid lines, sloped polygons and steps", "[physics][shapes]") {
  SolverOptions o;
  o.m1 = 6;
  const std::vector<Incidence> inc{{1.0, 10, 0}};
  const IncidenceResult rect = solve_one(test::lamellar(4), inc[0], o);
  // A 90° trapezoid is the rectangle.
  Structure s = test::lamellar(4);
  TrapezoidLine t;
  t.bottom_width = 0.75;
  t.sidewall_angle_deg = 90;
  t.material = Material::constant_permittivity(4.0);
  s.layers[0].shapes = {t};
  CHECK(max_difference(solve_one(s, inc[0], o), rect) < 1e-13);
  // An 80° trapezoid sampled at 4 slice centres is the 4-step staircase of those rectangles.
  t.sidewall_angle_deg = 80;
  s.layers[0].shapes = {t};
  Structure steps = test::lamellar(4);
  steps.layers[0].shapes.clear();
  for (int k = 0; k < 4; ++k) {  // top step first: centre heights 0.4375, 0.3125, 0.1875, 0.0625
    const double h = 0.5 - (k + 0.5) * 0.125;
    Rectangle r;
    r.width_x = 0.75 - 2 * h / std::tan(80 / deg);
    r.material = t.material;
    steps.layers[0].steps.push_back({r});
  }
  // Laurent's rule sees only χ: the same. The normal-vector field differs (tilted along the sloped walls,
  // n = x̂ on the steps' vertical ones; test_normal_field.cpp shows both converge to one limit).
  SolverOptions laurent = o;
  laurent.formulation = Formulation::laurent;
  const IncidenceResult trapezoid = solve_one(s, inc[0], laurent);
  CHECK(max_difference(trapezoid, solve_one(steps, inc[0], laurent)) < 1e-12);
  CHECK(max_difference(trapezoid, solve_one(test::lamellar(4), inc[0], laurent)) > 1e-4);
  CHECK(max_difference(solve_one(s, inc[0], o), solve_one(steps, inc[0], o)) > 1e-6);
  // A sloped square on a crossed lattice is the staircase of shrinking squares.
  Structure sq;
  sq.lattice = {1.0, 1.0};
  sq.superstrate = Material::constant_index(1.0);
  sq.substrate = Material::constant_index(1.5);
  Layer l;
  l.thickness = 0.3;
  l.slices = 3;
  l.background = Material::constant_index(1.0);
  SlopedPolygon sp;
  sp.bottom.vertices = {{-0.3, -0.3}, {0.3, -0.3}, {0.3, 0.3}, {-0.3, 0.3}};
  sp.bottom.material = Material::constant_index(2.0);
  sp.sidewall_angle_deg = 75;
  l.shapes = {sp};
  sq.layers = {l};
  Structure sq_steps = sq;
  sq_steps.layers[0].shapes.clear();
  for (int k = 0; k < 3; ++k) {
    const double h = 0.3 - (k + 0.5) * 0.1, half = 0.3 - h / std::tan(75 / deg);
    Rectangle r;
    r.width_x = r.width_y = 2 * half;
    r.material = sp.bottom.material;
    sq_steps.layers[0].steps.push_back({r});
  }
  // Laurent: the same; the normal-vector field is tilted along the square's sloped walls (in-plane on the
  // steps' vertical ones), as in 1D.
  SolverOptions o2;
  o2.m1 = o2.m2 = 2;
  o2.formulation = Formulation::laurent;
  // The two operators differ by rounding, which BiCGStab (the 2D default) carries into the result at about a tenth
  // of the solver tolerance (9e-12 at 1e-10; GMRES 6e-16): solved to 1e-13 here.
  o2.tolerance = 1e-13;
  CHECK(max_difference(solve_one(sq, {0.9, 20, 30}, o2), solve_one(sq_steps, {0.9, 20, 30}, o2)) < 1e-12);
  o2.formulation = Formulation::normal_vector;
  CHECK(max_difference(solve_one(sq, {0.9, 20, 30}, o2), solve_one(sq_steps, {0.9, 20, 30}, o2)) > 1e-6);
  // A slope too shallow for the layer collapses the polygon: refused.
  sq.layers[0].thickness = 1.5;
  CHECK_THROWS_WITH(solve(sq, std::vector<Incidence>{{0.9, 20, 30}}, o2), Catch::Contains("vanishes or turns over"));
}

TEST_CASE("a raster on pixel boundaries equals the exact rectangle in a full solve", "[physics][shapes]") {
  SolverOptions o;
  o.m1 = 6;
  Structure s = test::lamellar(4);
  Raster r;
  r.nx = 8;  // pixels of 1.5/8: the centred ridge 0.75 wide is pixels 2..5
  r.ny = 1;
  r.pixels = {-1, -1, 0, 0, 0, 0, -1, -1};
  r.materials = {Material::constant_permittivity(4.0)};
  s.layers[0].shapes = {r};
  CHECK(max_difference(solve_one(s, {1.0, 10, 0}, o), solve_one(test::lamellar(4), {1.0, 10, 0}, o)) < 1e-12);
}

TEST_CASE("field harmonics are returned on request", "[physics][edge]") {
  SolverOptions o;
  o.m1 = 2;
  o.keep_fields = true;
  const IncidenceResult r = solve_one(slab(2.0, 0.3, 1.5, 5), {1.0, 30, 0}, o);
  REQUIRE(r.fields.has_value());
  const Fields& f = *r.fields;
  CHECK(f.z.size() == 5);
  CHECK(std::abs(f.z[0] - 0.27) < 1e-12);  // top slice centre
  for (int pol : {s_pol, p_pol}) {
    REQUIRE(f.harmonics[pol].size() == 5 * 3 * 5);
    for (std::size_t p = 0; p < 5; ++p)
      for (int comp = 0; comp < 3; ++comp)
        for (int m = 0; m < 5; ++m) {
          const C v = f.harmonics[pol][(p * 3 + comp) * 5 + m];
          if (m != 2) CHECK(v == C(0));  // a slab excites order 0 only
        }
  }
  // s: E along ê = ŷ only; p: E in the plane of incidence (x, z).
  CHECK(std::abs(f.harmonics[s_pol][(0 * 3 + 1) * 5 + 2]) > 0.1);
  CHECK(std::abs(f.harmonics[s_pol][(0 * 3 + 0) * 5 + 2]) < 1e-14);
  CHECK(std::abs(f.harmonics[p_pol][(0 * 3 + 1) * 5 + 2]) < 1e-14);
}

TEST_CASE("returned fields carry the orders' lateral wavevectors and the slice grid they were solved on",
          "[physics][edge]") {
  Structure s = slab(2.0, 0.3, 1.5, 3);
  s.lattice = {0.9, 0.7};
  SolverOptions o;
  o.m1 = 2;
  o.m2 = 1;
  o.richardson = true;  // the fields are those of the finer grid
  o.keep_fields = true;
  const Incidence incidence{1.1, 30, 20};
  const IncidenceResult r = solve_one(s, incidence, o);
  REQUIRE(r.fields.has_value());
  const Fields& f = *r.fields;
  CHECK(f.z == slice_grid(s, 2).z);
  CHECK(f.thickness == slice_grid(s, 2).thickness);
  // The grating equation, orders in the harmonic layout (m1 + M1)(2M2 + 1) + (m2 + M2).
  REQUIRE(f.kx.size() == 15);
  REQUIRE(f.ky.size() == 15);
  const double k1 = 2 * std::numbers::pi / incidence.wavelength;  // superstrate n = 1
  for (int m1 = -2; m1 <= 2; ++m1)
    for (int m2 = -1; m2 <= 1; ++m2) {
      const std::size_t k = std::size_t((m1 + 2) * 3 + (m2 + 1));
      const double kx = k1 * std::sin(30 / deg) * std::cos(20 / deg) + 2 * std::numbers::pi * m1 / 0.9;
      const double ky = k1 * std::sin(30 / deg) * std::sin(20 / deg) + 2 * std::numbers::pi * m2 / 0.7;
      CHECK(std::abs(f.kx[k] - kx) <= 1e-13 * k1);
      CHECK(std::abs(f.ky[k] - ky) <= 1e-13 * k1);
    }
}
