// physics/materials.cpp: ε = (n + iκ)² = n² − κ² + 2inκ (formulation.md §1, expanded by hand here),
// Im ε ≥ 0 for loss with time dependence exp(−iωt) (a gain medium would have Im ε < 0 and is
// refused), tables linear in n and κ (not in ε) between rows and never extrapolated, the Sellmeier and
// Lorentz–Drude formulas of materials.hpp against hand-evaluated values, and the built-in library
// against its cited sources.
#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "physics/materials.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;
using C = std::complex<double>;

namespace {

double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(test::rng()); }

/// (n + iκ)² expanded: n² − κ² + 2inκ.
C square_of_index(double n, double kappa) { return {n * n - kappa * kappa, 2 * n * kappa}; }

}  // namespace

TEST_CASE("materials: tables, formulas and the built-in library", "[physics][materials]") {
  // Si, Green 2008, at a table point and between two (linear in n and κ).
  const Material si = library_material("Si", 1);
  CHECK(std::abs(si.index(700) - C(3.772, 0.010528)) < 1e-12);
  CHECK(std::abs(si.index(705) - C(0.5 * (3.772 + 3.759), 0.5 * (0.010528 + 0.010057))) < 1e-12);
  CHECK_THROWS_WITH(si.permittivity(1500), Catch::Contains("outside its data range"));
  // The same in µm.
  CHECK(std::abs(library_material("Si", 1000).index(0.7) - C(3.772, 0.010528)) < 1e-12);
  // Fused silica (Malitson 1965): n_d = 1.4585 at 587.6 nm.
  CHECK(std::abs(library_material("SiO2", 1).index(587.6).real() - 1.4585) < 1e-4);
  // Si3N4 (Luke 2015): n = 1.9963 at 1550 nm (refractiveindex.info, Si3N4/Luke).
  CHECK(std::abs(library_material("Si3N4", 1).index(1550).real() - 1.9963) < 2e-4);
  // Au (Rakić 1998 LD): n + iκ = 0.35530 + 2.8828i at 603.62 nm (refractiveindex.info, Au/Rakic-LD).
  CHECK(std::abs(library_material("Au", 1).index(603.62) - C(0.35530, 2.8828)) < 2e-4);
  CHECK(library_material("Al", 1).permittivity(600).real() < -40);  // a good metal in the visible
  CHECK(std::abs(library_material("PMMA", 1).index(589.3).real() - 1.4906) < 1e-3);
  CHECK_THROWS_WITH(library_material("unobtainium", 1), Catch::Contains("known: air, SiO2"));
  // A user table, with its clear out-of-range error.
  const Material t = Material::tabulated("film", {400, 500, 600}, {1.5, 1.6, 1.8}, {0.0, 0.1, 0.0});
  CHECK(std::abs(t.index(550) - C(1.7, 0.05)) < 1e-12);
  CHECK_THROWS_WITH(t.permittivity(650), Catch::Contains("material 'film': wavelength 650"));
  CHECK_THROWS_AS(Material::tabulated("bad", {500, 400}, {1, 1}, {0, 0}), InvalidArgument);
  CHECK_THROWS_AS(Material::constant_index(C(1.5, -0.1)), InvalidArgument);
}

