// physics/floquet.cpp against the grating equation and the Fresnel formulas, recomputed here from
// their textbook forms (formulation.md §1–2; structure.hpp's Incidence):
//   k0 = 2π/λ, k_j = k0 √ε_j, kx_m = k1 sinθ cosφ + 2π m1/Λx, ky_m = k1 sinθ sinφ + 2π m2/Λy,
//   kz_j = +√(k_j² − kρ²) when kρ < k_j (propagating), +i√(kρ² − k_j²) when kρ > k_j (evanescent: with
//   exp(−iωt) and exp(i kz z) the field decays away from the structure), and Im kz ≥ 0 on a lossy
//   substrate; an order propagates in medium j iff kρ < k_j.
// Fresnel: checked by physics rather than by re-typing the code's formulas — energy conservation
// |r|² + (kz2/kz1)|t|² = 1 for E-field amplitudes on a lossless interface, r = (n1 − n2)/(n1 + n2) at
// normal incidence, r_p = 0 at Brewster's angle tanθ_B = n2/n1, |r| = 1 beyond the critical angle
// (Born & Wolf, Principles of Optics, 7th ed., §1.5.2–1.5.4).
#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "physics/floquet.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

namespace {

constexpr double pi = std::numbers::pi;
constexpr double deg = pi / 180;

double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(test::rng()); }

/// kz = √(k² − kρ²) for a real k, from the propagating/evanescent case split (not a complex sqrt).
Complex kz_lossless(double k, double krho) {
  return krho < k ? Complex(std::sqrt(k * k - krho * krho), 0) : Complex(0, std::sqrt(krho * krho - k * k));
}

FloquetOrders orders(const Lattice& lattice, const Incidence& inc, Complex eps1, Complex eps2, int m1, int m2,
                     double rayleigh_tolerance = 1e-6) {
  std::vector<std::string> warnings;
  FloquetOrders f = floquet_orders(lattice, inc, eps1, eps2, m1, m2, rayleigh_tolerance, warnings);
  CHECK(warnings.empty());
  return f;
}

/// The (m1, m2) whose orders propagate up (into the superstrate) and down (into the substrate).
std::pair<std::set<std::pair<int, int>>, std::set<std::pair<int, int>>> propagating(const FloquetOrders& f) {
  std::set<std::pair<int, int>> up, down;
  for (const Order& o : f.orders) {
    if (o.propagates_up()) up.insert({o.m1, o.m2});
    if (f.propagates_down(o)) down.insert({o.m1, o.m2});
  }
  return {up, down};
}

}  // namespace

