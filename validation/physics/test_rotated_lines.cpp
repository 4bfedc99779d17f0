// 1D gratings rotated in the plane (Lattice::rotation_deg, solver.cpp's solve_rotated): against the same
// stripes drawn on a 2D lattice (the 2D solver path, no rotation anywhere), and α against α + 180°.
#include <cmath>
#include <numbers>
#include <random>

#include "physics/floquet.hpp"
#include "physics/solver.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

namespace {

constexpr double degree = std::numbers::pi / 180;

double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(test::rng()); }

IncidenceResult solve_one(const Structure& s, const Incidence& inc, const SolverOptions& o) {
  return solve(s, std::vector<Incidence>{inc}, o).incidences.at(0);
}

/// One layer of lines of width w centred at u0 (grating frame: u across the lines), period Λ = 1, over a
/// substrate; lossy lines, so that nothing is accidentally symmetric in s and p.
Structure lines(double rotation_deg, double width, double u0) {
  Structure s;
  s.lattice = {1.0, 0.0, rotation_deg};
  s.superstrate = Material::constant_index(1.0);
  s.substrate = Material::constant_index(1.5);
  Layer l;
  l.thickness = 0.3;
  l.slices = 6;
  l.background = Material::constant_index(1.0);
  Rectangle ridge;
  ridge.center = {u0, 0};
  ridge.width_x = width;
  ridge.material = Material::constant_index({2.0, 0.05});
  l.shapes.push_back(ridge);
  s.layers = {l};
  return s;
}

/// The same lines rotated by α ∈ (0°, 90°), drawn on the 2D lattice Λx = Λ/cos α, Λy = Λ/sin α, whose
/// reciprocal vector (2π/Λx, 2π/Λy) is the rotated grating vector G = (2π/Λ)(cos α, sin α): order m of the
/// 1D grating is order (m, m) here. Within the cell the stripe |x cos α + y sin α − u0| < w/2 is cut at
/// x = 0 into two quadrilaterals, each spanning less than one period in y (w < Λ/2); their periodic images
/// tile the stripes.
Structure stripes_on_2d_lattice(double alpha_deg, double width, double u0) {
  Structure s = lines(0, width, u0);
  const double c = std::cos(alpha_deg * degree), sn = std::sin(alpha_deg * degree);
  const double lx = 1.0 / c, ly = 1.0 / sn, h = width / (2 * sn);
  s.lattice = {lx, ly, 0};
  const auto centre_y = [&](double x) { return (u0 - x * c) / sn; };  // the stripe's centre line
  const Material ridge = std::get<Rectangle>(s.layers[0].shapes[0]).material;
  Polygon left, right;
  left.vertices = {{-lx / 2, centre_y(-lx / 2) - h}, {0, centre_y(0) - h}, {0, centre_y(0) + h},
                   {-lx / 2, centre_y(-lx / 2) + h}};
  right.vertices = {{0, centre_y(0) - h}, {lx / 2, centre_y(lx / 2) - h}, {lx / 2, centre_y(lx / 2) + h},
                    {0, centre_y(0) + h}};
  left.material = right.material = ridge;
  s.layers[0].shapes = {left, right};
  return s;
}

double jones_difference(const Jones& a, const Jones& b) {
  return std::max({std::abs(a.s_from_s - b.s_from_s), std::abs(a.s_from_p - b.s_from_p),
                   std::abs(a.p_from_s - b.p_from_s), std::abs(a.p_from_p - b.p_from_p)});
}

}  // namespace

