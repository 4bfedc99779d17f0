#pragma once
// Independent thin-film reference for the physics tests: the recursive Airy formula of
// docs/reference-cases.md §2, r = (r12 + r23 e^{2iβ})/(1 + r12 r23 e^{2iβ}), applied from the
// substrate upwards through any number of films (exp(−iωt), Im n ≥ 0 for loss).
#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

namespace gratingsim::test {

struct Film {
  std::complex<double> index;
  double thickness;
};

/// The reflection amplitude r for s (p = false) or p polarisation, phase reference at the top
/// film's upper interface; films listed from the incidence side down. The p sign convention is
/// docs/reference-cases.md §2's, r_jk = (n_k c_j − n_j c_k)/(n_k c_j + n_j c_k) (r_p = −r_s at normal incidence).
inline std::complex<double> airy_reflection(std::complex<double> n_in, const std::vector<Film>& films, std::complex<double> n_sub,
                               double wavelength, double theta_deg, bool p) {
  using C = std::complex<double>;
  const C s0 = n_in * std::sin(theta_deg * std::numbers::pi / 180);
  std::vector<C> n{n_in};
  for (const Film& f : films) n.push_back(f.index);
  n.push_back(n_sub);
  // c_j = cos θ_j on the branch Im(n_j c_j) ≥ 0 (decay away from the interface for evanescent waves).
  std::vector<C> c(n.size());
  for (std::size_t j = 0; j < n.size(); ++j) {
    C nc = std::sqrt(n[j] * n[j] - s0 * s0);
    if (nc.imag() < 0 || (nc.imag() == 0 && nc.real() < 0)) nc = -nc;
    c[j] = nc / n[j];
  }
  const auto r = [&](std::size_t j, std::size_t k) {
    return p ? (n[k] * c[j] - n[j] * c[k]) / (n[k] * c[j] + n[j] * c[k])
             : (n[j] * c[j] - n[k] * c[k]) / (n[j] * c[j] + n[k] * c[k]);
  };
  C gamma = r(n.size() - 2, n.size() - 1);
  for (std::size_t j = n.size() - 2; j >= 1; --j) {
    const C beta = 2 * std::numbers::pi * n[j] * films[j - 1].thickness * c[j] / wavelength;
    const C e = std::exp(C(0, 2) * beta);
    gamma = (r(j - 1, j) + gamma * e) / (1.0 + r(j - 1, j) * gamma * e);
  }
  return gamma;
}

inline double airy_reflectance(std::complex<double> n_in, const std::vector<Film>& films, std::complex<double> n_sub,
                               double wavelength, double theta_deg, bool p) {
  return std::norm(airy_reflection(n_in, films, n_sub, wavelength, theta_deg, p));
}

}  // namespace gratingsim::test