TEST_CASE("constant materials: ε = (n + iκ)² at every wavelength, index on the branch Im ≥ 0", "[physics][materials]") {
  // The default material is vacuum/air (materials.hpp).
  const Material air;
  CHECK(air.permittivity(uniform(1e-3, 1e3)) == C(1, 0));
  CHECK(air.name() == "air");
  for (int trial = 0; trial < 20; ++trial) {
    const double n = uniform(0.05, 5), kappa = trial % 2 ? uniform(0, 5) : 0.0;
    const double wavelength = uniform(1e-2, 1e4);  // any unit: a constant has no range
    INFO("n = " << n << ", κ = " << kappa << ", λ = " << wavelength);
    const Material m = Material::constant_index(C(n, kappa), "film");
    const C eps = m.permittivity(wavelength);
    CHECK(std::abs(eps - square_of_index(n, kappa)) <= 1e-14 * std::norm(C(n, kappa)));
    CHECK(eps.imag() >= 0);  // loss ⇔ Im ε = 2nκ ≥ 0 with exp(−iωt)
    CHECK(std::abs(m.index(wavelength) - C(n, kappa)) <= 1e-14 * std::abs(C(n, kappa)));
    CHECK(m.name() == "film");
    // A permittivity given directly is returned as given; its index is √ε with Im ≥ 0 (and Re ≥ 0
    // for a dielectric or absorber; a metal with Re ε < 0 has n small, κ large).
    const C given(uniform(-50, 20), trial % 2 ? uniform(0, 10) : 0.0);
    const Material p = Material::constant_permittivity(given);
    CHECK(p.permittivity(wavelength) == given);
    const C index = p.index(wavelength);
    CHECK(index.imag() >= 0);
    CHECK(std::abs(index * index - given) <= 1e-13 * std::abs(given));
  }
  // Gain (Im ε < 0, κ < 0) is not loss in this convention: refused, saying why.
  CHECK_THROWS_WITH(Material::constant_permittivity(C(2.0, -1e-3), "gain"),
                    Catch::Contains("material 'gain'") && Catch::Contains("Im ε must be ≥ 0") &&
                        Catch::Contains("exp(−iωt)"));
  CHECK_THROWS_WITH(Material::constant_index(C(1.5, -1e-3)), Catch::Contains("κ must be ≥ 0"));
  CHECK_THROWS_AS(Material::constant_permittivity(C(std::numeric_limits<double>::infinity(), 0)), InvalidArgument);
  CHECK_THROWS_AS(Material::constant_permittivity(C(std::nan(""), 0)), InvalidArgument);
  // A wavelength must be positive and finite, even for a constant.
  CHECK_THROWS_WITH(air.permittivity(0), Catch::Contains("wavelength must be positive"));
  CHECK_THROWS_AS(air.permittivity(-1), InvalidArgument);
  CHECK_THROWS_AS(air.permittivity(std::numeric_limits<double>::infinity()), InvalidArgument);
}

TEST_CASE("tables: linear in n and κ between rows, exact at rows and ends, never extrapolated", "[physics][materials]") {
  // A random table with uneven spacing.
  std::vector<double> wl{uniform(100, 200)}, n, kappa;
  for (int i = 1; i < 8; ++i) wl.push_back(wl.back() + uniform(1, 100));
  for (std::size_t i = 0; i < wl.size(); ++i) {
    n.push_back(uniform(0.2, 5));
    kappa.push_back(i % 3 == 0 ? 0.0 : uniform(0, 4));
  }
  const Material t = Material::tabulated("table", wl, n, kappa);
  for (std::size_t i = 0; i < wl.size(); ++i) {  // rows, the two ends included
    INFO("row " << i);
    CHECK(std::abs(t.permittivity(wl[i]) - square_of_index(n[i], kappa[i])) <= 1e-13 * std::norm(C(n[i], kappa[i])));
  }
  for (std::size_t i = 0; i + 1 < wl.size(); ++i) {
    const double u = uniform(0, 1), lambda = wl[i] + u * (wl[i + 1] - wl[i]);
    const double ni = n[i] + u * (n[i + 1] - n[i]), ki = kappa[i] + u * (kappa[i + 1] - kappa[i]);
    INFO("between rows " << i << " and " << i + 1 << ", u = " << u);
    const C eps = t.permittivity(lambda);
    CHECK(std::abs(eps - square_of_index(ni, ki)) <= 1e-12 * std::norm(C(ni, ki)));
    CHECK(eps.imag() >= 0);
  }
  // Out of range on either side, by a hair: refused with the material, the wavelength and the range.
  CHECK_THROWS_WITH(t.permittivity(wl.front() * (1 - 1e-9)),
                    Catch::Contains("material 'table': wavelength") && Catch::Contains("outside its data range [") &&
                        Catch::Contains("never extrapolated"));
  CHECK_THROWS_AS(t.permittivity(wl.back() * (1 + 1e-9)), InvalidArgument);
  CHECK_THROWS_AS(t.index(wl.back() * 2), InvalidArgument);
  // Malformed tables.
  CHECK_THROWS_WITH(Material::tabulated("one", {500}, {1.5}, {0}), Catch::Contains("at least two wavelengths"));
  CHECK_THROWS_WITH(Material::tabulated("ragged", {400, 500}, {1.5}, {0, 0}), Catch::Contains("differ in length"));
  CHECK_THROWS_AS(Material::tabulated("repeat", {400, 400}, {1.5, 1.5}, {0, 0}), InvalidArgument);
  CHECK_THROWS_AS(Material::tabulated("negative", {-400, 400}, {1.5, 1.5}, {0, 0}), InvalidArgument);
  CHECK_THROWS_WITH(Material::tabulated("gain", {400, 500}, {1.5, 1.5}, {0, -0.1}), Catch::Contains("κ must be ≥ 0"));
}

