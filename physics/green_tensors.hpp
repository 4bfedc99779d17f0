#pragma once
// The z-operator's Green function G = −k1² K (z_operator.hpp) at one (incidence, order) as 3×3 tensors
// acting on the source J, and a slice's kernels as dense operators over the orders, for the
// preconditioners' assemblies (preconditioner.cpp, sweep_preconditioner.cpp). Private to physics/:
// header-only (it uses Eigen), no public header includes it.
#include <Eigen/Dense>
#include <array>
#include <complex>
#include <cstddef>
#include <vector>

#include "convolution/convolution.hpp"

#include "physics/normal_field.hpp"
#include "physics/z_operator.hpp"

namespace gratingsim::physics::detail {

using Tensor = std::array<std::complex<double>, 9>;  // 3×3, row-major [row·3 + col]
using Vector3 = std::array<std::complex<double>, 3>;

/// a·b for 3×3 tensors.
inline Tensor product(const Tensor& a, const Tensor& b) {
  Tensor c{};
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 3; ++j) c[i * 3 + j] += a[i * 3 + k] * b[k * 3 + j];
  return c;
}

/// u vᵀ for 3-vectors.
inline Tensor dyad(const Vector3& u, const Vector3& v) {
  Tensor t{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) t[i * 3 + j] = u[i] * v[j];
  return t;
}

/// Between slices q ≠ p and q = p,
///   G_qp = w_p e^{ikz|z_q − z_p|} (q < p: up, q > p: down) + e^{ikz z_q} e^{ikz z_p} w_p reflected,
///   G_pp = e^{2ikz z_p} w_p reflected + c_p self + ẑẑ,
/// with up = scale (êê + p̂+p̂+), down = scale (êê + p̂−p̂−), reflected = scale (r_s êê + r_p p̂+p̂−),
/// scale = −k1² (i/2kz), self = −k1² êê − kz² t̂t̂ − kρ² ẑẑ: the sums the z-operator's sweeps form for one
/// source, written out (the same exponentials: e^{ikz|z_q − z_p|} is the product of the steps between).
/// ê = ẑ × t̂, p̂± = (±(kz/k1) t̂, −kρ/k1); the dyads are bilinear (no conjugation).
struct GreenTensors {
  Tensor up, down, reflected, self, zz;
  Vector3 e, plus, minus;  ///< ê, p̂+, p̂−
  std::complex<double> scale;
};

inline GreenTensors green_tensors(const GreenCoefficients& g, std::size_t io) {
  using C = std::complex<double>;
  const C kz = g.kz[io];
  const double tx = g.tx[io], ty = g.ty[io], kr = g.krho[io], k1 = g.k1[io / std::size_t(g.orders)], k1sq = k1 * k1;
  const Vector3 e{-ty, tx, 0.0}, t{tx, ty, 0.0}, z{0.0, 0.0, 1.0};
  const C pt = kz / k1, pz = -kr / k1;
  GreenTensors out;
  out.e = e;
  out.plus = {pt * tx, pt * ty, pz};
  out.minus = {-pt * tx, -pt * ty, pz};
  out.scale = -k1sq * C(0.0, 1.0) / (2.0 * kz);
  const Tensor ee = dyad(e, e), pp = dyad(out.plus, out.plus), mm = dyad(out.minus, out.minus),
               pm = dyad(out.plus, out.minus);
  const Tensor tt = dyad(t, t), zz = dyad(z, z);
  for (int i = 0; i < 9; ++i) {
    out.up[i] = out.scale * (ee[i] + pp[i]);
    out.down[i] = out.scale * (ee[i] + mm[i]);
    out.reflected[i] = out.scale * (g.rs[io] * ee[i] + g.rp[io] * pm[i]);
    out.self[i] = -k1sq * ee[i] - kz * kz * tt[i] - kr * kr * zz[i];
    out.zz[i] = zz[i];
  }
  return out;
}

/// G_pp (green_tensors) at slice p without its reflected part: c_p self + ẑẑ; i = (io·slices + p),
/// the index of the per-slice coefficients.
inline Tensor self_green(const GreenTensors& t, const GreenCoefficients& g, std::size_t i) {
  const std::complex<double> self = g.self[i];
  Tensor out;
  for (int k = 0; k < 9; ++k) out[k] = self * t.self[k] + t.zz[k];
  return out;
}

