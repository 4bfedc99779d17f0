#pragma once
// An analytic model for the fitting tests, independent of gratingsim's solver: ellipsometric Ψ, Δ of
// a stack of homogeneous films on a substrate from the Fresnel coefficients and Airy's summation.
// Conventions: fields exp(−iωt); a film of index n and thickness d adds the phase β = 2π d q / λ with
// q = n cos θ = √(n² − sin²θ₀) (ambient n₀ = 1, branch Im q ≥ 0: absorption decays downwards);
// r_s = (q_i − q_j)/(q_i + q_j), r_p = (n_j² q_i − n_i² q_j)/(n_j² q_i + n_i² q_j), so r_p = −r_s at
// normal incidence (the "Nebraska" convention of io/SCHEMA.md: Δ = 180° there);
// tan Ψ e^{iΔ} = r_p / r_s, Ψ in [0°, 90°], Δ in (−180°, 180°].
#include <cmath>
#include <complex>
#include <numbers>
#include <utility>
#include <vector>

namespace gratingsim::test {

struct Film {
  std::complex<double> index;
  double thickness_nm;
};

/// (Ψ, Δ) in degrees of `films` (top first) on `substrate` at wavelength λ (nm) and incidence θ₀ (deg).
inline std::pair<double, double> thin_film_psi_delta(const std::vector<Film>& films, std::complex<double> substrate,
                                                     double wavelength_nm, double theta_deg) {
  using C = std::complex<double>;
  const double s = std::sin(theta_deg * std::numbers::pi / 180);
  const auto q = [&](C n) {
    C root = std::sqrt(n * n - s * s);
    return root.imag() < 0 ? -root : root;
  };
  const auto fresnel = [&](C ni, C nj, bool p) {
    const C qi = q(ni), qj = q(nj);
    return p ? (nj * nj * qi - ni * ni * qj) / (nj * nj * qi + ni * ni * qj) : (qi - qj) / (qi + qj);
  };
  C rho[2];
  for (const bool p : {false, true}) {
    // From the bottom interface up: r_above = (r_ij + r_below e^{2iβ_j}) / (1 + r_ij r_below e^{2iβ_j}).
    C below_index = substrate;
    C r = 0, phase = 1;
    bool first = true;
    for (auto film = films.rbegin(); film != films.rend(); ++film) {
      const C interface = fresnel(film->index, below_index, p);
      r = first ? interface : (interface + r * phase) / (1.0 + interface * r * phase);
      phase = std::exp(C(0, 4 * std::numbers::pi * film->thickness_nm / wavelength_nm) * q(film->index));
      below_index = film->index;
      first = false;
    }
    const C top = fresnel(1.0, below_index, p);
    r = first ? top : (top + r * phase) / (1.0 + top * r * phase);
    rho[p] = r;
  }
  const C ratio = rho[1] / rho[0];
  return {std::atan(std::abs(ratio)) * 180 / std::numbers::pi, std::arg(ratio) * 180 / std::numbers::pi};
}

}  // namespace gratingsim::test