TEST_CASE("a rotated 1D grating equals its stripes drawn on a 2D lattice: orders, directions, Jones, fields",
          "[physics][grating][rotation]") {
  // Laurent's rule on both: the 2D stripes' Fourier coefficients vanish off the diagonal (m, m), so the
  // 2D problem falls apart into diagonals m1 − m2 = const and the incident wave excites only m1 = m2,
  // which is exactly the 1D problem of the same M in the lab frame. Both dense LU: what remains is
  // rounding (off-diagonal coefficients ~1e-16 of the polygon transforms, amplified by the conditioning):
  // measured 1e-15 in R, T, Jones and field harmonics (1e-13° in Ψ, Δ); the bounds leave a factor 1000.
  // The 1D solve sees the azimuth φ − α, the 2D one φ: every lab-frame vector of the rotated result
  // (directions, kx, ky, Ex, Ey) is checked against a solve that rotates nothing.
  const double alpha = uniform(10, 80), width = uniform(0.2, 0.45), u0 = uniform(-0.2, 0.2);
  const Incidence incidence{uniform(0.6, 0.9), uniform(5, 60), uniform(0, 360)};
  INFO("α = " << alpha << "°, w = " << width << ", u0 = " << u0 << ", λ = " << incidence.wavelength
              << ", θ = " << incidence.theta_deg << "°, φ = " << incidence.phi_deg << "°");
  constexpr int harmonics = 3;
  SolverOptions one_d;
  one_d.m1 = harmonics;
  one_d.method = Method::dense_lu;
  one_d.formulation = Formulation::laurent;
  one_d.keep_fields = true;
  SolverOptions two_d = one_d;
  two_d.m2 = harmonics;
  const IncidenceResult rotated = solve_one(lines(alpha, width, u0), incidence, one_d);
  const IncidenceResult drawn = solve_one(stripes_on_2d_lattice(alpha, width, u0), incidence, two_d);

  CHECK(rotated.incidence.phi_deg == incidence.phi_deg);  // reported at the lab azimuth
  int carrying_power = 0;
  for (const DiffractionOrder& d : drawn.orders) {
    INFO("order (" << d.m1 << ", " << d.m2 << ")");
    if (d.m1 != d.m2) {  // another diagonal: not excited
      for (int pol : {s_pol, p_pol}) CHECK(d.R[pol] + d.T[pol] < 1e-20);
      continue;
    }
    const DiffractionOrder* r = test::find_order(rotated, d.m1, 0);
    REQUIRE(r != nullptr);
    CHECK(r->reflected == d.reflected);
    CHECK(r->transmitted == d.transmitted);
    for (int pol : {s_pol, p_pol}) {
      CHECK(std::abs(r->R[pol] - d.R[pol]) < 1e-12);
      CHECK(std::abs(r->T[pol] - d.T[pol]) < 1e-12);
      carrying_power += d.m1 != 0 && d.R[pol] + d.T[pol] > 1e-3;
    }
    CHECK(jones_difference(r->reflection, d.reflection) < 1e-12);
    CHECK(jones_difference(r->transmission, d.transmission) < 1e-12);
    for (int k = 0; k < 3; ++k) {
      CHECK(std::abs(r->reflected_direction[std::size_t(k)] - d.reflected_direction[std::size_t(k)]) < 1e-12);
      CHECK(std::abs(r->transmitted_direction[std::size_t(k)] - d.transmitted_direction[std::size_t(k)]) < 1e-12);
    }
  }
  CHECK(rotated.orders.size() == std::size_t(std::count_if(drawn.orders.begin(), drawn.orders.end(),
                                                           [](const DiffractionOrder& d) { return d.m1 == d.m2; })));
  CHECK(carrying_power >= 1);  // a diffracted order carries power: its direction and Jones are tested
  CHECK(std::abs(rotated.zeroth_order.psi_deg - drawn.zeroth_order.psi_deg) < 1e-10);
  CHECK(std::abs(rotated.zeroth_order.delta_deg - drawn.zeroth_order.delta_deg) < 1e-10);

  // Field harmonics: 1D harmonic m (its lateral wavevector and components Ex, Ey, Ez in the lab) is the
  // 2D harmonic (m, m); the 2D harmonics off the diagonal are not excited.
  REQUIRE(rotated.fields.has_value());
  REQUIRE(drawn.fields.has_value());
  const Fields &f1 = *rotated.fields, &f2 = *drawn.fields;
  const std::size_t n1 = 2 * harmonics + 1, n2 = n1 * n1, slices = f1.z.size();
  REQUIRE(f1.kx.size() == n1);
  REQUIRE(f2.kx.size() == n2);
  double scale = 0, worst = 0, off_diagonal = 0, worst_k = 0;
  for (std::size_t m = 0; m < n1; ++m) {
    const std::size_t diagonal = m * n1 + m;  // (m1 + M)(2M + 1) + (m2 + M) with m1 = m2
    worst_k = std::max({worst_k, std::abs(f1.kx[m] - f2.kx[diagonal]), std::abs(f1.ky[m] - f2.ky[diagonal])});
  }
  for (int pol : {s_pol, p_pol})
    for (std::size_t q = 0; q < slices; ++q)
      for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t k = 0; k < n2; ++k) {
          const Complex e2 = f2.harmonics[std::size_t(pol)][(q * 3 + c) * n2 + k];
          scale = std::max(scale, std::abs(e2));
          if (k / n1 == k % n1)
            worst = std::max(worst, std::abs(f1.harmonics[std::size_t(pol)][(q * 3 + c) * n1 + k / n1] - e2));
          else
            off_diagonal = std::max(off_diagonal, std::abs(e2));
        }
  CHECK(worst_k < 1e-12 * 2 * std::numbers::pi / incidence.wavelength);
  CHECK(scale > 0.1);
  CHECK(worst < 1e-12 * scale);
  CHECK(off_diagonal < 1e-12 * scale);
}