TEST_CASE("Floquet orders: wavevectors, kz branches and layout against the grating equation", "[physics][floquet]") {
  // Random 1D and 2D lattices, oblique and conical incidence, lossless and lossy substrates.
  for (int trial = 0; trial < 50; ++trial) {
    const bool one_d = trial % 2 == 0;
    const Lattice lattice{uniform(0.3, 3), one_d ? 0.0 : uniform(0.3, 3)};
    const Incidence inc{uniform(0.4, 2), uniform(0, 89), uniform(-180, 360)};
    const double eps1 = uniform(1, 2.5);
    const Complex eps2(uniform(1, 12), trial % 3 == 0 ? uniform(0.01, 5) : 0.0);
    const int M1 = 4, M2 = one_d ? 0 : 3;
    INFO("trial " << trial << ": Λ = (" << lattice.period_x << ", " << lattice.period_y << "), λ = "
                  << inc.wavelength << ", θ = " << inc.theta_deg << ", φ = " << inc.phi_deg << ", ε1 = " << eps1
                  << ", ε2 = " << eps2);
    // A tiny Rayleigh tolerance: random parameters are never that close to an anomaly.
    std::vector<std::string> warnings;
    const FloquetOrders f = floquet_orders(lattice, inc, eps1, eps2, M1, M2, 1e-9, warnings);
    const double k0 = 2 * pi / inc.wavelength, k1 = k0 * std::sqrt(eps1);
    CHECK(f.k0 == Approx(k0).epsilon(1e-14));
    CHECK(f.k1 == Approx(k1).epsilon(1e-14));
    CHECK(std::abs(f.k2 - k0 * std::sqrt(eps2)) <= 1e-13 * k0);  // principal sqrt: Im ≥ 0 for Im ε2 ≥ 0
    CHECK(f.substrate_lossless == (eps2.imag() == 0));
    REQUIRE(f.orders.size() == std::size_t((2 * M1 + 1) * (2 * M2 + 1)));
    CHECK(f.orders[f.zeroth()].m1 == 0);
    CHECK(f.orders[f.zeroth()].m2 == 0);
    const double kx0 = k1 * std::sin(inc.theta_deg * deg) * std::cos(inc.phi_deg * deg);
    const double ky0 = k1 * std::sin(inc.theta_deg * deg) * std::sin(inc.phi_deg * deg);
    for (int m1 = -M1; m1 <= M1; ++m1)
      for (int m2 = -M2; m2 <= M2; ++m2) {
        const Order& o = f.orders[std::size_t((m1 + M1) * (2 * M2 + 1) + (m2 + M2))];
        INFO("order (" << m1 << ", " << m2 << ")");
        CHECK((o.m1 == m1 && o.m2 == m2));
        const double kx = kx0 + 2 * pi * m1 / lattice.period_x;
        // 1D: no y harmonics, ky = ky0 for every order (conical incidence keeps it).
        const double ky = one_d ? ky0 : ky0 + 2 * pi * m2 / lattice.period_y;
        const double krho = std::sqrt(kx * kx + ky * ky), scale = k1 + krho;
        CHECK(std::abs(o.kx - kx) <= 1e-13 * scale);
        CHECK(std::abs(o.ky - ky) <= 1e-13 * scale);
        CHECK(std::abs(o.krho - krho) <= 1e-13 * scale);
        CHECK(std::abs(o.tx - kx / krho) <= 1e-12);
        CHECK(std::abs(o.ty - ky / krho) <= 1e-12);
        CHECK_FALSE(o.perturbed);
        // kz1: real k1. Near grazing √ amplifies rounding of k1² − kρ²: allow ε·scale²/|kz|.
        const Complex kz1 = kz_lossless(k1, krho);
        CHECK(std::abs(o.kz1 - kz1) <= 1e-9 * k1 + 1e-14 * scale * scale / std::abs(kz1));
        CHECK(o.propagates_up() == (krho < k1));
        // kz2: lossless by the case split; lossy by the principal √ (Re ≥ 0), which has Im > 0 here.
        const Complex kz2 = f.substrate_lossless ? kz_lossless(k0 * std::sqrt(eps2.real()), krho)
                                                 : k0 * std::sqrt(eps2 - (krho / k0) * (krho / k0));
        CHECK(std::abs(o.kz2 - kz2) <= 1e-9 * std::abs(f.k2) + 1e-14 * scale * scale / std::abs(kz2));
        CHECK(o.kz1.imag() >= 0);
        CHECK(o.kz2.imag() >= 0);
        CHECK(f.propagates_down(o) == (f.substrate_lossless && krho < k0 * std::sqrt(eps2.real())));
        if (!f.substrate_lossless) CHECK(o.kz2.imag() > 0);  // every order decays into an absorber
      }
  }
}

