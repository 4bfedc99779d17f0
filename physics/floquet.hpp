#pragma once
// Floquet orders of one incidence (docs/formulation.md §2, §4): lateral wavevectors, kz in both media,
// the per-order s/p basis and the Fresnel coefficients of the bare superstrate/substrate interface.
#include <array>
#include <span>
#include <string>
#include <vector>

#include "physics/materials.hpp"
#include "physics/structure.hpp"

namespace gratingsim::physics {

/// One order m = (m1, m2). Basis (algebraic, never conjugated): t̂ = (kx, ky, 0)/kρ (at kρ = 0:
/// (cosφ, sinφ, 0)), ê = ẑ × t̂ (s, TE), p̂± = (±kz t̂ − kρ ẑ)/k (p, TM; + up-going, − down-going).
struct Order {
  int m1 = 0, m2 = 0;
  double kx = 0, ky = 0, krho = 0;
  double tx = 1, ty = 0;  ///< t̂
  Complex kz1, kz2;       ///< sqrt(k_j² − kρ²), branch Im ≥ 0 (Re ≥ 0 when real)
  Complex rs, rp, ts, tp; ///< Fresnel: r_s = (kz1−kz2)/(kz1+kz2), r_p = (kz1ε2−kz2ε1)/(kz1ε2+kz2ε1),
                          ///< t_s = 1 + r_s, t_p = (k1/k2)(1 + r_p)
  bool perturbed = false; ///< kz1 was moved off a Rayleigh anomaly
  [[nodiscard]] bool propagates_up() const { return kz1.imag() == 0 && kz1.real() > 0; }
};

struct FloquetOrders {
  int m1_max = 0, m2_max = 0;   ///< M1, M2
  double k0 = 0, k1 = 0;        ///< vacuum and superstrate wavenumbers (k1 real: lossless superstrate)
  Complex eps1, eps2, k2;
  bool substrate_lossless = true;
  std::vector<Order> orders;    ///< (m1 + M1)·(2M2 + 1) + (m2 + M2), the engine's harmonic layout
  [[nodiscard]] std::size_t zeroth() const { return std::size_t(m1_max) * (2 * m2_max + 1) + m2_max; }
  [[nodiscard]] bool propagates_down(const Order& o) const {
    return substrate_lossless && o.kz2.imag() == 0 && o.kz2.real() > 0;
  }
};

/// Builds the orders of `incidence` (θ ∈ [0°, 90°)) on an unrotated lattice (rotation_deg = 0: the
/// grating's own frame). Orders with |kz1| < rayleigh_tolerance·k1
/// (a Rayleigh anomaly: the 1D Green function ~ 1/kz is singular) get kz1 = sqrt(k1² − kρ² +
/// i(tol·k1)²) instead, and a line is appended to `warnings`.
FloquetOrders floquet_orders(const Lattice& lattice, const Incidence& incidence, Complex eps1, Complex eps2,
                             int m1_max, int m2_max, double rayleigh_tolerance, std::vector<std::string>& warnings);

/// Every order (m1, m2) of [−M1, M1] × [−M2, M2] that propagates up (into the superstrate) or down
/// (into a lossless substrate) at some point of the sweep wavelengths × θ × φ, sorted by (m1, m2):
/// the orders whose efficiencies a sweep can report, known before any solve (φ in the lab frame: a
/// rotated 1D grating's orders are found at φ − rotation_deg, as solve() solves it). Rayleigh anomalies are
/// not reported here (the solve of the point reports them).
std::vector<std::array<int, 2>> propagating_orders(const Structure& structure, std::span<const double> wavelengths,
                                                   std::span<const double> theta_deg, std::span<const double> phi_deg,
                                                   int m1_max, int m2_max, double rayleigh_tolerance);

}  // namespace gratingsim::physics
