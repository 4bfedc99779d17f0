#pragma once
// The discretised Green operator along z (docs/formulation.md §6), applied in O(Nz·Nm) per right-hand
// side, never as a dense Nz×Nz matrix, behind an interface so a device implementation can follow.
//
// Slices p = 0..Nz−1 from the top down, centres z_p, thicknesses Δ_p, contiguous (no gaps); k1 and kz
// are those of the right-hand side's incidence (a batch may hold several wavelengths). With
// the source s_p = k1² c_p (c = χ ⊛ e from the convolution engine, or J = C ⊛ F in the
// normal-vector formulation, docs/normal-vector.md §3), per order
//   (K s)_q = (i/(2kz)) [ Σ_{p below q} (êê + p̂+p̂+) e^{ikz(z_q−z_p)} w_p s_p
//                       + Σ_{p above q} (êê + p̂−p̂−) e^{ikz(z_p−z_q)} w_p s_p
//                       + Σ_p (r_s êê + r_p p̂+p̂−) e^{ikz(z_q+z_p)} w_p s_p ]
//           + c_q [êê + (kz² t̂t̂ + kρ² ẑẑ)/k1²] s_q − ẑẑ s_q/k1²,
//   w_p = 2 sin(kzΔ_p/2)/kz,   c_q = (i/(2kz))·2(e^{ikzΔ_q/2} − 1)/(ikz) = (e^{ikzΔ_q/2} − 1)/kz².
// The two direct sums are recursive sweeps (upward: U_q = e^{ikz(z_q − z_{q+1})}(U_{q+1} + w s_{q+1}),
// downward likewise) whose every factor is e^{ikz·(positive distance)} with modulus ≤ 1, so they are
// stable for evanescent orders; nothing is ever divided by such a factor. The reflected part is one
// weighted sum broadcast back with e^{ikz z_q}.
#include <complex>
#include <memory>
#include <span>
#include <vector>

#include "convolution/convolution.hpp"
#include "physics/floquet.hpp"