TEST_CASE("built-in Si (Green 2008) between its rows, by hand, in nm and in µm", "[physics][materials]") {
  // 633 nm: rows 630 (3.879, 0.016444) and 640 (3.861, 0.015432), u = 0.3:
  //   n = 3.8736, κ = 0.0161404, ε = 15.004516447… + 0.125042906…i.
  // 1075 nm, in the 50 nm part of the table: rows 1050 (3.556, 1.362e-4) and 1100 (3.542, 3.0637e-5),
  //   u = 0.5: n = 3.549, κ = 8.34185e-5, ε = 12.595400993… + 5.92104513e-4 i.
  for (double nm_per_unit : {1.0, 1000.0}) {
    INFO("nm per unit " << nm_per_unit);
    const Material si = library_material("Si", nm_per_unit);
    CHECK(std::abs(si.permittivity(633 / nm_per_unit) - C(15.004516447487841, 0.12504290688)) < 1e-11);
    CHECK(std::abs(si.permittivity(1075 / nm_per_unit) - C(12.595400993041352, 0.000592104513)) < 1e-11);
    CHECK_NOTHROW(si.permittivity(250 / nm_per_unit));  // the ends of the data
    CHECK_NOTHROW(si.permittivity(1200 / nm_per_unit));
    CHECK_THROWS_WITH(si.permittivity(249 / nm_per_unit), Catch::Contains("material 'Si'") &&
                                                              Catch::Contains("outside its data range"));
    CHECK_THROWS_AS(si.permittivity(1201 / nm_per_unit), InvalidArgument);
  }
}

TEST_CASE("Sellmeier: n² = 1 + Σ B_i λ²/(λ² − λ_i²) by hand, and the built-in dielectrics", "[physics][materials]") {
  // One term at λ = 2λ1: n² = 1 + 4B/3.
  const double b = uniform(0.1, 3), l1 = uniform(50, 150);
  const Material s = Material::sellmeier("one", {b}, {l1}, 1.5 * l1, 10 * l1);
  CHECK(s.permittivity(2 * l1).real() == Approx(1 + 4 * b / 3).epsilon(1e-14));
  CHECK(s.permittivity(2 * l1).imag() == 0);  // lossless
  // Two terms, the second at λ2 = 0 (a constant): n² = 1 + B1·4/3 + B2.
  const Material two = Material::sellmeier("two", {b, 0.5}, {l1, 0}, 1.5 * l1, 10 * l1);
  CHECK(two.permittivity(2 * l1).real() == Approx(1 + 4 * b / 3 + 0.5).epsilon(1e-14));
  CHECK_THROWS_WITH(s.permittivity(1.4 * l1), Catch::Contains("material 'one'") && Catch::Contains("outside"));
  // At a resonance inside the stated range ε is infinite: refused, not returned.
  const Material resonant = Material::sellmeier("resonant", {1}, {500}, 400, 600);
  CHECK_THROWS_WITH(resonant.permittivity(500), Catch::Contains("not finite"));
  CHECK_THROWS_AS(Material::sellmeier("none", {}, {}, 400, 600), InvalidArgument);
  CHECK_THROWS_AS(Material::sellmeier("range", {1}, {100}, 600, 400), InvalidArgument);
  // Fused silica (Malitson 1965): n = 1.4570 at 632.8 nm and 1.4440 at 1550 nm (Malitson's table /
  // refractiveindex.info SiO2/Malitson); range 0.21–6.7 µm.
  const Material silica = library_material("SiO2", 1);
  CHECK(silica.index(632.8).real() == Approx(1.4570).margin(1e-4));
  CHECK(silica.index(1550).real() == Approx(1.4440).margin(1e-4));
  CHECK(library_material("SiO2", 1000).index(1.55).real() == Approx(silica.index(1550).real()).epsilon(1e-14));
  CHECK_THROWS_AS(silica.permittivity(200), InvalidArgument);
  CHECK_NOTHROW(silica.permittivity(210));
}