TEST_CASE("a symmetric 1D grating rotated by α and by α + 180° is one grating: order m is order −m",
          "[physics][grating][rotation]") {
  // A trapezoid line centred on u = 0 is symmetric under u → −u, which is what α + 180° does to the
  // grating (G → −G): the same physical grating, its order m labelled −m. The two solves see the azimuths
  // φ − α and φ − α − 180°, mirror images of each other; the mirror symmetry of the discrete problem is
  // exact (symmetric harmonics, symmetric normal field), so dense LU agrees to rounding: measured 1e-15
  // in R, T, Jones and field harmonics (2e-13° in Ψ, Δ); the bounds leave a factor 1000.
  const double alpha = uniform(-180, 180);
  const Incidence incidence{uniform(0.6, 0.9), uniform(5, 60), uniform(-180, 180)};
  INFO("α = " << alpha << "°, λ = " << incidence.wavelength << ", θ = " << incidence.theta_deg
              << "°, φ = " << incidence.phi_deg << "°");
  const auto build = [](double rotation) {
    Structure s = lines(rotation, 0.4, 0);
    TrapezoidLine line;
    line.bottom_width = 0.4;
    line.sidewall_angle_deg = 80;
    line.material = Material::constant_index(2.5);
    s.layers[0].shapes = {line};
    return s;
  };
  SolverOptions o;
  o.m1 = 8;
  o.method = Method::dense_lu;
  o.keep_fields = true;
  const IncidenceResult a = solve_one(build(alpha), incidence, o);
  const IncidenceResult b = solve_one(build(alpha + 180), incidence, o);
  REQUIRE(a.orders.size() == b.orders.size());
  for (const DiffractionOrder& d : a.orders) {
    INFO("order " << d.m1);
    const DiffractionOrder* image = test::find_order(b, -d.m1, 0);
    REQUIRE(image != nullptr);
    for (int pol : {s_pol, p_pol}) {
      CHECK(std::abs(d.R[pol] - image->R[pol]) < 1e-12);
      CHECK(std::abs(d.T[pol] - image->T[pol]) < 1e-12);
    }
    CHECK(jones_difference(d.reflection, image->reflection) < 1e-12);
    CHECK(jones_difference(d.transmission, image->transmission) < 1e-12);
    for (std::size_t k = 0; k < 3; ++k) {
      CHECK(std::abs(d.reflected_direction[k] - image->reflected_direction[k]) < 1e-12);
      CHECK(std::abs(d.transmitted_direction[k] - image->transmitted_direction[k]) < 1e-12);
    }
  }
  CHECK(std::abs(a.zeroth_order.psi_deg - b.zeroth_order.psi_deg) < 1e-10);
  CHECK(std::abs(a.zeroth_order.delta_deg - b.zeroth_order.delta_deg) < 1e-10);
  // The same lab field: harmonic m of one is harmonic −m of the other, every component.
  const std::size_t n = 2 * 8 + 1;
  double worst = 0, scale = 0;
  for (int pol : {s_pol, p_pol})
    for (std::size_t q = 0; q < a.fields->z.size(); ++q)
      for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t m = 0; m < n; ++m) {
          const Complex ea = a.fields->harmonics[std::size_t(pol)][(q * 3 + c) * n + m];
          scale = std::max(scale, std::abs(ea));
          worst = std::max(worst, std::abs(ea - b.fields->harmonics[std::size_t(pol)][(q * 3 + c) * n + (n - 1 - m)]));
        }
  CHECK(scale > 0.1);
  CHECK(worst < 1e-12 * scale);
}

TEST_CASE("only a 1D grating may be rotated, by a finite angle", "[physics][grating][rotation]") {
  SolverOptions o;
  o.m1 = o.m2 = 1;
  Structure crossed = test::crossed(2);
  crossed.lattice.rotation_deg = 30;
  CHECK_THROWS_AS(solve(crossed, std::vector<Incidence>{{0.6, 10, 0}}, o), InvalidArgument);
  o.m2 = 0;
  Structure line = lines(std::numeric_limits<double>::infinity(), 0.3, 0);
  CHECK_THROWS_AS(solve(line, std::vector<Incidence>{{0.6, 10, 0}}, o), InvalidArgument);
  std::vector<std::string> warnings;
  CHECK_THROWS_AS(floquet_orders(lines(10, 0.3, 0).lattice, {0.6, 10, 0}, 1.0, 2.25, 1, 0, 1e-6, warnings),
                  InvalidArgument);
}

TEST_CASE("the propagating orders of a rotated 1D grating are the unrotated one's at φ − α",
          "[physics][grating][rotation]") {
  const double alpha = uniform(-180, 180), phi = uniform(-180, 180);
  INFO("α = " << alpha << "°, φ = " << phi << "°");
  const std::vector<double> wavelengths{0.45, 0.8}, theta{0, 40};
  const auto orders = [&](double rotation, double azimuth) {
    return propagating_orders(lines(rotation, 0.3, 0), wavelengths, theta, std::vector<double>{azimuth}, 6, 0, 1e-6);
  };
  const auto found = orders(alpha, phi);
  CHECK(found == orders(0, phi - alpha));
  CHECK(found.size() >= 3);
}