TEST_CASE("which orders propagate: hand-counted cases of the grating equation", "[physics][floquet]") {
  using Set = std::set<std::pair<int, int>>;
  SECTION("1D, normal incidence, Λ = 1.5λ into n2 = 1.5: up |m| < 1.5, down |m| < 2.25") {
    const auto [up, down] = propagating(orders({1.5, 0}, {1.0, 0, 0}, 1.0, 2.25, 3, 0));
    CHECK(up == Set{{-1, 0}, {0, 0}, {1, 0}});
    CHECK(down == Set{{-2, 0}, {-1, 0}, {0, 0}, {1, 0}, {2, 0}});
  }
  SECTION("1D, θ = 30°, Λ = 1.6λ: kx/k0 = 0.5 + 0.625 m") {
    // up |kx/k0| < 1: m = −2 (−0.75), −1 (−0.125), 0 (0.5); m = 1 is 1.125.
    // down |kx/k0| < 1.5 adds m = −3 (−1.375) and 1 (1.125); m = 2 is 1.75.
    const auto [up, down] = propagating(orders({1.6, 0}, {1.0, 30, 0}, 1.0, 2.25, 4, 0));
    CHECK(up == Set{{-2, 0}, {-1, 0}, {0, 0}});
    CHECK(down == Set{{-3, 0}, {-2, 0}, {-1, 0}, {0, 0}, {1, 0}});
  }
  SECTION("1D conical, θ = 30°, φ = 90° (incidence along the grooves), Λ = 1.6λ") {
    // ky = 0.5 k0 for every order, kx = m k0/1.6: up (m/1.6)² < 0.75 → |m| ≤ 1; down (m/1.6)² < 2 → |m| ≤ 2.
    const FloquetOrders f = orders({1.6, 0}, {1.0, 30, 90}, 1.0, 2.25, 3, 0);
    for (const Order& o : f.orders) CHECK(o.ky == Approx(0.5 * f.k0).epsilon(1e-14));
    const auto [up, down] = propagating(f);
    CHECK(up == Set{{-1, 0}, {0, 0}, {1, 0}});
    CHECK(down == Set{{-2, 0}, {-1, 0}, {0, 0}, {1, 0}, {2, 0}});
  }
  SECTION("2D square, Λ = 1.2λ, normal incidence: up m1² + m2² < 1.44, down < 3.24") {
    const auto [up, down] = propagating(orders({1.2, 1.2}, {1.0, 0, 0}, 1.0, 2.25, 2, 2));
    CHECK(up == Set{{-1, 0}, {0, -1}, {0, 0}, {0, 1}, {1, 0}});
    Set nine;
    for (int a = -1; a <= 1; ++a)
      for (int b = -1; b <= 1; ++b) nine.insert({a, b});
    CHECK(down == nine);
  }
  SECTION("a lossy substrate has no propagating transmitted order") {
    const auto [up, down] = propagating(orders({1.5, 0}, {1.0, 0, 0}, 1.0, Complex(2.25, 0.1), 3, 0));
    CHECK(up.size() == 3);
    CHECK(down.empty());
  }
  SECTION("the superstrate's index scales k1: ε1 = 2.25, Λ = 1.5λ gives |m| < 2.25 upwards") {
    const auto [up, down] = propagating(orders({1.5, 0}, {1.0, 0, 0}, 2.25, 1.0, 3, 0));
    CHECK(up == Set{{-2, 0}, {-1, 0}, {0, 0}, {1, 0}, {2, 0}});
    CHECK(down == Set{{-1, 0}, {0, 0}, {1, 0}});
  }
}

TEST_CASE("the in-plane direction t̂ at kρ = 0 is fixed by φ", "[physics][floquet]") {
  // formulation.md §2: t̂ = (cosφ, sinφ, 0) where kρ = 0 (normal incidence, zeroth order).
  const double phi = uniform(-180, 180);
  const FloquetOrders f = orders({1.3, 0.9}, {0.7, 0, phi}, 1.0, 2.0, 1, 1);
  const Order& o = f.orders[f.zeroth()];
  CHECK(o.krho == 0);
  CHECK(o.tx == Approx(std::cos(phi * deg)).margin(1e-15));
  CHECK(o.ty == Approx(std::sin(phi * deg)).margin(1e-15));
}

