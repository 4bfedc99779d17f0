#include "physics/z_operator.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "physics/distinct_values.hpp"

namespace gratingsim::physics {
namespace {

constexpr Complex I{0.0, 1.0};

/// sin(u)/u for complex u, accurate near 0.
Complex sinc(Complex u) { return std::abs(u) < 1e-4 ? 1.0 - u * u / 6.0 : std::sin(u) / u; }
/// e^{u} − 1 for complex u without cancellation near 0.
Complex expm1(Complex u) {
  const double s = std::sin(u.imag() / 2);
  return {std::expm1(u.real()) * std::cos(u.imag()) - 2 * s * s, std::exp(u.real()) * std::sin(u.imag())};
}

}  // namespace

// The per-slice tables depend on kz and the grid only, so they are computed once per distinct kz
// (orders of equal kz bit for bit, distinct_values.hpp: m2 and −m2 at φ = 0, the diagonal mirror of a
// square lattice at normal incidence) and copied to the others, and within a row once per run of equal
// thicknesses (weight, self) or equal centre distances (step); in parallel over the distinct kz. Each
// entry is the same expression of the same inputs as a direct per-entry evaluation, so the tables
// equal it bit for bit, whatever the thread count (issue #15: this was 0.22 s of problem case 3 on
// the GPU path, serial).
GreenCoefficients green_coefficients(std::span<const ZGrid> grids, std::span<const FloquetOrders> incidences,
                                     SliceTables tables) {
  GS_EXPECTS(!incidences.empty(), "green_coefficients: no incidence");
  GS_EXPECTS(!grids.empty() && incidences.size() % grids.size() == 0,
             "green_coefficients: the incidences must come in one run per grid, equally many per grid");
  GreenCoefficients g;
  g.incidences = int(incidences.size());
  g.orders = int(incidences[0].orders.size());
  g.slices = grids[0].slices();
  g.members = int(grids.size());
  g.grids.assign(grids.begin(), grids.end());
  GS_EXPECTS(g.slices >= 1, "green_coefficients: no slices");
  for (const ZGrid& grid : grids)
    GS_EXPECTS(grid.slices() == g.slices && grid.thickness.size() == grid.z.size(),
               "green_coefficients: the members' grids must have equally many slices");
  g.k1.resize(incidences.size());
  const std::size_t n_io = std::size_t(g.incidences) * g.orders, n = n_io * g.slices, nz = std::size_t(g.slices);
  g.kz.resize(n_io);
  g.rs.resize(n_io);
  g.rp.resize(n_io);
  g.tx.resize(n_io);
  g.ty.resize(n_io);
  g.krho.resize(n_io);
  for (int a = 0; a < g.incidences; ++a) {
    GS_EXPECTS(int(incidences[a].orders.size()) == g.orders, "green_coefficients: incidences of one batch must share the orders");
    g.k1[a] = incidences[a].k1;
    for (int m = 0; m < g.orders; ++m) {
      const Order& o = incidences[a].orders[m];
      const std::size_t io = std::size_t(a) * g.orders + m;
      g.kz[io] = o.kz1;
      g.rs[io] = o.rs;
      g.rp[io] = o.rp;
      g.tx[io] = o.tx;
      g.ty[io] = o.ty;
      g.krho[io] = o.krho;
    }
  }
  if (tables == SliceTables::none) return g;
  g.step.resize(n);
  g.weight.resize(n);
  g.self.resize(n);
  g.depth.resize(n);
  // Per member (its own grid): one row of tables per distinct kz of its incidences (the first
  // (incidence, order) that has it), then copies. Within a row, weight and self depend on Δ_p only and
  // step on z_{p−1} − z_p only: an equal argument (a layer's uniform slices) reuses the previous slice's
  // value, which is what the expression would give again.
  const std::size_t per_member = n_io / grids.size();
  for (std::size_t w = 0; w < grids.size(); ++w) {
    const ZGrid& grid = grids[w];
    const std::size_t first_io = w * per_member;
    const DistinctValues distinct = distinct_values(std::span<const Complex>(g.kz).subspan(first_io, per_member));
    const std::ptrdiff_t rows = std::ptrdiff_t(distinct.first.size());
#pragma omp parallel for schedule(dynamic, 8) if (std::size_t(rows) * nz >= 4096)
    for (std::ptrdiff_t u = 0; u < rows; ++u) {
      const std::size_t io = first_io + distinct.first[std::size_t(u)], row = io * nz;
      const Complex kz = g.kz[io];
      for (std::size_t p = 0; p < nz; ++p) {
        const std::size_t i = row + p;
        const double d = grid.thickness[p];
        if (p == 0) {
          g.step[i] = Complex(0);
        } else if (p >= 2 && grid.z[p - 1] - grid.z[p] == grid.z[p - 2] - grid.z[p - 1]) {
          g.step[i] = g.step[i - 1];
        } else {
          g.step[i] = std::exp(I * kz * (grid.z[p - 1] - grid.z[p]));  // e^{ikz(z_{p−1} − z_p)}
        }
        if (p >= 1 && d == grid.thickness[p - 1]) {
          g.weight[i] = g.weight[i - 1];
          g.self[i] = g.self[i - 1];
        } else {
          g.weight[i] = d * sinc(kz * d / 2.0);            // 2 sin(kzΔ/2)/kz
          g.self[i] = expm1(I * kz * d / 2.0) / (kz * kz);  // (e^{ikzΔ/2} − 1)/kz²
        }
        g.depth[i] = std::exp(I * kz * grid.z[p]);  // e^{ikz z_p}
      }
    }
    const std::ptrdiff_t n_rows = std::ptrdiff_t(per_member);
#pragma omp parallel for schedule(static) if (per_member * nz >= 65536)
    for (std::ptrdiff_t k = 0; k < n_rows; ++k) {
      const std::size_t from = (first_io + distinct.first[distinct.class_of[std::size_t(k)]]) * nz,
                        to = (first_io + std::size_t(k)) * nz;
      if (from == to) continue;
      for (std::vector<Complex>* table : {&g.step, &g.weight, &g.self, &g.depth})
        std::copy_n(table->begin() + std::ptrdiff_t(from), nz, table->begin() + std::ptrdiff_t(to));
    }
  }
  return g;
}

GreenCoefficients green_coefficients(const ZGrid& grid, std::span<const FloquetOrders> incidences,
                                     SliceTables tables) {
  GS_EXPECTS(!incidences.empty(), "green_coefficients: no incidence");
  // Members: runs of equal k0 (one wavelength each), equally long.
  std::size_t run = 1;
  while (run < incidences.size() && incidences[run].k0 == incidences[0].k0) ++run;
  const std::string runs = "green_coefficients: the incidences must come in runs of one wavelength, equally many per wavelength";
  GS_EXPECTS(incidences.size() % run == 0, runs);
  for (std::size_t a = 0; a < incidences.size(); ++a) GS_EXPECTS(incidences[a].k0 == incidences[a / run * run].k0, runs);
  const std::vector<ZGrid> grids(incidences.size() / run, grid);
  return green_coefficients(grids, incidences, tables);
}

namespace {

template <class Real>
class HostZOperator final : public ZOperator<Real> {
 public:
  using typename ZOperator<Real>::Complex;
  HostZOperator(GreenCoefficients g, std::vector<int> rhs_incidence, unsigned d_axes)
      : g_(std::move(g)), rhs_(std::move(rhs_incidence)), d_axes_(d_axes), source_components_(3 + std::popcount(d_axes)) {
    for (int a : rhs_) GS_EXPECTS(a >= 0 && a < g_.incidences, "z-operator: rhs names an unknown incidence");
    GS_EXPECTS(d_axes < 8, "z-operator: D's components are a mask of x, y, z, got " + std::to_string(d_axes));
  }

