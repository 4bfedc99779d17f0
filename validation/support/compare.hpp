#pragma once
#include <cmath>
#include <complex>
#include <limits>
#include <span>

namespace gratingsim::test {

/// ‖a − b‖₂ / ‖b‖₂ in double; NaN anywhere gives +inf so it never passes a tolerance.
template <class A, class B>
double relative_l2(std::span<const std::complex<A>> a, std::span<const std::complex<B>> b) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::complex<double> x(a[i]), y(b[i]);
    if (!std::isfinite(x.real()) || !std::isfinite(x.imag())) return std::numeric_limits<double>::infinity();
    diff += std::norm(x - y);
    ref += std::norm(y);
  }
  return std::sqrt(diff / ref);
}

template <class Real>
double l2_norm(std::span<const std::complex<Real>> a) {
  double s = 0;
  for (auto z : a) s += std::norm(std::complex<double>(z));
  return std::sqrt(s);
}

/// Poison value written to outputs before a run: NaN, so an unwritten element fails the comparison.
template <class Real>
std::complex<Real> poison() {
  return {std::numeric_limits<Real>::quiet_NaN(), std::numeric_limits<Real>::quiet_NaN()};
}

}  // namespace gratingsim::test