TEST_CASE("Fresnel coefficients of the bare interface obey energy conservation and the textbook limits",
          "[physics][floquet]") {
  SECTION("lossless interface, random angles: |r|² + (kz2/kz1)|t|² = 1 for s and p") {
    for (int trial = 0; trial < 20; ++trial) {
      const double eps1 = uniform(1, 2), eps2 = uniform(1, 12);
      const Incidence inc{uniform(0.5, 1.5), uniform(0, 89), uniform(0, 360)};
      const FloquetOrders f = orders({10.0, 0}, inc, eps1, eps2, 0, 0);
      const Order& o = f.orders[f.zeroth()];
      INFO("ε1 = " << eps1 << ", ε2 = " << eps2 << ", θ = " << inc.theta_deg);
      if (!f.propagates_down(o)) continue;  // total internal reflection: below
      const double flux = o.kz2.real() / o.kz1.real();
      CHECK(std::norm(o.rs) + flux * std::norm(o.ts) == Approx(1).epsilon(1e-12));
      CHECK(std::norm(o.rp) + flux * std::norm(o.tp) == Approx(1).epsilon(1e-12));
    }
  }
  SECTION("normal incidence: r = ∓(n1 − n2)/(n1 + n2), t_s = 2n1/(n1 + n2)") {
    const double n1 = uniform(1, 1.5), n2 = uniform(1, 4);
    const Order o = orders({10.0, 0}, {1.0, 0, 0}, n1 * n1, n2 * n2, 0, 0).orders[0];
    CHECK(std::abs(o.rs - (n1 - n2) / (n1 + n2)) <= 1e-14);
    // p: with p̂± = (±kz t̂ − kρ ẑ)/k (formulation.md §2) the reflected p̂− has its t̂ part reversed,
    // so r_p = (n2 − n1)/(n1 + n2) = −r_s at normal incidence; t_p = t_s there.
    CHECK(std::abs(o.rp - (n2 - n1) / (n1 + n2)) <= 1e-14);
    CHECK(std::abs(o.tp - 2 * n1 / (n1 + n2)) <= 1e-14);
    CHECK(std::abs(o.ts - 2 * n1 / (n1 + n2)) <= 1e-14);
  }
  SECTION("Brewster's angle tanθ_B = n2/n1: r_p = 0, r_s ≠ 0") {
    const double n1 = uniform(1, 1.5), n2 = uniform(1.6, 4);
    const Order o = orders({10.0, 0}, {1.0, std::atan(n2 / n1) / deg, 30}, n1 * n1, n2 * n2, 0, 0).orders[0];
    CHECK(std::abs(o.rp) <= 1e-13);
    CHECK(std::abs(o.rs) > 0.1);
  }
  SECTION("beyond the critical angle (n1 > n2): |r_s| = |r_p| = 1, kz2 evanescent") {
    const double n1 = 1.5, n2 = 1.0, critical = std::asin(n2 / n1) / deg;
    const Order o = orders({10.0, 0}, {1.0, uniform(critical + 1, 89), 0}, n1 * n1, n2 * n2, 0, 0).orders[0];
    CHECK(o.kz2.real() == 0);
    CHECK(o.kz2.imag() > 0);
    CHECK(std::abs(o.rs) == Approx(1).epsilon(1e-14));
    CHECK(std::abs(o.rp) == Approx(1).epsilon(1e-14));
  }
}

TEST_CASE("Rayleigh anomalies: |kz1| < tol·k1 is moved to √(k1² − kρ² + i(tol·k1)²), with a warning",
          "[physics][floquet]") {
  // Λ = 1, normal incidence, ε1 = 1: orders ±1 have kρ = 2π, so k1² − kρ² = s (a·tol·k1)² when
  // k1 = 2π/√(1 − s a² tol²), i.e. λ = √(1 − s a² tol²); s = +1 just propagating, −1 just evanescent.
  for (double tol : {1e-6, 1e-3})
    for (double s : {1.0, -1.0})
      for (double a : {0.0, 0.5, 2.0}) {
        INFO("tol " << tol << ", " << (s > 0 ? "propagating" : "evanescent") << " side, |kz1| = " << a << "·tol·k1");
        const double wavelength = std::sqrt(1 - s * a * a * tol * tol);
        std::vector<std::string> warnings;
        const FloquetOrders f = floquet_orders({1.0, 0}, {wavelength, 0, 0}, 1.0, 2.25, 2, 0, tol, warnings);
        const double k1 = f.k1;
        const bool anomaly = a < 1;
        CHECK(warnings.size() == (anomaly ? 2u : 0u));  // orders −1 and +1
        for (const Order& o : f.orders) {
          INFO("order " << o.m1);
          const bool at = std::abs(o.m1) == 1 && anomaly;
          CHECK(o.perturbed == at);
          if (!at) continue;
          // The documented move, Im ≥ 0: the principal √ (its argument has Im > 0).
          const Complex moved = std::sqrt(Complex(k1 * k1 - o.krho * o.krho, (tol * k1) * (tol * k1)));
          CHECK(std::abs(o.kz1 - moved) <= 1e-6 * tol * k1);
          CHECK(o.kz1.imag() > 0);
          CHECK(std::abs(o.kz1) >= tol * k1 * (1 - 1e-6));  // off the singularity of 1/kz1
          CHECK(o.kz2 == kz_lossless(1.5 * k1, o.krho));   // the substrate is not touched
        }
        for (const std::string& w : warnings) {
          CHECK_THAT(w, Catch::Contains("Rayleigh anomaly"));
          CHECK_THAT(w, Catch::Contains("(1, 0)") || Catch::Contains("(-1, 0)"));
        }
      }
}

