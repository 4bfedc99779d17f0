#include "physics/floquet.hpp"

#include <cmath>
#include <numbers>
#include <set>
#include <sstream>

#include "core/error.hpp"

namespace gratingsim::physics {
namespace {
/// sqrt on the branch Im ≥ 0, and Re ≥ 0 when the result is real.
Complex kz_branch(Complex kz2) {
  Complex kz = std::sqrt(kz2);
  if (kz.imag() < 0 || (kz.imag() == 0 && kz.real() < 0)) kz = -kz;
  return kz;
}
}  // namespace

FloquetOrders floquet_orders(const Lattice& lattice, const Incidence& incidence, Complex eps1, Complex eps2,
                             int m1_max, int m2_max, double rayleigh_tolerance, std::vector<std::string>& warnings) {
  constexpr double pi = std::numbers::pi;
  GS_EXPECTS(incidence.wavelength > 0, "wavelength must be positive, got " + std::to_string(incidence.wavelength));
  GS_EXPECTS(incidence.theta_deg >= 0 && incidence.theta_deg < 90,
          "polar angle θ must be in [0°, 90°), got " + std::to_string(incidence.theta_deg));
  GS_EXPECTS(eps1.imag() == 0 && eps1.real() > 0,
          "the superstrate must be lossless with ε1 > 0 (docs/formulation.md §1), got ε1 = (" +
              std::to_string(eps1.real()) + ", " + std::to_string(eps1.imag()) + ")");
  GS_EXPECTS(m1_max >= 0 && m2_max >= 0, "harmonic counts M1, M2 must be ≥ 0");
  GS_EXPECTS(!lattice.one_dimensional() || m2_max == 0, "a 1D lattice needs M2 = 0");
  GS_EXPECTS(lattice.rotation_deg == 0,
             "Floquet orders are built in the grating's frame: a rotated lattice is solved unrotated at φ − α "
             "(solve())");

  FloquetOrders f;
  f.m1_max = m1_max;
  f.m2_max = m2_max;
  f.k0 = 2 * pi / incidence.wavelength;
  f.k1 = f.k0 * std::sqrt(eps1.real());
  f.eps1 = eps1;
  f.eps2 = eps2;
  f.k2 = f.k0 * std::sqrt(eps2);
  if (f.k2.imag() < 0) f.k2 = -f.k2;
  f.substrate_lossless = eps2.imag() == 0 && eps2.real() > 0;
  const double theta = incidence.theta_deg * pi / 180, phi = incidence.phi_deg * pi / 180;
  const double kx0 = f.k1 * std::sin(theta) * std::cos(phi), ky0 = f.k1 * std::sin(theta) * std::sin(phi);
  const double gx = 2 * pi / lattice.period_x, gy = lattice.one_dimensional() ? 0.0 : 2 * pi / lattice.period_y;

  for (int m1 = -m1_max; m1 <= m1_max; ++m1)
    for (int m2 = -m2_max; m2 <= m2_max; ++m2) {
      Order o;
      o.m1 = m1;
      o.m2 = m2;
      o.kx = kx0 + gx * m1;
      o.ky = ky0 + gy * m2;
      o.krho = std::hypot(o.kx, o.ky);
      if (o.krho > 1e-14 * f.k1) {
        o.tx = o.kx / o.krho;
        o.ty = o.ky / o.krho;
      } else {  // normal incidence on this order: the plane of incidence is fixed by φ
        o.krho = 0;
        o.tx = std::cos(phi);
        o.ty = std::sin(phi);
      }
      o.kz1 = kz_branch(f.k1 * f.k1 - o.krho * o.krho);
      if (std::abs(o.kz1) < rayleigh_tolerance * f.k1) {
        const double d = rayleigh_tolerance * f.k1;
        const Complex moved = kz_branch(Complex(f.k1 * f.k1 - o.krho * o.krho, d * d));
        std::ostringstream os;
        os << "Rayleigh anomaly: order (" << m1 << ", " << m2 << ") at λ = " << incidence.wavelength
           << ", θ = " << incidence.theta_deg << "°, φ = " << incidence.phi_deg << "° has |kz1| = "
           << std::abs(o.kz1) << " < " << rayleigh_tolerance << "·k1; kz1 perturbed to (" << moved.real() << ", "
           << moved.imag() << ")";
        warnings.push_back(os.str());
        o.kz1 = moved;
        o.perturbed = true;
      }
      o.kz2 = kz_branch(f.k2 * f.k2 - o.krho * o.krho);
      o.rs = (o.kz1 - o.kz2) / (o.kz1 + o.kz2);
      o.rp = (o.kz1 * eps2 - o.kz2 * eps1) / (o.kz1 * eps2 + o.kz2 * eps1);
      o.ts = 1.0 + o.rs;
      o.tp = (f.k1 / f.k2) * (1.0 + o.rp);
      f.orders.push_back(o);
    }
  return f;
}

std::vector<std::array<int, 2>> propagating_orders(const Structure& structure, std::span<const double> wavelengths,
                                                   std::span<const double> theta_deg, std::span<const double> phi_deg,
                                                   int m1_max, int m2_max, double rayleigh_tolerance) {
  std::set<std::array<int, 2>> found;
  std::vector<std::string> warnings;  // Rayleigh anomalies: the solve reports them
  // A rotated 1D grating's orders are those of the unrotated one at φ − α (solve() solves it so).
  Lattice frame = structure.lattice;
  frame.rotation_deg = 0;
  for (const double wavelength : wavelengths) {
    const Complex eps1 = structure.superstrate.permittivity(wavelength);
    const Complex eps2 = structure.substrate.permittivity(wavelength);
    for (const double theta : theta_deg)
      for (const double phi : phi_deg) {
        const FloquetOrders f = floquet_orders(frame, {wavelength, theta, phi - structure.lattice.rotation_deg}, eps1,
                                               eps2, m1_max, m2_max, rayleigh_tolerance, warnings);
        for (const Order& o : f.orders)
          if (o.propagates_up() || f.propagates_down(o)) found.insert({o.m1, o.m2});
        warnings.clear();
      }
  }
  return {found.begin(), found.end()};
}

}  // namespace gratingsim::physics
