// The z-operator's coefficients (physics/z_operator.hpp): green_coefficients() computes its per-slice
// tables once per distinct kz and per run of equal slice thicknesses (issue #15); every entry must
// still be the formula of docs/formulation.md §6, here evaluated directly per entry in long double, on
// random lattices, incidences and non-uniform grids, and the tables must not depend on the thread
// count. The host operator's apply (the Krylov product's z-operator half on host backends) against the
// operator of z_operator.hpp summed directly (O(Nz²) per order) in long double, in both precisions,
// on batches of two wavelengths (k1 per incidence, issue #10); a batch of wavelengths equals each
// wavelength's operator alone, bit for bit.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "physics/floquet.hpp"
#include "physics/z_operator.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

namespace {

using LongComplex = std::complex<long double>;

/// Layers of random thickness, each cut into a random number of equal slices, plus single slices of
/// their own thickness: runs of equal Δ_p and z-distances, and changes between them; at least
/// `min_slices`. Top down, z > 0.
ZGrid random_grid(std::size_t min_slices = 1) {
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<int> count(1, 9), layers(1, 4);
  auto& g = test::rng();
  std::vector<double> thickness;
  for (int l = layers(g); l > 0 || thickness.size() < min_slices; --l) {
    const int slices = count(g);
    const double total = 0.05 + 0.5 * u(g);
    for (int k = 0; k < slices; ++k) thickness.push_back(total / slices);
    if (u(g) < 0.5) thickness.push_back(0.01 + 0.1 * u(g));
  }
  ZGrid grid;
  double top = 0;
  for (const double d : thickness) top += d;
  for (const double d : thickness) {
    grid.z.push_back(top - d / 2);
    grid.thickness.push_back(d);
    top -= d;
  }
  return grid;
}

/// Incidences on a random crossed lattice, 3 per wavelength for `members` random wavelengths (a batch
/// of problem.hpp: runs of one wavelength), each with its own superstrate index (so k1 differs beyond
/// 2π/λ) and absorbing substrate; φ = 0 for some (kz equal for m2 and −m2), θ = 0 for one (more equal kz).
std::vector<FloquetOrders> random_incidences(int m1, int m2, int members = 1) {
  std::uniform_real_distribution<double> u(0, 1);
  auto& g = test::rng();
  const Lattice lattice{0.4 + u(g), 0.4 + u(g)};
  std::vector<std::string> warnings;
  std::vector<FloquetOrders> incidences;
  for (int w = 0; w < members; ++w) {
    const double wavelength = 0.5 + 0.5 * u(g), n1 = 1 + 0.5 * u(g);
    const Complex eps2(2 + u(g), 0.1 * u(g));
    for (const Incidence inc : {Incidence{wavelength, 0, 0}, Incidence{wavelength, 70 * u(g), 0},
                                Incidence{wavelength, 70 * u(g), 360 * u(g)}})
      incidences.push_back(floquet_orders(lattice, inc, n1 * n1, eps2, m1, m2, 1e-6, warnings));
  }
  return incidences;
}

/// |a − b| ≤ tol·|b| (or ≤ tol where b = 0), with the values in the message.
bool close(Complex a, LongComplex b, long double tol) {
  const long double diff = std::abs(LongComplex(a) - b);
  return diff <= tol * std::max(std::abs(b), 1e-300L);
}

}  // namespace