TEST_CASE("floquet_orders refuses what it cannot represent", "[physics][floquet]") {
  std::vector<std::string> w;
  const Lattice l1{1.0, 0}, l2{1.0, 1.0};
  CHECK_THROWS_AS(floquet_orders(l1, {1.0, 90, 0}, 1.0, 2.0, 2, 0, 1e-6, w), InvalidArgument);  // grazing
  CHECK_THROWS_AS(floquet_orders(l1, {1.0, -1, 0}, 1.0, 2.0, 2, 0, 1e-6, w), InvalidArgument);
  CHECK_THROWS_AS(floquet_orders(l1, {0.0, 10, 0}, 1.0, 2.0, 2, 0, 1e-6, w), InvalidArgument);
  CHECK_THROWS_WITH(floquet_orders(l1, {1.0, 10, 0}, Complex(1.0, 0.01), 2.0, 2, 0, 1e-6, w),
                    Catch::Contains("superstrate must be lossless"));
  CHECK_THROWS_AS(floquet_orders(l1, {1.0, 10, 0}, 1.0, 2.0, 2, 1, 1e-6, w), InvalidArgument);  // 1D needs M2 = 0
  CHECK_THROWS_AS(floquet_orders(l2, {1.0, 10, 0}, 1.0, 2.0, -1, 1, 1e-6, w), InvalidArgument);
  CHECK_NOTHROW(floquet_orders(l2, {1.0, 89.9, 0}, 1.0, 2.0, 2, 2, 1e-6, w));
}

TEST_CASE("propagating orders of a sweep: those with kρ < k1, or < k2 in a lossless substrate, anywhere",
          "[physics][floquet]") {
  for (const bool absorbing : {false, true}) {
    Structure s;
    s.lattice = {uniform(0.5, 2.0), uniform(0.5, 2.0)};
    const double n1 = uniform(1.0, 1.5), n2 = uniform(1.2, 3.5);
    s.superstrate = Material::constant_index(n1);
    s.substrate = Material::constant_index(Complex(n2, absorbing ? 0.1 : 0.0));
    const std::vector<double> wavelengths{uniform(0.4, 0.8), uniform(0.8, 1.6)};
    const std::vector<double> theta{uniform(0, 30), uniform(30, 80)}, phi{uniform(-180, 180)};
    const int m1 = 4, m2 = 3;
    std::set<std::pair<int, int>> expected;
    for (const double w : wavelengths)
      for (const double t : theta)
        for (const double p : phi) {
          const double k0 = 2 * pi / w, k1 = n1 * k0, k2 = n2 * k0;
          for (int a = -m1; a <= m1; ++a)
            for (int b = -m2; b <= m2; ++b) {
              const double kx = k1 * std::sin(t * deg) * std::cos(p * deg) + 2 * pi * a / s.lattice.period_x;
              const double ky = k1 * std::sin(t * deg) * std::sin(p * deg) + 2 * pi * b / s.lattice.period_y;
              const double krho = std::hypot(kx, ky);
              if (krho < k1 || (!absorbing && krho < k2)) expected.insert({a, b});
            }
        }
    const auto found = propagating_orders(s, wavelengths, theta, phi, m1, m2, 1e-6);
    std::set<std::pair<int, int>> got;
    for (std::size_t i = 0; i < found.size(); ++i) {
      got.insert({found[i][0], found[i][1]});
      if (i > 0) CHECK(found[i - 1] < found[i]);  // sorted by (m1, m2), each once
    }
    INFO("absorbing substrate: " << absorbing);
    CHECK(got == expected);
    CHECK(got.count({0, 0}) == 1);  // order 0 always reflects into the lossless superstrate
  }
}
