#include "physics/z_operator.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <array>
#include <string>
#include <utility>

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
  // 2 sin(kzΔ/2)/kz grows like e^{|Im kz|Δ/2}: beyond |Im kz|Δ ≈ 1420 it overflows and the solve would end in
  // NaN. io/case.cpp refuses such slicings at the case file's line; this names the slice for library callers.
  for (std::size_t i = 0; i < g.weight.size(); ++i)
    if (!std::isfinite(g.weight[i].real()) || !std::isfinite(g.weight[i].imag())) {
      const std::size_t io = i / nz, p = i % nz;
      const Complex kz = g.kz[io];
      GS_EXPECTS(false, "slice " + std::to_string(p) + " is too thick for order " + std::to_string(io % g.orders) +
                            " of incidence " + std::to_string(io / g.orders) + ": |Im kz| Δz = " +
                            std::to_string(std::abs(kz.imag()) * grids[io / per_member].thickness[p]) +
                            ", beyond what its slice integrals hold in double precision (about 1420); use thinner "
                            "slices or fewer harmonics");
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
    // apply()'s copies of the per-slice tables, by (incidence, slice) rows over the orders, real and imaginary
    // parts apart.
    const std::size_t nm = std::size_t(g_.orders), nz = std::size_t(g_.slices), n = std::size_t(g_.incidences) * nm * nz;
    const std::pair<std::vector<C>*, std::array<std::vector<double>*, 2>> tables[] = {
        {&g_.step, {&step_re_, &step_im_}}, {&g_.weight, {&weight_re_, &weight_im_}},
        {&g_.self, {&self_re_, &self_im_}}, {&g_.depth, {&depth_re_, &depth_im_}}};
    for (const auto& [from, to] : tables) {
      GS_EXPECTS(from->size() == n, "z-operator: the host z-operator needs the per-slice tables");
      to[0]->resize(n);
      to[1]->resize(n);
      for (std::size_t a = 0; a < std::size_t(g_.incidences); ++a)
        for (std::size_t m = 0; m < nm; ++m)
          for (std::size_t p = 0; p < nz; ++p) {
            const C v = (*from)[(a * nm + m) * nz + p];
            (*to[0])[(a * nz + p) * nm + m] = v.real();
            (*to[1])[(a * nz + p) * nm + m] = v.imag();
          }
      std::vector<C>().swap(*from);  // read from the copies only
    }
  }

  [[nodiscard]] Memory memory() const override { return Memory::host; }

  // apply() runs the sweeps of formulation.md §6 for `lanes` consecutive orders of one right-hand side at once:
  // every array it reads at a slice (x, c, y and the transposed tables) holds those orders at consecutive
  // addresses, and the inner loops over the lanes are branch-free complex128 arithmetic, which the compiler
  // vectorizes. Each (rhs, order) takes the same operations in the same order as a serial sweep would, and
  // its lane depends only on its order index, so its result does not depend on the batch.
  void apply(const Complex* x, const Complex* c, Complex* y, Stream) override {
    const int nm = g_.orders, nz = g_.slices, nr = int(rhs_.size()), sc = source_components_;
    const int blocks = (nm + lanes - 1) / lanes;
    const std::ptrdiff_t tasks = std::ptrdiff_t(nr) * blocks;
    int d_at[3];
    for (int comp = 0; comp < 3; ++comp) d_at[comp] = d_output(d_axes_, comp);
    using R = Real;
#pragma omp parallel for schedule(static) if (std::ptrdiff_t(nr) * nm * nz >= 4096)
    for (std::ptrdiff_t task = 0; task < tasks; ++task) {
      const int r = int(task / blocks), m0 = int(task % blocks) * lanes, n = std::min(lanes, nm - m0);
      const int a = rhs_[std::size_t(r)];
      const double k1sq = setup(std::ptrdiff_t(r) * nm + m0).k1sq;
      // Per lane: the order's frame and coefficients (setup()'s), pref = i/(2kz), kz²/k1², kρ²/k1².
      alignas(64) double ex[lanes], ey[lanes], tx[lanes], ty[lanes], pz[lanes], kr2[lanes];
      alignas(64) double pt_re[lanes], pt_im[lanes], pref_re[lanes], pref_im[lanes], kz2_re[lanes], kz2_im[lanes];
      alignas(64) double rs_re[lanes], rs_im[lanes], rp_re[lanes], rp_im[lanes];
      for (int l = 0; l < n; ++l) {
        const OrderSetup o = setup(std::ptrdiff_t(r) * nm + m0 + l);
        const C pref = I / (2.0 * o.kz), kz2 = o.kz * o.kz / k1sq;
        tx[l] = o.tx, ty[l] = o.ty, ex[l] = o.ex, ey[l] = o.ey, pz[l] = o.pz;
        kr2[l] = o.kr * o.kr / k1sq;
        pt_re[l] = o.pt.real(), pt_im[l] = o.pt.imag();
        pref_re[l] = pref.real(), pref_im[l] = pref.imag();
        kz2_re[l] = kz2.real(), kz2_im[l] = kz2.imag();
        rs_re[l] = o.rs.real(), rs_im[l] = o.rs.imag();
        rp_re[l] = o.rp.real(), rp_im[l] = o.rp.imag();
      }
      // Field component `comp` of slice p at lane 0 (x, y), and of the convolution output c.
      const auto at = [&](int p, int comp) { return (std::size_t(p) * nr + r) * 3 * nm + std::size_t(comp) * nm + m0; };
      const auto c_at = [&](int p, int comp) { return (std::size_t(p) * nr + r) * sc * nm + std::size_t(comp) * nm + m0; };
      const auto table = [&](const std::vector<double>& t, int p) { return t.data() + (std::size_t(a) * nz + p) * nm + m0; };
      // y ← x + D (D_i at component d_at[i] of c where present).
      for (int p = 0; p < nz; ++p)
        for (int comp = 0; comp < 3; ++comp) {
          const R* xs = reinterpret_cast<const R*>(x + at(p, comp));
          R* ys = reinterpret_cast<R*>(y + at(p, comp));
          if (d_at[comp] < 0) {
            std::copy_n(xs, 2 * n, ys);
            continue;
          }
          const R* ds = reinterpret_cast<const R*>(c + c_at(p, d_at[comp]));
          for (int l = 0; l < 2 * n; ++l) ys[l] = R(double(xs[l]) + double(ds[l]));
        }
      // The projections ê·s, t̂·s, ẑ·s of slice p's source s = k1² c (both sweeps read them).
      alignas(64) double e_re[lanes], e_im[lanes], t_re[lanes], t_im[lanes], z_re[lanes], z_im[lanes];
      const auto project = [&](int p) {
        const R* c0 = reinterpret_cast<const R*>(c + c_at(p, 0));
        const R* c1 = reinterpret_cast<const R*>(c + c_at(p, 1));
        const R* c2 = reinterpret_cast<const R*>(c + c_at(p, 2));
        for (int l = 0; l < n; ++l) {
          const double sxr = k1sq * double(c0[2 * l]), sxi = k1sq * double(c0[2 * l + 1]);
          const double syr = k1sq * double(c1[2 * l]), syi = k1sq * double(c1[2 * l + 1]);
          e_re[l] = ex[l] * sxr + ey[l] * syr;
          e_im[l] = ex[l] * sxi + ey[l] * syi;
          t_re[l] = tx[l] * sxr + ty[l] * syr;
          t_im[l] = tx[l] * sxi + ty[l] * syi;
          z_re[l] = k1sq * double(c2[2 * l]);
          z_im[l] = k1sq * double(c2[2 * l + 1]);
        }
      };
      // y_p ← y_p − (ae ê + at t̂ + az ẑ) per lane.
      const auto subtract = [&](int p, const double* ae_re, const double* ae_im, const double* at_re,
                                const double* at_im, const double* az_re, const double* az_im) {
        R* y0 = reinterpret_cast<R*>(y + at(p, 0));
        R* y1 = reinterpret_cast<R*>(y + at(p, 1));
        R* y2 = reinterpret_cast<R*>(y + at(p, 2));
        for (int l = 0; l < n; ++l) {
          y0[2 * l] = R(double(y0[2 * l]) - (ae_re[l] * ex[l] + at_re[l] * tx[l]));
          y0[2 * l + 1] = R(double(y0[2 * l + 1]) - (ae_im[l] * ex[l] + at_im[l] * tx[l]));
          y1[2 * l] = R(double(y1[2 * l]) - (ae_re[l] * ey[l] + at_re[l] * ty[l]));
          y1[2 * l + 1] = R(double(y1[2 * l + 1]) - (ae_im[l] * ey[l] + at_im[l] * ty[l]));
          y2[2 * l] = R(double(y2[2 * l]) - az_re[l]);
          y2[2 * l + 1] = R(double(y2[2 * l + 1]) - az_im[l]);
        }
      };
      alignas(64) double ae_re[lanes], ae_im[lanes], at_re[lanes], at_im[lanes], az_re[lanes], az_im[lanes];
      // One step of a sweep per lane: v ← step_p (v + weight_w u).
      const auto advance = [&](int p, int w, double* v_re, double* v_im, const double* u_re, const double* u_im) {
        const double *sr = table(step_re_, p), *si = table(step_im_, p);
        const double *wr = table(weight_re_, w), *wi = table(weight_im_, w);
        for (int l = 0; l < n; ++l) {
          const double xr = v_re[l] + (wr[l] * u_re[l] - wi[l] * u_im[l]);
          const double xi = v_im[l] + (wr[l] * u_im[l] + wi[l] * u_re[l]);
          v_re[l] = sr[l] * xr - si[l] * xi;
          v_im[l] = sr[l] * xi + si[l] * xr;
        }
      };

      // Upward sweep (bottom to top): U = Σ_{p below q} e^{ikz(z_q − z_p)} w_p (ê·s_p, p̂+·s_p); also the
      // reflected sums Σ_p e^{ikz z_p} w_p (r_s ê·s_p, r_p p̂−·s_p), and the self term
      // pref (ê ue + p̂+ up) + c_q [ê(ê·s) + (kz² t̂(t̂·s) + kρ² ẑ(ẑ·s))/k1²] − ẑ(ẑ·s)/k1².
      alignas(64) double ue_re[lanes] = {}, ue_im[lanes] = {}, up_re[lanes] = {}, up_im[lanes] = {};
      alignas(64) double re_re[lanes] = {}, re_im[lanes] = {}, rpm_re[lanes] = {}, rpm_im[lanes] = {};
      alignas(64) double be_re[lanes], be_im[lanes], bp_re[lanes], bp_im[lanes];  // below: ê·s, p̂+·s
      for (int q = nz - 1; q >= 0; --q) {
        if (q < nz - 1) {
          // ue = s (ue + w ê·s_below), up = s (up + w p̂+·s_below), with slice q + 1's s and w
          advance(q + 1, q + 1, ue_re, ue_im, be_re, be_im);
          advance(q + 1, q + 1, up_re, up_im, bp_re, bp_im);
        }
        project(q);
        const double *wr = table(weight_re_, q), *wi = table(weight_im_, q);
        const double *dr = table(depth_re_, q), *di = table(depth_im_, q);
        const double *cr = table(self_re_, q), *ci = table(self_im_, q);
        for (int l = 0; l < n; ++l) {
          // p̂±·s = ±pt (t̂·s) + pz (ẑ·s)
          const double ptt_re = pt_re[l] * t_re[l] - pt_im[l] * t_im[l], ptt_im = pt_re[l] * t_im[l] + pt_im[l] * t_re[l];
          const double plus_re = ptt_re + pz[l] * z_re[l], plus_im = ptt_im + pz[l] * z_im[l];
          const double minus_re = -ptt_re + pz[l] * z_re[l], minus_im = -ptt_im + pz[l] * z_im[l];
          // dw = depth · weight; re += dw r_s ê·s, rpm += dw r_p p̂−·s
          const double dw_re = dr[l] * wr[l] - di[l] * wi[l], dw_im = dr[l] * wi[l] + di[l] * wr[l];
          const double a_re = dw_re * rs_re[l] - dw_im * rs_im[l], a_im = dw_re * rs_im[l] + dw_im * rs_re[l];
          re_re[l] += a_re * e_re[l] - a_im * e_im[l];
          re_im[l] += a_re * e_im[l] + a_im * e_re[l];
          const double b_re = dw_re * rp_re[l] - dw_im * rp_im[l], b_im = dw_re * rp_im[l] + dw_im * rp_re[l];
          rpm_re[l] += b_re * minus_re - b_im * minus_im;
          rpm_im[l] += b_re * minus_im + b_im * minus_re;
          // ae = pref ue + c_q ê·s
          const double pu_re = pref_re[l] * ue_re[l] - pref_im[l] * ue_im[l];
          const double pu_im = pref_re[l] * ue_im[l] + pref_im[l] * ue_re[l];
          ae_re[l] = pu_re + (cr[l] * e_re[l] - ci[l] * e_im[l]);
          ae_im[l] = pu_im + (cr[l] * e_im[l] + ci[l] * e_re[l]);
          // pref up, then at = (pref up) pt + c_q (kz²/k1²) t̂·s, az = (pref up) pz + c_q (kρ²/k1²) ẑ·s − ẑ·s/k1²
          const double pv_re = pref_re[l] * up_re[l] - pref_im[l] * up_im[l];
          const double pv_im = pref_re[l] * up_im[l] + pref_im[l] * up_re[l];
          const double ck_re = cr[l] * kz2_re[l] - ci[l] * kz2_im[l], ck_im = cr[l] * kz2_im[l] + ci[l] * kz2_re[l];
          at_re[l] = (pv_re * pt_re[l] - pv_im * pt_im[l]) + (ck_re * t_re[l] - ck_im * t_im[l]);
          at_im[l] = (pv_re * pt_im[l] + pv_im * pt_re[l]) + (ck_re * t_im[l] + ck_im * t_re[l]);
          az_re[l] = pv_re * pz[l] + (cr[l] * kr2[l] * z_re[l] - ci[l] * kr2[l] * z_im[l]) - z_re[l] / k1sq;
          az_im[l] = pv_im * pz[l] + (cr[l] * kr2[l] * z_im[l] + ci[l] * kr2[l] * z_re[l]) - z_im[l] / k1sq;
          be_re[l] = e_re[l], be_im[l] = e_im[l], bp_re[l] = plus_re, bp_im[l] = plus_im;
        }
        subtract(q, ae_re, ae_im, at_re, at_im, az_re, az_im);
      }
      // Downward sweep (top to bottom): D = Σ_{p above q} e^{ikz(z_p − z_q)} w_p (ê·s_p, p̂−·s_p), plus the
      // reflected part e^{ikz z_q} (ê re + p̂+ rpm).
      alignas(64) double de_re[lanes] = {}, de_im[lanes] = {}, dp_re[lanes] = {}, dp_im[lanes] = {};
      alignas(64) double ae2_re[lanes], ae2_im[lanes], am_re[lanes], am_im[lanes];  // above: ê·s, p̂−·s
      for (int q = 0; q < nz; ++q) {
        if (q > 0) {
          // de = s_q (de + w_{q−1} ê·s_above), dp = s_q (dp + w_{q−1} p̂−·s_above)
          advance(q, q - 1, de_re, de_im, ae2_re, ae2_im);
          advance(q, q - 1, dp_re, dp_im, am_re, am_im);
        }
        const double *dr = table(depth_re_, q), *di = table(depth_im_, q);
        for (int l = 0; l < n; ++l) {
          // ae = pref (de + d_q re); at = pref (−pt dp + pt d_q rpm) = pref pt (d_q rpm − dp); az = pref pz (dp + d_q rpm)
          const double dre_re = dr[l] * re_re[l] - di[l] * re_im[l], dre_im = dr[l] * re_im[l] + di[l] * re_re[l];
          const double drp_re = dr[l] * rpm_re[l] - di[l] * rpm_im[l], drp_im = dr[l] * rpm_im[l] + di[l] * rpm_re[l];
          const double u_re = de_re[l] + dre_re, u_im = de_im[l] + dre_im;
          ae_re[l] = pref_re[l] * u_re - pref_im[l] * u_im;
          ae_im[l] = pref_re[l] * u_im + pref_im[l] * u_re;
          const double ptd_re = pt_re[l] * dp_re[l] - pt_im[l] * dp_im[l], ptd_im = pt_re[l] * dp_im[l] + pt_im[l] * dp_re[l];
          const double ptr_re = pt_re[l] * drp_re - pt_im[l] * drp_im, ptr_im = pt_re[l] * drp_im + pt_im[l] * drp_re;
          const double v_re = -ptd_re + ptr_re, v_im = -ptd_im + ptr_im;
          at_re[l] = pref_re[l] * v_re - pref_im[l] * v_im;
          at_im[l] = pref_re[l] * v_im + pref_im[l] * v_re;
          const double w_re = pz[l] * dp_re[l] + pz[l] * drp_re, w_im = pz[l] * dp_im[l] + pz[l] * drp_im;
          az_re[l] = pref_re[l] * w_re - pref_im[l] * w_im;
          az_im[l] = pref_re[l] * w_im + pref_im[l] * w_re;
        }
        subtract(q, ae_re, ae_im, at_re, at_im, az_re, az_im);
        project(q);
        for (int l = 0; l < n; ++l) {
          const double ptt_re = pt_re[l] * t_re[l] - pt_im[l] * t_im[l], ptt_im = pt_re[l] * t_im[l] + pt_im[l] * t_re[l];
          ae2_re[l] = e_re[l], ae2_im[l] = e_im[l];
          am_re[l] = -ptt_re + pz[l] * z_re[l];
          am_im[l] = -ptt_im + pz[l] * z_im[l];
        }
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
        const std::size_t i = (std::size_t(rhs_[std::size_t(o.r)]) * nz + p) * nm + o.m;
        const C w{weight_re_[i], weight_im_[i]}, d{depth_re_[i], depth_im_[i]};
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
  /// What apply (per lane) and far_field_sums both derive for right-hand side r and order m: the order's
  /// coefficients, its polarisation frame, and (far_field_sums) the source's projections on that frame
  /// (computed here once, so that both read the same numbers the same way).
  struct OrderSetup {
    int r, m, nr, nm, sc;
    double k1sq;
    C kz, rs, rp;
    double tx, ty, kr;
    double ex, ey;  // ê = ẑ × t̂
    C pt;           // p̂± = (±pt t̂, pz ẑ): pt = kz/k1, pz = −kρ/k1
    double pz;
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
    const std::size_t io = std::size_t(rhs_[r]) * nm + m;
    const double k1 = g_.k1[std::size_t(rhs_[r])], tx = g_.tx[io], ty = g_.ty[io], kr = g_.krho[io];
    const C kz = g_.kz[io];
    return {.r = r, .m = m, .nr = int(rhs_.size()), .nm = nm, .sc = source_components_, .k1sq = k1 * k1,
            .kz = kz, .rs = g_.rs[io], .rp = g_.rp[io], .tx = tx, .ty = ty, .kr = kr, .ex = -ty, .ey = tx,
            .pt = kz / k1, .pz = -kr / k1};
  }

  /// Orders per block of apply(): its inner loops' lanes.
  static constexpr int lanes = 8;

  GreenCoefficients g_;
  std::vector<int> rhs_;
  unsigned d_axes_;
  int source_components_;
  /// step, weight, self, depth at [(incidence·slices + p)·orders + m] (apply(): consecutive orders adjacent).
  std::vector<double> step_re_, step_im_, weight_re_, weight_im_, self_re_, self_im_, depth_re_, depth_im_;
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