  [[nodiscard]] Memory memory() const override { return Memory::host; }

  void apply(const Complex* x, const Complex* c, Complex* y, Stream) override {
    const int nm = g_.orders, nz = g_.slices, nr = int(rhs_.size());
    const std::ptrdiff_t pairs = std::ptrdiff_t(nr) * nm;
#pragma omp parallel for schedule(static) if (pairs * nz >= 4096)
    for (std::ptrdiff_t rm = 0; rm < pairs; ++rm) {
      const OrderSetup o = setup(rm);
      const C pref = I / (2.0 * o.kz);
      // Element (p, r, component, m) of the batched layout.
      const auto at = [&](int p, int comp) {
        return (std::size_t(p) * nr + o.r) * 3 * nm + std::size_t(comp) * nm + o.m;
      };
      // Field of amplitudes (ae along ê, at along t̂, az along ẑ) subtracted from y_p.
      const auto subtract = [&](int p, C ae, C at_, C az) {
        const C vx = ae * o.ex + at_ * o.tx, vy = ae * o.ey + at_ * o.ty;
        y[at(p, 0)] = Complex(C(y[at(p, 0)]) - vx);
        y[at(p, 1)] = Complex(C(y[at(p, 1)]) - vy);
        y[at(p, 2)] = Complex(C(y[at(p, 2)]) - az);
      };
      // y ← x + D (D_i at component d_output(d_axes, i) of c where present).
      int d_at[3];
      for (int comp = 0; comp < 3; ++comp) d_at[comp] = d_output(d_axes_, comp);
      for (int p = 0; p < nz; ++p)
        for (int comp = 0; comp < 3; ++comp) {
          C v = x[at(p, comp)];
          if (d_at[comp] >= 0) v += C(c[o.c_at(p, d_at[comp])]);
          y[at(p, comp)] = Complex(v);
        }

      // Upward sweep (bottom to top): U = Σ_{p below q} e^{ikz(z_q − z_p)} w_p (ê·s_p, p̂+·s_p); also the
      // reflected sums Σ_p e^{ikz z_p} w_p (r_s ê·s_p, r_p p̂−·s_p), and the self term.
      C ue = 0, up = 0, re = 0, rpm = 0;
      Projections below{};
      for (int q = nz - 1; q >= 0; --q) {
        if (q < nz - 1) {
          const C s = o.step[q + 1];  // e^{ikz(z_q − z_{q+1})}
          ue = s * (ue + o.weight[q + 1] * below.e);
          up = s * (up + o.weight[q + 1] * o.plus(below));
        }
        const Projections sq = o.source(c, q);
        re += o.depth[q] * o.weight[q] * o.rs * sq.e;
        rpm += o.depth[q] * o.weight[q] * o.rp * o.minus(sq);
        // pref (ê ue + p̂+ up) + c_q [ê(ê·s) + (kz² t̂(t̂·s) + kρ² ẑ(ẑ·s))/k1²] − ẑ(ẑ·s)/k1²
        const C cq = o.self[q];
        subtract(q, pref * ue + cq * sq.e, pref * up * o.pt + cq * o.kz * o.kz * sq.t / o.k1sq,
                 pref * up * o.pz + cq * o.kr * o.kr * sq.z / o.k1sq - sq.z / o.k1sq);
        below = sq;
      }
      // Downward sweep (top to bottom): D = Σ_{p above q} e^{ikz(z_p − z_q)} w_p (ê·s_p, p̂−·s_p), plus the
      // reflected part e^{ikz z_q} (ê re + p̂+ rpm).
      C de = 0, dp = 0;
      Projections above{};
      for (int q = 0; q < nz; ++q) {
        if (q > 0) {
          const C s = o.step[q];  // e^{ikz(z_{q−1} − z_q)}
          de = s * (de + o.weight[q - 1] * above.e);
          dp = s * (dp + o.weight[q - 1] * o.minus(above));
        }
        const C dq = o.depth[q];
        subtract(q, pref * (de + dq * re), pref * (-o.pt * dp + o.pt * dq * rpm),
                 pref * (o.pz * dp + o.pz * dq * rpm));
        above = o.source(c, q);
      }
    }
  }