TEST_CASE("green coefficients: a slice too thick for the highest order is refused, naming it", "[physics][z_operator]") {
  // 2 sin(kzΔ/2)/kz overflows double precision near |Im kz| Δ = 1420. On random incidences (lattice periods
  // 0.4–1.4, so |Im kz| of order m1 = 40 is at least 2π·40/1.4 − 2π·1.5/0.5 ≈ 160), a slice of 12 holds
  // |Im kz| Δ ≥ 1900 for the highest orders; one of 2 (≥ 320) is held.
  const std::vector<FloquetOrders> incidences = random_incidences(40, 0);
  const auto grid_of = [](double thin, double thick) {
    ZGrid grid;
    grid.z = {thick + thin / 2, thick / 2};
    grid.thickness = {thin, thick};
    return grid;
  };
  const GreenCoefficients held = green_coefficients(grid_of(0.1, 2.0), incidences);
  for (const Complex w : held.weight) CHECK(std::isfinite(std::abs(w)));
  try {
    (void)green_coefficients(grid_of(0.1, 12.0), incidences);
    FAIL("a 12-thick slice at M = 40 was not refused");
  } catch (const InvalidArgument& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find("slice 1 is too thick for order") != std::string::npos);
  }
}

TEST_CASE("green coefficients: every table entry equals its formula evaluated directly in long double",
          "[physics][z_operator]") {
  constexpr long double eps = std::numeric_limits<double>::epsilon();
  for (int trial = 0; trial < 4; ++trial) {
    const ZGrid grid = random_grid();
    const std::vector<FloquetOrders> incidences = random_incidences(3, 2);
    const GreenCoefficients g = green_coefficients(grid, incidences);
    REQUIRE(g.slices == grid.slices());
    const std::size_t nz = std::size_t(g.slices);
    for (std::size_t a = 0; a < incidences.size(); ++a)
      for (std::size_t m = 0; m < incidences[a].orders.size(); ++m) {
        const std::size_t io = a * std::size_t(g.orders) + m;
        REQUIRE(g.kz[io] == incidences[a].orders[m].kz1);
        const LongComplex kz(incidences[a].orders[m].kz1), i(0, 1);
        for (std::size_t p = 0; p < nz; ++p) {
          INFO("trial " << trial << ", incidence " << a << ", order " << m << ", slice " << p << ", kz " << g.kz[io]);
          const std::size_t e = io * nz + p;
          const long double d = grid.thickness[p], z = grid.z[p];
          // An exponent's argument is rounded to double in the tables (kz·z in double): relative error
          // up to a few eps·|argument|, beside the eps of each operation.
          const auto tol = [&](long double argument) { return 16 * eps * (1 + std::abs(kz) * argument); };
          if (p == 0) {
            CHECK(g.step[e] == Complex(0));
          } else {
            const long double distance = (long double)grid.z[p - 1] - z;
            CHECK(close(g.step[e], std::exp(i * kz * distance), tol(distance)));
          }
          // w = 2 sin(kzΔ/2)/kz and c = (e^{ikzΔ/2} − 1)/kz²: in long double cancellation costs
          // eps_long/|kzΔ|, far below double's eps for the |kzΔ| ≥ 1e-6·k1·Δ of the Rayleigh guard.
          CHECK(close(g.weight[e], 2.0L * std::sin(kz * d / 2.0L) / kz, tol(d)));
          CHECK(close(g.self[e], (std::exp(i * kz * d / 2.0L) - 1.0L) / (kz * kz), tol(d)));
          CHECK(close(g.depth[e], std::exp(i * kz * z), tol(z)));
        }
      }
  }
}

TEST_CASE("green coefficients: the tables do not depend on the thread count", "[physics][z_operator]") {
  const int threads = omp_get_max_threads();
  // Above both parallel thresholds of green_coefficients (4096 table entries of distinct kz, 65536 in all).
  const ZGrid grid = random_grid(50);
  const std::vector<FloquetOrders> incidences = random_incidences(10, 10);
  omp_set_num_threads(1);
  const GreenCoefficients one = green_coefficients(grid, incidences);
  omp_set_num_threads(4);
  const GreenCoefficients four = green_coefficients(grid, incidences);
  omp_set_num_threads(threads);
  REQUIRE(one.step.size() >= 65536);
  const auto same = [](const std::vector<Complex>& x, const std::vector<Complex>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(Complex)) == 0;
  };
  CHECK(same(one.step, four.step));
  CHECK(same(one.weight, four.weight));
  CHECK(same(one.self, four.self));
  CHECK(same(one.depth, four.depth));
}