TEST_CASE("Lorentz–Drude: ε = 1 − f0ωp²/(ω(ω + iΓ0)) + Σ f_jωp²/(ω_j² − ω² − iωΓ_j) by hand, Im ε > 0 for loss",
          "[physics][materials]") {
  // λ = hc/(1 eV) = 1239.841984 nm gives ħω = 1 eV. ωp = 10 eV, f0 = 1, Γ0 = 0.1 eV; one oscillator
  // f1 = 0.5, ω1 = 2 eV, Γ1 = 0.2 eV:
  //   1 − 100/(1 + 0.1i) = −98.00990… + 9.90099…i;  50/(3 − 0.2i) = 16.59292… + 1.10619…i;
  //   ε = −81.4169806361167 + 11.007184789275389i.
  const C expected(-81.4169806361167, 11.007184789275389);
  for (double nm_per_unit : {1.0, 1000.0}) {
    const Material m =
        Material::lorentz_drude("ld", 10, 1, 0.1, {0.5}, {2}, {0.2}, nm_per_unit, 100 / nm_per_unit, 5000 / nm_per_unit);
    CHECK(std::abs(m.permittivity(1239.841984 / nm_per_unit) - expected) < 1e-10);
    CHECK_THROWS_WITH(m.permittivity(50 / nm_per_unit), Catch::Contains("material 'ld'") && Catch::Contains("outside"));
  }
  // Negative damping is gain: Im ε < 0, refused at evaluation.
  const Material gain = Material::lorentz_drude("gain", 10, 1, -0.1, {}, {}, {}, 1, 100, 5000);
  CHECK_THROWS_WITH(gain.permittivity(1239.841984), Catch::Contains("Im ε must be ≥ 0"));
  CHECK_THROWS_AS(Material::lorentz_drude("ragged", 10, 1, 0.1, {0.5}, {2}, {}, 1, 100, 5000), InvalidArgument);
}

TEST_CASE("every built-in material: Im ε ≥ 0 and index² = ε across its range, metals absorb", "[physics][materials]") {
  CHECK(library_names() == std::vector<std::string>{"air", "SiO2", "Si", "Si3N4", "Al", "Au", "PMMA"});
  for (const std::string& name : library_names()) {
    const Material m = library_material(name, 1);
    CHECK(m.name() == name);
    // 500–1000 nm lies inside every range (materials.cpp): sample it at random.
    for (int i = 0; i < 20; ++i) {
      const double wl = uniform(500, 1000);
      INFO(name << " at " << wl << " nm");
      const C eps = m.permittivity(wl), n = m.index(wl);
      CHECK(eps.imag() >= 0);
      CHECK(n.imag() >= 0);
      CHECK(std::abs(n * n - eps) <= 1e-12 * std::abs(eps));
      if (name == "Al" || name == "Au") {
        CHECK(eps.imag() > 0);   // Drude damping: absorbing
        CHECK(eps.real() < 0);   // below the plasma frequency: metallic
        CHECK(n.imag() > n.real());
      }
      if (name == "air") CHECK(eps == C(1, 0));
      if (name == "SiO2" || name == "Si3N4" || name == "PMMA") CHECK(eps.imag() == 0);  // Sellmeier: lossless
    }
  }
  CHECK_THROWS_WITH(library_material("si", 1), Catch::Contains("unknown library material 'si'"));  // case-sensitive
  CHECK_THROWS_AS(library_material("Si", 0), InvalidArgument);
}

TEST_CASE("mixtures: ε = (1 − f) ε_a + f ε_b at every wavelength, valid where both parts are", "[physics][materials]") {
  // A dispersive table and a constant metal-like ε: the mixture follows both, by hand.
  const double lo = uniform(300, 400), hi = lo + uniform(100, 300);
  const Material table = Material::tabulated("table", {lo, hi}, {uniform(1.2, 3), uniform(1.2, 3)}, {0, uniform(0, 1)});
  const Material metal = Material::constant_permittivity({-uniform(5, 20), uniform(0.1, 2)}, "metal");
  for (const double f : {0.0, uniform(0, 1), 1.0}) {
    const Material m = Material::mixture(table, metal, f, "mix");
    CHECK(m.name() == "mix");
    for (int i = 0; i < 4; ++i) {
      const double lambda = lo + uniform(0, 1) * (hi - lo);
      const C expected = (1 - f) * table.permittivity(lambda) + f * metal.permittivity(lambda);
      INFO("f = " << f << ", λ = " << lambda);
      // To rounding: the compiler may fuse the products and sums (FMA) differently in the two places.
      CHECK(std::abs(m.permittivity(lambda) - expected) <= 4e-16 * std::abs(expected) * 4);
    }
    CHECK_THROWS_WITH(m.permittivity(hi * 1.01), Catch::Contains("outside its data range"));  // the table's range
  }
  CHECK(Material::mixture(table, metal, 0).permittivity(lo) == table.permittivity(lo));
  CHECK(Material::mixture(table, metal, 1).permittivity(lo) == metal.permittivity(lo));
  CHECK_THROWS_WITH(Material::mixture(table, metal, 1.5, "over"), Catch::Contains("must lie in [0, 1]"));
  CHECK_THROWS_AS(Material::mixture(table, metal, -1e-12), InvalidArgument);
}