  void far_field_sums(const Complex* c, std::complex<double>* sums, Stream) override {
    const int nm = g_.orders, nz = g_.slices, nr = int(rhs_.size());
    const std::ptrdiff_t pairs = std::ptrdiff_t(nr) * nm;
#pragma omp parallel for schedule(static) if (pairs * nz >= 4096)
    for (std::ptrdiff_t rm = 0; rm < pairs; ++rm) {
      const OrderSetup o = setup(rm);
      const bool up = o.kz.imag() == 0 && o.kz.real() > 0;  // Order::propagates_up
      C ue = 0, upp = 0, de = 0, dp = 0;
      for (int p = 0; p < nz; ++p) {
        const Projections s = o.source(c, p);
        const C s_plus = o.plus(s), s_minus = o.minus(s);
        const C w = o.weight[p], d = o.depth[p];
        de += w * s.e * d;
        dp += w * s_minus * d;
        if (up) {  // e^{−ikz z_p} = conj(e^{ikz z_p}) for a real kz
          const C back = std::conj(d);
          ue += w * (s.e * back + o.rs * s.e * d);
          upp += w * (s_plus * back + o.rp * s_minus * d);
        }
      }
      C* out = sums + std::size_t(rm) * 4;
      out[0] = ue;
      out[1] = upp;
      out[2] = de;
      out[3] = dp;
    }
  }