namespace {

/// Host z-operator apply against the direct sums of z_operator.hpp in long double, on random x and c
/// (J and the D components of d_axes: D_x, D_y in 2D, D_x, D_z in 1D tilted), 2 right-hand sides per
/// incidence; tolerance `tol` relative to the sum of the magnitudes of every term of each element. Also 1
/// vs 4 threads, equal to the bit.
template <class Real>
void check_host_apply(double tol, unsigned d_axes) {
  using LongComplex = std::complex<long double>;
  using RealComplex = std::complex<Real>;
  const ZGrid grid = random_grid(12);
  const std::vector<FloquetOrders> incidences = random_incidences(4, 3, 2);  // two wavelengths: k1 per incidence
  const GreenCoefficients g = green_coefficients(grid, incidences);
  REQUIRE(g.members == 2);
  const int nz = g.slices, nm = g.orders, sc = 3 + std::popcount(d_axes);
  std::vector<int> rhs_incidence;
  for (int a = 0; a < g.incidences; ++a) rhs_incidence.insert(rhs_incidence.end(), {a, a});
  const int nr = int(rhs_incidence.size());
  const std::vector<RealComplex> x = test::random_complex<Real>(std::size_t(nz) * nr * 3 * nm);
  const std::vector<RealComplex> c = test::random_complex<Real>(std::size_t(nz) * nr * sc * nm);
  std::vector<RealComplex> y(x.size()), y1(x.size());
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  make_host_z_operator<Real>(g, rhs_incidence, d_axes)->apply(x.data(), c.data(), y1.data(), nullptr);
  omp_set_num_threads(4);
  make_host_z_operator<Real>(g, rhs_incidence, d_axes)->apply(x.data(), c.data(), y.data(), nullptr);
  omp_set_num_threads(threads);
  CHECK(std::memcmp(y.data(), y1.data(), y.size() * sizeof(RealComplex)) == 0);

  const LongComplex i(0, 1);
  const auto dot = [](const LongComplex* a, const LongComplex* b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; };
  for (int r = 0; r < nr; ++r)
    for (int m = 0; m < nm; ++m) {
      const FloquetOrders& f = incidences[std::size_t(rhs_incidence[std::size_t(r)])];
      const Order& o = f.orders[std::size_t(m)];
      const long double k1 = f.k1, k1sq = k1 * k1;  // the rhs's own wavelength
      const LongComplex kz(o.kz1), rs(o.rs), rp(o.rp);
      const LongComplex e[3] = {-(long double)o.ty, (long double)o.tx, 0};
      const LongComplex t[3] = {(long double)o.tx, (long double)o.ty, 0};
      const LongComplex plus[3] = {kz * t[0] / k1, kz * t[1] / k1, -(long double)o.krho / k1};
      const LongComplex minus[3] = {-kz * t[0] / k1, -kz * t[1] / k1, -(long double)o.krho / k1};
      const LongComplex zhat[3] = {0, 0, 1};
      const auto source = [&](int p, LongComplex* s) {
        for (int comp = 0; comp < 3; ++comp)
          s[comp] = k1sq * LongComplex(c[(std::size_t(p) * nr + r) * sc * nm + std::size_t(comp) * nm + m]);
      };
      for (int q = 0; q < nz; ++q) {
        LongComplex ref[3], scale[3] = {};
        for (int comp = 0; comp < 3; ++comp) {
          const std::size_t xi = (std::size_t(q) * nr + r) * 3 * nm + std::size_t(comp) * nm + m;
          ref[comp] = LongComplex(x[xi]);
          int d_at = -1;  // D's components follow J's in increasing axis order
          for (int axis = 0, next = 3; axis < 3; ++axis)
            if (d_axes >> axis & 1u) {
              if (axis == comp) d_at = next;
              ++next;
            }
          if (d_at >= 0) ref[comp] += LongComplex(c[(std::size_t(q) * nr + r) * sc * nm + std::size_t(d_at) * nm + m]);
          scale[comp] = std::abs(ref[comp]);
        }
        const LongComplex pref = i / (2.0L * kz);
        for (int p = 0; p < nz; ++p) {
          LongComplex s[3];
          source(p, s);
          const long double d = grid.thickness[std::size_t(p)];
          const long double zp = grid.z[std::size_t(p)], zq = grid.z[std::size_t(q)];
          const LongComplex w = 2.0L * std::sin(kz * d / 2.0L) / kz;
          // (K s)_q: the direct part (p below q: êê + p̂+p̂+; above: êê + p̂−p̂−) and the reflected part
          LongComplex field[3] = {};
          if (p != q) {
            const LongComplex* pp = p > q ? plus : minus;
            const LongComplex phase = std::exp(i * kz * std::abs(zq - zp)) * w * pref;
            for (int comp = 0; comp < 3; ++comp) field[comp] += phase * (e[comp] * dot(e, s) + pp[comp] * dot(pp, s));
          }
          const LongComplex reflected = std::exp(i * kz * (zq + zp)) * w * pref;
          for (int comp = 0; comp < 3; ++comp)
            field[comp] += reflected * (rs * e[comp] * dot(e, s) + rp * plus[comp] * dot(minus, s));
          if (p == q) {  // c_q [êê + (kz² t̂t̂ + kρ² ẑẑ)/k1²] s − ẑẑ s/k1²
            const LongComplex cq = (std::exp(i * kz * d / 2.0L) - 1.0L) / (kz * kz);
            const long double kr = o.krho;
            for (int comp = 0; comp < 3; ++comp)
              field[comp] += cq * (e[comp] * dot(e, s) + (kz * kz * t[comp] * dot(t, s) + kr * kr * zhat[comp] * s[2]) / k1sq) -
                             zhat[comp] * s[2] / k1sq;
          }
          for (int comp = 0; comp < 3; ++comp) {
            ref[comp] -= field[comp];
            scale[comp] += std::abs(field[comp]) + std::abs(w * pref) * 4 * (std::abs(s[0]) + std::abs(s[1]) + std::abs(s[2]));
          }
        }
        for (int comp = 0; comp < 3; ++comp) {
          const std::size_t yi = (std::size_t(q) * nr + r) * 3 * nm + std::size_t(comp) * nm + m;
          INFO("rhs " << r << ", order " << m << ", slice " << q << ", component " << comp << ", kz " << o.kz1);
          CHECK(std::abs(LongComplex(y[yi]) - ref[comp]) <= tol * std::abs(scale[comp]));
        }
      }
    }
}

}  // namespace