/// G_pp (green_tensors) at slice p, the reflected part included.
inline Tensor diagonal_green(const GreenTensors& t, const GreenCoefficients& g, std::size_t i) {
  const std::complex<double> reflected = g.depth[i] * g.depth[i] * g.weight[i];
  Tensor out = self_green(t, g, i);
  for (int k = 0; k < 9; ++k) out[k] += reflected * t.reflected[k];
  return out;
}

/// The pattern's terms split into the source's (output J_i: i = 0..2) and D's (output: D's axis 0..2):
/// Laurent C = χ ⊛ I (D = 0); normal-vector the pattern's (outputs 0..2 are J, then D's components:
/// normal_field.hpp's d_axes).
struct SliceTerms {
  std::vector<conv::Term> source, d;
};
inline SliceTerms slice_terms(const conv::Problem& problem) {
  SliceTerms out;
  if (problem.scalar())
    out.source = {{0, 0, 0}, {1, 1, 0}, {2, 2, 0}};
  else
    for (const conv::Term& t : problem.pattern) {
      if (t.output < 3)
        out.source.push_back(t);
      else
        out.d.push_back({d_axis(d_axes(problem), t.output), t.input, t.kernel});
    }
  return out;
}

/// χ_k(m − m') of one engine slice's kernels: at (d1 + 2M1)·K2 + (d2 + 2M2) in kernel k.
struct SliceKernels {
  const std::complex<double>* kernels;
  int n1, n2;
  std::size_t size;  ///< one kernel's
  SliceKernels(const conv::Problem& problem, const std::complex<double>* slice_kernels)
      : kernels(slice_kernels), n1(problem.n1), n2(problem.n2), size(problem.kernel_size()) {}
  /// Column m' of kernel k's Toeplitz matrix, χ_k(m − m') for m = 0, 1, …, n1·n2 − 1, in contiguous runs of the
  /// kernel: f(m0, run, length) with run[i] = χ_k(m0 + i − m'). A 2D lattice gives n1 runs of n2 (one per m1); a 1D
  /// one (n2 = 1, the kernel's rows one number apart) a single run of n1. Read this way the dense assembly needs no
  /// integer division per element (four of them made the host sweep's assembly division-bound, session 34) and its
  /// products vectorise over a run (session 35).
  template <class F>
  void for_column_runs(int k, int mp, F&& f) const {
    const int p1 = mp / n2, p2 = mp % n2;
    const std::complex<double>* kernel = kernels + std::size_t(k) * size + std::size_t(n2 - 1 - p2);
    if (n2 == 1) {
      f(0, kernel + std::size_t(n1 - 1 - p1), n1);
      return;
    }
    for (int i1 = 0; i1 < n1; ++i1) f(i1 * n2, kernel + std::size_t(i1 - p1 + n1 - 1) * (2 * n2 - 1), n2);
  }
};

/// The dense source C (rows J_i·orders + m, columns F_j·orders + m') and D (rows D_i·orders + m) of one
/// engine slice over every pair of orders, from its kernels (slice_terms).
inline void slice_operators(const conv::Problem& problem, const std::complex<double>* slice_kernels, int nm,
                            Eigen::MatrixXcd& c, Eigen::MatrixXcd& d) {
  const SliceTerms terms = slice_terms(problem);
  const auto& source = terms.source;
  const auto& d_terms = terms.d;
  const SliceKernels coefficient(problem, slice_kernels);
  c.setZero(3 * nm, 3 * nm);
  d.setZero(3 * nm, 3 * nm);
  // Terms outermost: an element shared by several terms sums them in the terms' order, as element by element.
  for (const auto& [terms_of, into] : {std::pair{&source, &c}, std::pair{&d_terms, &d}})
    for (const conv::Term& t : *terms_of)
      for (int mp = 0; mp < nm; ++mp) {
        auto column = into->col(Eigen::Index(t.input) * nm + mp).segment(Eigen::Index(t.output) * nm, nm);
        coefficient.for_column_runs(t.kernel, mp, [&](int m0, const std::complex<double>* run, int length) {
          column.segment(m0, length) += Eigen::Map<const Eigen::VectorXcd>(run, length);
        });
      }
}

}  // namespace gratingsim::physics::detail
