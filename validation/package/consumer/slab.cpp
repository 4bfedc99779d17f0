// A film on a substrate solved through the installed gratingsim::physics and compared with the Airy
// formula written here (exp(−iωt), lossless, s and p): exit 0 and "slab: ok ..." when R agrees to
// 1e-6, exit 1 otherwise. A fresh random film each run.
#include <cmath>
#include <complex>
#include <cstdio>
#include <numbers>
#include <random>
#include <vector>

#include "physics/solver.hpp"

using C = std::complex<double>;
using namespace gratingsim::physics;

namespace {

/// |r|² of a film (index n, thickness d) between media n_in (incidence) and n_sub, angle θ in n_in.
double airy_reflectance(double n_in, double n, double d, double n_sub, double wavelength, double theta_deg, bool p) {
  const double s = n_in * std::sin(theta_deg * std::numbers::pi / 180);  // n sin θ, conserved
  const double media[3] = {n_in, n, n_sub};
  C cosine[3];
  for (int j = 0; j < 3; ++j) cosine[j] = std::sqrt(C(media[j] * media[j] - s * s)) / media[j];
  const auto r = [&](int j, int k) {  // Fresnel coefficients, r_p = −r_s at normal incidence
    return p ? (media[k] * cosine[j] - media[j] * cosine[k]) / (media[k] * cosine[j] + media[j] * cosine[k])
             : (media[j] * cosine[j] - media[k] * cosine[k]) / (media[j] * cosine[j] + media[k] * cosine[k]);
  };
  const C phase = std::exp(C(0, 4 * std::numbers::pi * n * d / wavelength) * cosine[1]);  // e^{2iβ}
  return std::norm((r(0, 1) + r(1, 2) * phase) / (1.0 + r(0, 1) * r(1, 2) * phase));
}

}  // namespace

int main() {
  std::mt19937_64 random(std::random_device{}());
  const auto uniform = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(random); };
  const double n_film = uniform(1.3, 2.5), thickness = uniform(50, 200), n_sub = uniform(1.4, 4.0);
  const double wavelength = uniform(400, 800), theta = uniform(0, 70);  // nm, degrees

  Structure structure;
  structure.lattice = {500.0, 0.0};  // a 1D period: a film excites order 0 only
  structure.superstrate = Material::constant_index(1.0);
  structure.substrate = Material::constant_index(n_sub);
  Layer film;
  film.thickness = thickness;
  film.slices = 60;
  film.background = Material::constant_index(n_film);
  structure.layers.push_back(film);
  SolverOptions options;
  options.richardson = true;  // error O(Δz⁴): 60 slices give R to ~1e-7 here
  const std::vector<Incidence> incidences{{wavelength, theta, 0}};
  const IncidenceResult result = solve(structure, incidences, options).incidences.at(0);

  const double expected_s = airy_reflectance(1.0, n_film, thickness, n_sub, wavelength, theta, false);
  const double expected_p = airy_reflectance(1.0, n_film, thickness, n_sub, wavelength, theta, true);
  const double error = std::max(std::abs(result.total_R[s_pol] - expected_s), std::abs(result.total_R[p_pol] - expected_p));
  std::printf("slab: n = %.4f, d = %.2f nm on n = %.4f, lambda = %.2f nm, theta = %.2f deg: R_s = %.8f (Airy %.8f), "
              "R_p = %.8f (Airy %.8f)\n", n_film, thickness, n_sub, wavelength, theta, result.total_R[s_pol], expected_s,
              result.total_R[p_pol], expected_p);
  if (!(error < 1e-6)) {
    std::printf("slab: FAILED, |R - Airy| = %.3g > 1e-6\n", error);
    return 1;
  }
  std::printf("slab: ok, |R - Airy| = %.3g\n", error);
  return 0;
}