TEST_CASE("host z-operator: apply equals the direct sums over the slices, whatever the thread count",
          "[physics][z_operator]") {
  for (unsigned d_axes : {0b011u, 0b101u, 0b111u}) {  // 2D (D_x, D_y), 1D tilted (D_x, D_z), 2D tilted (D_x, D_y, D_z)
    INFO("D components (mask) " << d_axes);
    check_host_apply<double>(1e-12, d_axes);
    check_host_apply<float>(1e-5, d_axes);  // y rounded to complex64: a few eps_f of the terms' scale
  }
}

TEST_CASE("host z-operator: the far-field sums equal the direct sums over the slices", "[physics][z_operator]") {
  // ZOperator::far_field_sums against its formula in long double, with w_p = 2 sin(kzΔ/2)/kz and the
  // phases evaluated directly (not from the tables), on a random source of 4 components per block.
  using LongComplex = std::complex<long double>;
  const ZGrid grid = random_grid(10);
  const std::vector<FloquetOrders> incidences = random_incidences(3, 2, 2);  // two wavelengths: k1 per incidence
  const GreenCoefficients g = green_coefficients(grid, incidences);
  const int nz = g.slices, nm = g.orders, sc = 4;  // J and D_x (1D)
  const std::vector<int> rhs_incidence{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
  const int nr = int(rhs_incidence.size());
  const std::vector<std::complex<double>> c = test::random_complex<double>(std::size_t(nz) * nr * sc * nm);
  std::vector<std::complex<double>> sums(std::size_t(nr) * nm * 4, test::poison<double>());
  make_host_z_operator<double>(g, rhs_incidence, 0b001)->far_field_sums(c.data(), sums.data(), nullptr);
  const LongComplex i(0, 1);
  int upward = 0;
  for (int r = 0; r < nr; ++r)
    for (int m = 0; m < nm; ++m) {
      const FloquetOrders& f = incidences[std::size_t(rhs_incidence[std::size_t(r)])];
      const Order& o = f.orders[std::size_t(m)];
      const long double k1 = f.k1, k1sq = k1 * k1;  // the rhs's own wavelength
      const LongComplex kz(o.kz1), rs(o.rs), rp(o.rp);
      const long double ex = -o.ty, ey = o.tx, pz = -(long double)o.krho / k1;
      LongComplex ref[4] = {}, scale = 0;
      for (int p = 0; p < nz; ++p) {
        LongComplex s[3];
        for (int comp = 0; comp < 3; ++comp)
          s[comp] = k1sq * LongComplex(c[(std::size_t(p) * nr + r) * sc * nm + std::size_t(comp) * nm + m]);
        const long double d = grid.thickness[std::size_t(p)], z = grid.z[std::size_t(p)];
        const LongComplex w = 2.0L * std::sin(kz * d / 2.0L) / kz;
        const LongComplex se = ex * s[0] + ey * s[1], st = (long double)o.tx * s[0] + (long double)o.ty * s[1];
        const LongComplex plus = kz / k1 * st + pz * s[2], minus = -kz / k1 * st + pz * s[2];
        const LongComplex deep = std::exp(i * kz * z), back = std::exp(-i * kz * z);
        if (o.propagates_up()) {
          ref[0] += w * (se * back + rs * se * deep);
          ref[1] += w * (plus * back + rp * minus * deep);
        }
        ref[2] += w * se * deep;
        ref[3] += w * minus * deep;
        scale += std::abs(w) * (std::abs(se) + std::abs(plus) + std::abs(minus)) * (1 + std::abs(deep)) * 2;
      }
      upward += o.propagates_up();
      for (int k = 0; k < 4; ++k) {
        INFO("rhs " << r << ", order " << m << ", sum " << k << ", kz " << o.kz1);
        CHECK(std::abs(LongComplex(sums[(std::size_t(r) * nm + m) * 4 + k]) - ref[k]) <= 1e-13 * std::abs(scale));
      }
    }
  CHECK(upward > 0);  // the upward sums were exercised
}

TEST_CASE("green coefficients: a batch of wavelengths keeps each incidence's k1 and finds its members",
          "[physics][z_operator]") {
  const ZGrid grid = random_grid(4);
  const std::vector<FloquetOrders> incidences = random_incidences(2, 1, 3);
  const GreenCoefficients g = green_coefficients(grid, incidences);
  CHECK(g.members == 3);
  REQUIRE(g.k1.size() == incidences.size());
  for (std::size_t a = 0; a < incidences.size(); ++a) {
    CHECK(g.k1[a] == incidences[a].k1);
    CHECK(member_of(g, int(a)) == int(a / 3));
  }
  CHECK(g.k1[0] != g.k1[3]);
  // Runs of unequal length (3 incidences of one wavelength, 2 of another) are no batch.
  const std::vector<FloquetOrders> uneven(incidences.begin(), incidences.begin() + 5);
  CHECK_THROWS_AS(green_coefficients(grid, uneven), InvalidArgument);
}

namespace {

/// The host z-operator applied to a batch of members equals, bit for bit, each member's own operator
/// applied to its part of x and c: the sweeps of one (rhs, order) read only that rhs's incidence's
/// coefficients (its own k1 and kz) and its own elements, in the same order. Fresh random x, c;
/// outputs poisoned first; also the far-field sums.
template <class Real>
void check_member_independence() {
  using RealComplex = std::complex<Real>;
  const ZGrid grid = random_grid(6);
  constexpr int members = 3, per_member = 3, sc = 5;  // J, D_x, D_y
  const std::vector<FloquetOrders> incidences = random_incidences(2, 2, members);
  const GreenCoefficients g = green_coefficients(grid, incidences);
  REQUIRE(g.members == members);
  const int nz = g.slices, nm = g.orders, nr = 2 * members * per_member, nr_member = 2 * per_member;
  std::vector<int> rhs_incidence;
  for (int a = 0; a < g.incidences; ++a) rhs_incidence.insert(rhs_incidence.end(), {a, a});
  const std::vector<RealComplex> x = test::random_complex<Real>(std::size_t(nz) * nr * 3 * nm);
  const std::vector<RealComplex> c = test::random_complex<Real>(std::size_t(nz) * nr * sc * nm);
  std::vector<RealComplex> y(x.size(), test::poison<Real>());
  std::vector<std::complex<double>> sums(std::size_t(nr) * nm * 4, test::poison<double>());
  auto batch = make_host_z_operator<Real>(g, rhs_incidence, 0b011);
  batch->apply(x.data(), c.data(), y.data(), nullptr);
  batch->far_field_sums(c.data(), sums.data(), nullptr);
  for (int w = 0; w < members; ++w) {
    INFO("member " << w);
    const std::vector<FloquetOrders> own(incidences.begin() + w * per_member, incidences.begin() + (w + 1) * per_member);
    const GreenCoefficients gw = green_coefficients(grid, own);
    REQUIRE(gw.members == 1);
    std::vector<int> rhs_own;
    for (int a = 0; a < per_member; ++a) rhs_own.insert(rhs_own.end(), {a, a});
    // The member's rhs r_own is the batch's w·nr_member + r_own, in every slice.
    const auto part = [&](const std::vector<RealComplex>& v, int components) {
      std::vector<RealComplex> out;
      const std::size_t block = std::size_t(components) * nm;
      for (int p = 0; p < nz; ++p) {
        const auto first = v.begin() + std::ptrdiff_t((std::size_t(p) * nr + std::size_t(w) * nr_member) * block);
        out.insert(out.end(), first, first + std::ptrdiff_t(nr_member * block));
      }
      return out;
    };
    const std::vector<RealComplex> xw = part(x, 3), cw = part(c, sc);
    std::vector<RealComplex> yw(xw.size(), test::poison<Real>());
    std::vector<std::complex<double>> sums_w(std::size_t(nr_member) * nm * 4, test::poison<double>());
    auto alone = make_host_z_operator<Real>(gw, rhs_own, 0b011);
    alone->apply(xw.data(), cw.data(), yw.data(), nullptr);
    alone->far_field_sums(cw.data(), sums_w.data(), nullptr);
    const std::vector<RealComplex> expected = part(y, 3);
    CHECK(std::memcmp(expected.data(), yw.data(), yw.size() * sizeof(RealComplex)) == 0);
    CHECK(std::memcmp(&sums[std::size_t(w) * nr_member * nm * 4], sums_w.data(),
                      sums_w.size() * sizeof(std::complex<double>)) == 0);
  }
}

}  // namespace

TEST_CASE("host z-operator: a batch of wavelengths equals each wavelength's operator alone, bit for bit",
          "[physics][z_operator]") {
  check_member_independence<double>();
  check_member_independence<float>();
}