 private:
  using C = std::complex<double>;
  struct Projections {
    C e, t, z;  // ê·s, t̂·s, ẑ·s of the source s = k1² c
  };
  /// What apply and far_field_sums both derive for right-hand side r and order m: the order's
  /// coefficients, its polarisation frame, its rows of the slice tables, and the source's projections
  /// on that frame (computed here once, so that both read the same numbers the same way).
  struct OrderSetup {
    int r, m, nr, nm, sc;
    double k1sq;
    C kz, rs, rp;
    double tx, ty, kr;
    double ex, ey;  // ê = ẑ × t̂
    C pt;           // p̂± = (±pt t̂, pz ẑ): pt = kz/k1, pz = −kρ/k1
    double pz;
    const C *step, *weight, *self, *depth;  // the rows of (incidence, m), slice p at [p]
    /// Element (p, r, component, m) of the convolution output c (sc components per block).
    [[nodiscard]] std::size_t c_at(int p, int comp) const {
      return (std::size_t(p) * nr + r) * sc * nm + std::size_t(comp) * nm + m;
    }
    /// The projections of slice p's source s = k1² c[0..2].
    [[nodiscard]] Projections source(const Complex* c, int p) const {
      const C sx = k1sq * C(c[c_at(p, 0)]), sy = k1sq * C(c[c_at(p, 1)]), sz = k1sq * C(c[c_at(p, 2)]);
      return {ex * sx + ey * sy, tx * sx + ty * sy, sz};
    }
    [[nodiscard]] C plus(const Projections& s) const { return pt * s.t + pz * s.z; }    // p̂+·s
    [[nodiscard]] C minus(const Projections& s) const { return -pt * s.t + pz * s.z; }  // p̂−·s
  };
  /// The set-up of pair rm = r·orders + m.
  [[nodiscard]] OrderSetup setup(std::ptrdiff_t rm) const {
    const int nm = g_.orders, r = int(rm / nm), m = int(rm % nm);
    const std::size_t io = std::size_t(rhs_[r]) * nm + m, row = io * std::size_t(g_.slices);
    const double k1 = g_.k1[std::size_t(rhs_[r])], tx = g_.tx[io], ty = g_.ty[io], kr = g_.krho[io];
    const C kz = g_.kz[io];
    return {.r = r, .m = m, .nr = int(rhs_.size()), .nm = nm, .sc = source_components_, .k1sq = k1 * k1,
            .kz = kz, .rs = g_.rs[io], .rp = g_.rp[io], .tx = tx, .ty = ty, .kr = kr, .ex = -ty, .ey = tx,
            .pt = kz / k1, .pz = -kr / k1, .step = &g_.step[row], .weight = &g_.weight[row], .self = &g_.self[row],
            .depth = &g_.depth[row]};
  }

  GreenCoefficients g_;
  std::vector<int> rhs_;
  unsigned d_axes_;
  int source_components_;
};

}  // namespace

template <class Real>
std::unique_ptr<ZOperator<Real>> make_host_z_operator(GreenCoefficients coefficients, std::vector<int> rhs_incidence,
                                                      unsigned d_axes) {
  return std::make_unique<HostZOperator<Real>>(std::move(coefficients), std::move(rhs_incidence), d_axes);
}
template std::unique_ptr<ZOperator<float>> make_host_z_operator<float>(GreenCoefficients, std::vector<int>, unsigned);
template std::unique_ptr<ZOperator<double>> make_host_z_operator<double>(GreenCoefficients, std::vector<int>, unsigned);

}  // namespace gratingsim::physics