namespace gratingsim::physics {

/// The slices along z, top down.
struct ZGrid {
  std::vector<double> z;          ///< slice centres
  std::vector<double> thickness;  ///< Δ_p
  [[nodiscard]] int slices() const { return int(z.size()); }
};

/// Per (incidence, order, slice) coefficients of K, host side in complex128. The incidences may be of
/// several members (a batch, problem.hpp): they come in `members` runs of equally many incidences,
/// each run one wavelength (its own k1 and kz) on its member's grid; the grids have equally many
/// slices (a geometry batch's members differ in thicknesses, hence in z).
struct GreenCoefficients {
  int incidences = 0, orders = 0, slices = 0;
  int members = 1;                             ///< runs of one member, incidences / members each
  std::vector<double> k1;                      ///< [incidence]: the superstrate wavenumber 2π n1/λ
  std::vector<ZGrid> grids;                    ///< [member]: the slices the tables are for
  std::vector<Complex> kz, rs, rp;             ///< [incidence·orders + m]
  std::vector<double> tx, ty, krho;            ///< [incidence·orders + m]
  std::vector<Complex> step, weight, self;     ///< [(incidence·orders + m)·slices + p]:
                                               ///< step = e^{ikz(z_{p−1} − z_p)} (p ≥ 1; 0 at p = 0),
                                               ///< weight = w_p = Δ_p sinc(kzΔ_p/2), self = c_p = (e^{ikzΔ_p/2} − 1)/kz²
  std::vector<Complex> depth;                  ///< same index: e^{ikz z_p}
};

/// The member (wavelength run) of incidence a.
[[nodiscard]] inline int member_of(const GreenCoefficients& g, int a) { return a / (g.incidences / g.members); }

/// Which tables green_coefficients fills: the per-slice ones too (host z-operator, preconditioners),
/// or only the per-order ones (a device z-operator computes its per-slice tables on the device).
enum class SliceTables { host, none };

/// One member per grid: the incidences come in grids.size() runs of equally many, run w on grids[w]
/// (all grids equally many slices; InvalidArgument otherwise). Every incidence has the same number of
/// orders.
GreenCoefficients green_coefficients(std::span<const ZGrid> grids, std::span<const FloquetOrders> incidences,
                                     SliceTables tables = SliceTables::host);
/// Every member on one grid (the wavelengths of one structure): the members are the runs as long as
/// the first run of equal vacuum wavenumber k0 (one wavelength); each must hold one k0
/// (InvalidArgument otherwise).
GreenCoefficients green_coefficients(const ZGrid& grid, std::span<const FloquetOrders> incidences,
                                     SliceTables tables = SliceTables::host);

/// The component of the convolution output holding D_axis when D has the components of the mask
/// `d_axes` (bit i: D_i present; they follow J's three in increasing axis order), or −1 where absent.
constexpr int d_output(unsigned d_axes, int axis) {
  if (!(d_axes >> axis & 1u)) return -1;
  int below = 0;
  for (int i = 0; i < axis; ++i) below += int(d_axes >> i & 1u);
  return 3 + below;
}
/// The axis whose D component output `output` (≥ 3) holds under `d_axes`, or −1: d_output's inverse.
constexpr int d_axis(unsigned d_axes, int output) {
  for (int axis = 0; axis < 3; ++axis)
    if (d_output(d_axes, axis) == output) return axis;
  return -1;
}

template <class Real>
class ZOperator {
 public:
  using Complex = std::complex<Real>;
  virtual ~ZOperator() = default;
  /// y ← x + D − K (k1² J) for every right-hand side (k1 of the rhs's incidence), x and y in the batched layout of
  /// vector_space.hpp and in memory(). c is the convolution output with S = 3 + (D's components)
  /// components per (slice, rhs) block: element (p, r, comp, m) at (p·n_rhs + r)·S·orders +
  /// comp·orders + m; components 0..2 are the source J (Laurent: χ ⊛ e), then D's components in
  /// increasing axis order (d_axes), each added to y's component of its axis (docs/normal-vector.md §2:
  /// (M F) = F + D).
  /// x and y may be the same buffer; c must not alias y.
  virtual void apply(const Complex* x, const Complex* c, Complex* y, Stream stream) = 0;
  /// The far-field sums of the source s = k1² c[0..2] (c in memory(), apply()'s layout) for every
  /// (rhs r, order m), in complex128, to the host array `sums` at (r·orders + m)·4 + {0, 1, 2, 3}:
  ///   ue = Σ_p w_p ((ê·s_p) e^{−ikz z_p} + r_s (ê·s_p) e^{ikz z_p}),
  ///   up = Σ_p w_p ((p̂+·s_p) e^{−ikz z_p} + r_p (p̂−·s_p) e^{ikz z_p})   (0 unless the order propagates up),
  ///   de = Σ_p w_p (ê·s_p) e^{ikz z_p},   dp = Σ_p w_p (p̂−·s_p) e^{ikz z_p},
  /// p̂± = (±(kz/k1) t̂, −kρ/k1), sums over the slices in order (docs/formulation.md §8: the reflected
  /// and transmitted amplitudes are the incident ones plus i/(2kz) times these). Waits for `stream`.
  virtual void far_field_sums(const Complex* c, std::complex<double>* sums, Stream stream) = 0;
  [[nodiscard]] virtual Memory memory() const = 0;
};

/// Host implementation: OpenMP over (rhs, order) pairs, sweeps in complex128.
/// rhs_incidence[r] names the incidence (index into the coefficients) of right-hand side r.
/// d_axes: the components of D in c, a mask (normal_field.hpp's d_axes(): 0 Laurent, 0b001 1D,
/// 0b101 1D tilted, 0b011 2D normal-vector).
template <class Real>
std::unique_ptr<ZOperator<Real>> make_host_z_operator(GreenCoefficients coefficients, std::vector<int> rhs_incidence,
                                                      unsigned d_axes = 0);

}  // namespace gratingsim::physics
