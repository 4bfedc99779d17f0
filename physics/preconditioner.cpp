#include "physics/preconditioner.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "physics/green_tensors.hpp"
#include "physics/normal_field.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace gratingsim::physics {

using namespace detail;  // green_tensors.hpp

std::string_view to_string(Preconditioning p) {
  switch (p) {
    case Preconditioning::automatic: return "auto";
    case Preconditioning::averaged: return "averaged";
    case Preconditioning::coarse: return "coarse";
    case Preconditioning::sweep: return "sweep";
    case Preconditioning::none: return "none";
  }
  return "?";
}

Preconditioning parse_preconditioning(std::string_view name) {
  for (Preconditioning p :
       {Preconditioning::automatic, Preconditioning::averaged, Preconditioning::coarse, Preconditioning::sweep,
        Preconditioning::none})
    if (name == to_string(p)) return p;
  GS_EXPECTS(false, "unknown preconditioner '" + std::string(name) + "' (choose auto, averaged, coarse, sweep or none)");
  return Preconditioning::none;
}

std::size_t preconditioner_bytes(std::size_t slices, std::size_t orders, std::size_t incidences, std::size_t real_bytes) {
  const std::size_t n_l = 3 * orders, complex_bytes = 2 * real_bytes;
  const std::size_t local = n_l * n_l * slices * incidences;
  const std::size_t scratch = 2 * slices * 2 * incidences * 3 * orders;  // two batched vectors
  // complex128: the averaged sweep's entries and its v_p (a vector's worth), L̄ (9 per slice and order)
  const std::size_t exact = (std::size_t(AveragedSweep::entries) + 9) * orders * slices * incidences +
                            slices * 2 * incidences * 3 * orders;
  return (local + scratch) * complex_bytes + exact * 16;
}

std::size_t coarse_unknowns(int slices, int m1, int m2, int mc) {
  return std::size_t(3) * slices * (2 * std::min(mc, m1) + 1) * (2 * std::min(mc, m2) + 1);
}

int coarse_harmonics(int slices, int m1, int m2) {
  int best = 0;
  for (int mc = 1; mc <= std::max(m1, m2) && coarse_unknowns(slices, m1, m2, mc) <= coarse_unknowns_limit; ++mc) best = mc;
  return best;
}

std::size_t coarse_preconditioner_bytes(std::size_t slices, std::size_t orders, std::size_t incidences,
                                        std::size_t coarse_unknowns, std::size_t real_bytes) {
  const std::size_t n = 3 * slices, complex_bytes = 2 * real_bytes;
  const std::size_t averaged = n * n * orders * incidences, coarse = coarse_unknowns * coarse_unknowns * incidences;
  const std::size_t scratch = 2 * slices * 2 * incidences * 3 * orders;  // two batched vectors
  return (averaged + coarse + scratch) * complex_bytes;
}

MeanTensors mean_tensors(const conv::Problem& problem, std::span<const std::complex<double>> slice_kernels) {
  return kernel_tensors(problem, slice_kernels, 0, 0);
}

std::vector<MeanTensors> slice_mean_tensors(const conv::Problem& problem, std::span<const std::complex<double>> kernels) {
  const std::size_t per_slice = std::size_t(problem.kernels) * problem.kernel_size();
  GS_EXPECTS(kernels.size() == problem.kernels_total(), "slice_mean_tensors: kernel count of the problem");
  std::vector<MeanTensors> tensors;
  for (std::size_t p = 0; p < std::size_t(problem.slices); ++p)
    tensors.push_back(mean_tensors(problem, kernels.subspan(p * per_slice, per_slice)));
  return tensors;
}

MeanTensors kernel_tensors(const conv::Problem& problem, std::span<const std::complex<double>> slice_kernels, int d1,
                           int d2) {
  const std::size_t size = problem.kernel_size();
  GS_EXPECTS(slice_kernels.size() == std::size_t(problem.kernels) * size, "kernel_tensors: kernel count of the slice");
  GS_EXPECTS(std::abs(d1) < problem.n1 && std::abs(d2) < problem.n2, "kernel_tensors: offset beyond the kernels");
  // Coefficient Δ sits at (d1 + 2M1)·K2 + (d2 + 2M2), K2 = 2N2 − 1 (convolution.hpp).
  const std::size_t at = std::size_t(d1 + problem.n1 - 1) * (2 * problem.n2 - 1) + std::size_t(d2 + problem.n2 - 1);
  const auto coefficient = [&](int k) { return slice_kernels[std::size_t(k) * size + at]; };
  MeanTensors t;
  if (problem.scalar()) {  // Laurent: J = χ ⊛ e for each component
    for (int i = 0; i < 3; ++i) t.c[i * 3 + i] = coefficient(0);
    return t;
  }
  GS_EXPECTS(problem.inputs == 3 && problem.outputs >= 3 && problem.outputs <= 6,
          "kernel_tensors: expected the normal-vector pattern (3 inputs, 3 to 6 outputs)");
  const unsigned axes = d_axes(problem);
  for (const conv::Term& term : problem.pattern) {
    if (term.output < 3)
      t.c[term.output * 3 + term.input] += coefficient(term.kernel);
    else
      t.d[d_axis(axes, term.output) * 3 + term.input] += coefficient(term.kernel);
  }
  return t;
}


AveragedMatrices averaged_matrices(const GreenCoefficients& g, std::span<const MeanTensors> slices) {
  using C = std::complex<double>;
  GS_EXPECTS(int(slices.size()) == g.slices * g.members, "averaged_matrices: one mean tensor per (slice, member)");
  const int nz = g.slices, nm = g.orders, na = g.incidences;
  AveragedMatrices out{na, nm, nz, {}};
  const std::size_t n = out.n();
  out.matrices.resize(n * n * nm * na);
  // Block (q, p) of Ā = δ_qp (I + D̄_p) + G_qp C̄_p (green_tensors), written column block by column
  // block: e^{ikz|z_q − z_p|} is the running product of the steps away from p, as in the z-operator's
  // sweeps, so every entry costs O(1) and a matrix O(Nz²). OpenMP over (incidence, order): each
  // iteration writes its own matrix, the result does not depend on the thread count.
  const std::ptrdiff_t count = std::ptrdiff_t(na) * nm;
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t am = 0; am < count; ++am) {
    const std::size_t io = std::size_t(am);  // a·orders + m, the coefficients' index
    const int member = member_of(g, int(am / nm));
    const GreenTensors t = green_tensors(g, io);
    const C* step = &g.step[io * nz];
    const C* weight = &g.weight[io * nz];
    const C* depth = &g.depth[io * nz];
    C* matrix = &out.matrices[io * n * n];
    // matrix(q·3 + i, p·3 + j) = direct · first(i, j) + reflected · second(i, j)
    const auto put = [&](int q, int p, C direct, const Tensor& first, C reflected, const Tensor& second) {
      for (int j = 0; j < 3; ++j) {
        C* column = &matrix[(std::size_t(p) * 3 + j) * n + std::size_t(q) * 3];
        for (int i = 0; i < 3; ++i) column[i] = direct * first[i * 3 + j] + reflected * second[i * 3 + j];
      }
    };
    for (int p = 0; p < nz; ++p) {
      const MeanTensors& mean = slices[std::size_t(p) * g.members + member];  // engine slice p·members + member
      const Tensor& c = mean.c;
      const Tensor up = product(t.up, c), down = product(t.down, c), reflected = product(t.reflected, c);
      const C w = weight[p], wd = w * depth[p];
      Tensor diagonal = product(diagonal_green(t, g, io * nz + p), c);
      for (int i = 0; i < 3; ++i) {
        diagonal[i * 4] += 1.0;
        for (int j = 0; j < 3; ++j) diagonal[i * 3 + j] += mean.d[i * 3 + j];
      }
      put(p, p, 1.0, diagonal, 0.0, reflected);
      C e = 1.0;  // e^{ikz|z_q − z_p|}
      for (int q = p - 1; q >= 0; --q) {
        e *= step[q + 1];
        put(q, p, e * w, up, depth[q] * wd, reflected);
      }
      e = 1.0;
      for (int q = p + 1; q < nz; ++q) {
        e *= step[q];
        put(q, p, e * w, down, depth[q] * wd, reflected);
      }
    }
  }
  return out;
}

AveragedSweep averaged_sweep(const GreenCoefficients& g, std::span<const MeanTensors> slices) {
  using C = std::complex<double>;
  using Matrix3 = Eigen::Matrix3cd;
  using Matrix32 = Eigen::Matrix<C, 3, 2>;
  using Matrix23 = Eigen::Matrix<C, 2, 3>;
  GS_EXPECTS(int(slices.size()) == g.slices * g.members && !g.self.empty(),
             "averaged_sweep: one mean tensor per (slice, member), and the per-slice Green tables");
  const int nz = g.slices, nm = g.orders, na = g.incidences;
  using S = AveragedSweep;
  AveragedSweep out{na, nm, nz, {}};
  out.values.assign(std::size_t(na) * nz * S::entries * nm, C(0));
  const auto tensor = [](const Tensor& t) { return Eigen::Map<const Eigen::Matrix<C, 3, 3, Eigen::RowMajor>>(t.data()); };
  std::string failure;  // the first singular N_p, by (incidence, order)
  std::ptrdiff_t failed = std::ptrdiff_t(na) * nm;
  // OpenMP over (incidence, order): each sweeps its slices bottom-up (ρ_{p−1} needs ρ_p) and writes its
  // own entries, so the result does not depend on the thread count.
  const std::ptrdiff_t count = std::ptrdiff_t(na) * nm;
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t am = 0; am < count; ++am) {
    const int a = int(am / nm), m = int(am % nm), member = member_of(g, a);
    const std::size_t io = std::size_t(am);
    const GreenTensors t = green_tensors(g, io);
    Matrix32 e_plus, e_minus;  // Ẽ± = scale [ê, p̂±]; Π± = [ê, p̂±]ᵀ
    Matrix23 pi_plus, pi_minus;
    for (int c = 0; c < 3; ++c) {
      pi_plus(0, c) = pi_minus(0, c) = t.e[std::size_t(c)];
      pi_plus(1, c) = t.plus[std::size_t(c)];
      pi_minus(1, c) = t.minus[std::size_t(c)];
    }
    e_plus = t.scale * pi_plus.transpose();
    e_minus = t.scale * pi_minus.transpose();
    const C bottom = g.depth[io * nz + std::size_t(nz - 1)];
    Eigen::Matrix2cd rho = Eigen::Matrix2cd::Zero();
    rho(0, 0) = bottom * bottom * g.rs[io];
    rho(1, 1) = bottom * bottom * g.rp[io];
    const auto store = [&](int p, int entry, const auto& matrix) {  // row-major from the entry offset
      for (Eigen::Index i = 0; i < matrix.rows(); ++i)
        for (Eigen::Index j = 0; j < matrix.cols(); ++j)
          out.values[out.at(a, p, entry + int(i * matrix.cols() + j), m)] = matrix(i, j);
    };
    for (int p = nz - 1; p >= 0; --p) {
      const MeanTensors& mean = slices[std::size_t(p) * g.members + member];  // engine slice p·members + member
      const std::size_t i = io * nz + std::size_t(p);
      const Matrix3 c = tensor(mean.c);
      const Matrix3 lprime = Matrix3::Identity() + tensor(mean.d) + tensor(self_green(t, g, i)) * c;
      const Matrix23 phi = g.weight[i] * pi_minus * c, psi = g.weight[i] * pi_plus * c;
      const Matrix32 e_rho = e_plus * rho;
      const Matrix3 big_n = lprime + e_rho * phi;
      const Eigen::PartialPivLU<Matrix3> lu(big_n);
      const double largest = big_n.cwiseAbs().maxCoeff();
      const double pivot = lu.matrixLU().diagonal().cwiseAbs().minCoeff();
      if (!regular_factorisation(largest, pivot)) {
#pragma omp critical(averaged_sweep_failure)
        if (am < failed) {
          failed = am;
          failure = "the laterally averaged problem is singular for incidence " + std::to_string(a) + ", order index " +
                    std::to_string(m) + " at slice " + std::to_string(p) +
                    " (a guided resonance of the averaged stack?): use preconditioner: none";
        }
        break;
      }
      const Matrix3 inverse = lu.inverse();
      const Matrix32 gain_a = inverse * (e_rho + e_minus);
      const Matrix23 up = rho * phi + psi;
      store(p, S::inverse, inverse);
      store(p, S::gain_g, Matrix32(inverse * e_plus));
      store(p, S::gain_a, gain_a);
      store(p, S::up, up);
      store(p, S::down, phi);
      const C s = p > 0 ? g.step[i] : C(0);
      out.values[out.at(a, p, S::step, m)] = s;
      rho = s * s * (rho - up * gain_a);
    }
  }
  GS_EXPECTS(failure.empty(), failure);
  return out;
}

LocalParts local_parts(const GreenCoefficients& g, const conv::Problem& problem,
                       std::span<const std::complex<double>> kernels, std::span<const MeanTensors> mean) {
  using C = std::complex<double>;
  const int nz = g.slices, nm = g.orders, na = g.incidences;
  GS_EXPECTS(int(mean.size()) == nz * g.members && std::size_t(nm) == problem.field_size() &&
              kernels.size() == problem.kernels_total() && problem.slices == nz * g.members,
          "local_parts: sizes of the problem, kernels and Green coefficients disagree");
  LocalParts out;
  out.incidences = na;
  out.orders = nm;
  out.slices = nz;
  out.members = g.members;
  out.n1 = problem.n1;
  out.n2 = problem.n2;
  out.kernels_per_slice = problem.kernels;
  for (int a = 0; a < na; ++a) out.member.push_back(member_of(g, a));
  if (problem.scalar())
    out.source = {{0, 0, 0}, {1, 1, 0}, {2, 2, 0}};
  else
    for (const conv::Term& t : problem.pattern)
      if (t.output < 3)
        out.source.push_back(t);
      else
        out.d.push_back({d_axis(d_axes(problem), t.output), t.input, t.kernel});
  out.kernels = kernels;
  // G_pp per (a, m, p), row-major 3×3 (green_tensors); L̄ = I + D̄ + G C̄ per (a, m, p).
  out.green.resize(std::size_t(na) * nm * nz * 9);
  out.averaged.resize(out.green.size());
  for (std::size_t io = 0; io < std::size_t(na) * nm; ++io) {
    const GreenTensors t = green_tensors(g, io);
    const int a = int(io / std::size_t(nm));
    for (int p = 0; p < nz; ++p) {
      const Tensor d = diagonal_green(t, g, io * nz + p);
      std::copy(d.begin(), d.end(), &out.green[(io * nz + p) * 9]);
      const MeanTensors& slice_mean = mean[std::size_t(p) * g.members + member_of(g, a)];  // the kernels a's rhs see
      C* lbar = &out.averaged[(io * nz + p) * 9];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          C v = (i == j ? 1.0 : 0.0) + slice_mean.d[i * 3 + j];
          for (int k = 0; k < 3; ++k) v += d[i * 3 + k] * slice_mean.c[k * 3 + j];
          lbar[i * 3 + j] = v;
        }
    }
  }
  // Components some term can couple: D terms (axis, input); source terms (o, input) through G_pp[·][o].
  std::array<bool, 9> g_nonzero{};
  for (std::size_t e = 0; e < out.green.size(); ++e)
    if (out.green[e] != C(0)) g_nonzero[e % 9] = true;
  std::array<int, 3> group{0, 1, 2};
  const auto join = [&](int c, int d) {
    const int low = std::min(group[c], group[d]), high = std::max(group[c], group[d]);
    for (int& x : group)
      if (x == high) x = low;
  };
  for (const conv::Term& t : out.d) join(t.output, t.input);
  for (const conv::Term& t : out.source)
    for (int ci = 0; ci < 3; ++ci)
      if (g_nonzero[std::size_t(ci * 3 + t.output)]) join(ci, t.input);
  out.groups = group;
  return out;
}

LocalMatrices local_matrices(const GreenCoefficients& g, const conv::Problem& problem,
                             std::span<const std::complex<double>> kernels, std::span<const MeanTensors> mean) {
  using C = std::complex<double>;
  LocalParts parts = local_parts(g, problem, kernels, mean);
  const int nz = g.slices, nm = g.orders, na = g.incidences;
  LocalMatrices out{na, nm, nz, {}, std::move(parts.averaged)};
  const std::size_t n = out.n();
  const std::size_t ksize = problem.kernel_size();
  out.matrices.assign(std::size_t(na) * nz * n * n, C(0));
  const std::ptrdiff_t count = std::ptrdiff_t(na) * nz;
#pragma omp parallel for schedule(dynamic)
  for (std::ptrdiff_t ap = 0; ap < count; ++ap) {
    const int a = int(ap / nz), p = int(ap % nz);
    const std::size_t engine_slice = std::size_t(p) * g.members + member_of(g, a);  // the kernels a's rhs see
    Eigen::MatrixXcd c, d;  // the slice's source and D over all orders (green_tensors.hpp)
    slice_operators(problem, kernels.data() + engine_slice * problem.kernels * ksize, nm, c, d);
    // L = I + D + G_pp C, G_pp one 3×3 per order acting on the rows of that order.
    Eigen::Map<Eigen::MatrixXcd> l(&out.matrices[std::size_t(ap) * n * n], Eigen::Index(n), Eigen::Index(n));
    l = d;
    l.diagonal().array() += 1.0;
    for (int m = 0; m < nm; ++m) {
      const C* gm = &parts.green[((std::size_t(a) * nm + m) * nz + p) * 9];
      for (int row = 0; row < 3; ++row)
        for (int k = 0; k < 3; ++k)
          if (gm[row * 3 + k] != C(0)) l.row(row * nm + m) += gm[row * 3 + k] * c.row(k * nm + m);
    }
  }
  return out;
}

CoarseMatrices coarse_matrices(std::span<const ZGrid> grids, std::span<const FloquetOrders> orders, const conv::Problem& problem,
                               std::span<const std::complex<double>> kernels, int mc) {
  using C = std::complex<double>;
  GS_EXPECTS(!orders.empty() && mc >= 1, "coarse_matrices: no incidence, or no coarse harmonics");
  const int m1 = orders[0].m1_max, m2 = orders[0].m2_max, mc1 = std::min(mc, m1), mc2 = std::min(mc, m2);
  GS_EXPECTS(!grids.empty(), "coarse_matrices: no grid");
  const int nz = grids[0].slices(), na = int(orders.size());
  GS_EXPECTS(problem.n1 == 2 * m1 + 1 && problem.n2 == 2 * m2 + 1 && kernels.size() == problem.kernels_total(),
             "coarse_matrices: sizes of the problem, kernels and orders disagree");
  CoarseMatrices out{na, nz, mc1, mc2, {}, {}};
  // The coarse orders (c1, c2), in the harmonic layout of both the coarse and the full set.
  std::vector<std::array<int, 2>> harmonic;
  for (int c1 = -mc1; c1 <= mc1; ++c1)
    for (int c2 = -mc2; c2 <= mc2; ++c2) {
      harmonic.push_back({c1, c2});
      out.orders.push_back((c1 + m1) * (2 * m2 + 1) + (c2 + m2));
    }
  const int nc = int(harmonic.size());
  // I + G_qp(m) per (incidence, coarse order): Ā's assembly with C̄ = I, D̄ = 0 on the coarse orders.
  std::vector<FloquetOrders> restricted(orders.begin(), orders.end());
  for (FloquetOrders& f : restricted) {
    std::vector<Order> kept;
    for (int index : out.orders) kept.push_back(f.orders[std::size_t(index)]);
    f.orders = std::move(kept);
    f.m1_max = mc1;
    f.m2_max = mc2;
  }
  MeanTensors identity;
  for (int i = 0; i < 3; ++i) identity.c[i * 4] = 1.0;
  const GreenCoefficients coefficients = green_coefficients(grids, restricted);
  // The kernels of incidence a's slice p: engine slice p·members + member (problem.hpp).
  const int members = coefficients.members;
  GS_EXPECTS(problem.slices == nz * members, "coarse_matrices: the problem's slices are not slices × members");
  const std::vector<MeanTensors> identities(std::size_t(nz) * members, identity);
  const AveragedMatrices green = averaged_matrices(coefficients, identities);
  const std::size_t ng = green.n();  // 3·Nz
  // C_s(Δ), D_s(Δ) per (engine slice s, Δ1 ∈ [−2Mc1, 2Mc1], Δ2 ∈ [−2Mc2, 2Mc2]).
  const int w1 = 4 * mc1 + 1, w2 = 4 * mc2 + 1;
  const std::size_t per_slice = std::size_t(problem.kernels) * problem.kernel_size();
  std::vector<MeanTensors> tensors(std::size_t(problem.slices) * w1 * w2);
  for (int p = 0; p < problem.slices; ++p)
    for (int d1 = -2 * mc1; d1 <= 2 * mc1; ++d1)
      for (int d2 = -2 * mc2; d2 <= 2 * mc2; ++d2)
        tensors[(std::size_t(p) * w1 + (d1 + 2 * mc1)) * w2 + (d2 + 2 * mc2)] =
            kernel_tensors(problem, kernels.subspan(std::size_t(p) * per_slice, per_slice), d1, d2);
  const std::size_t n = out.n();
  out.matrices.assign(n * n * std::size_t(na), C(0));
  // Column block (p, m') at a time: OpenMP over (incidence, slice p); each writes its own columns.
  const std::ptrdiff_t count = std::ptrdiff_t(na) * nz;
#pragma omp parallel for schedule(dynamic)
  for (std::ptrdiff_t ap = 0; ap < count; ++ap) {
    const int a = int(ap / nz), p = int(ap % nz);
    const std::size_t engine_slice = std::size_t(p) * members + member_of(coefficients, a);
    C* matrix = &out.matrices[std::size_t(a) * n * n];
    for (int mp = 0; mp < nc; ++mp)
      for (int m = 0; m < nc; ++m) {
        const int d1 = harmonic[m][0] - harmonic[mp][0], d2 = harmonic[m][1] - harmonic[mp][1];
        const MeanTensors& t = tensors[(engine_slice * w1 + (d1 + 2 * mc1)) * w2 + (d2 + 2 * mc2)];
        const C* ig = &green.matrices[(std::size_t(a) * nc + m) * ng * ng];  // I + G at order m, column-major
        for (int q = 0; q < nz; ++q)
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              C v = 0;  // (G_qp C_p(Δ))_ij
              for (int k = 0; k < 3; ++k) {
                const C gik = ig[(std::size_t(p) * 3 + k) * ng + std::size_t(q) * 3 + i] - (q == p && i == k ? 1.0 : 0.0);
                v += gik * t.c[k * 3 + j];
              }
              if (q == p) v += (m == mp && i == j ? 1.0 : 0.0) + t.d[i * 3 + j];
              const std::size_t row = (std::size_t(q) * 3 + i) * nc + m, column = (std::size_t(p) * 3 + j) * nc + mp;
              matrix[column * n + row] = v;
            }
      }
  }
  return out;
}

bool regular_factorisation(double largest, double smallest_pivot) {
  return std::isfinite(largest) && smallest_pivot > 1e-13 * largest;  // NaN compares false
}

void expect_regular_coarse(std::span<const double> largest, std::span<const double> smallest_pivot) {
  GS_EXPECTS(largest.size() == smallest_pivot.size(), "expect_regular_coarse: sizes");
  for (std::size_t a = 0; a < largest.size(); ++a)
    GS_EXPECTS(regular_factorisation(largest[a], smallest_pivot[a]),
               "the coarse problem (A at the lowest orders) is singular for incidence " + std::to_string(a) +
                   ": use preconditioner: averaged or none");
}

void expect_regular_local(std::span<const double> largest, std::span<const double> smallest_pivot, int slices) {
  GS_EXPECTS(largest.size() == smallest_pivot.size() && slices > 0, "expect_regular_local: sizes");
  for (std::size_t ap = 0; ap < largest.size(); ++ap)
    GS_EXPECTS(regular_factorisation(largest[ap], smallest_pivot[ap]),
            "the slice block of slice " + std::to_string(ap % slices) + " is singular");
}

namespace {

/// LU factors of `count` n×n matrices with partial pivoting, rounded to Real. Each matrix's unknowns
/// form up to three groups that no element couples (component_groups; one group when all couple),
/// ordered group by group, each group's unknowns in their order: matrix k is block diagonal in that
/// order, blocks of sizes[k·3 + g] (0: no such group), and each block S_g has factors P S_g = L U.
/// A block of size m is stored column by column with the real parts of a column's m values first,
/// then their imaginary parts (planar: the substitutions' inner loops are then plain real
/// multiply-adds, which vectorise), the blocks one after another from lu[offsets[k]]. Each column
/// holds L below the diagonal (its unit diagonal implied), U above it and 1/U_jj on it (a
/// multiplication instead of a division in the back substitution). Solving A x = b: v[i] =
/// b[rows[k·n + i]] (the grouping and the pivoting), v ← U⁻¹ L⁻¹ v per block, x[columns[k·n + i]] = v[i].
template <class Real>
struct LuFactors {
  std::size_t n = 0;
  std::vector<Real> lu;
  std::vector<std::size_t> offsets;
  std::vector<int> rows, columns, sizes;
};

/// The Cartesian components (x, y, z) of a matrix's unknowns that couple: group[c] is the smallest
/// component c is connected to through non-zero elements between the components. Without conical
/// incidence (φ = 0, every t̂ along x, ê along y) and with mean tensors and kernels that do not mix y
/// with x, z (1D gratings), Ā and L_p split exactly into a y part and an (x, z) part.
std::array<int, 3> component_groups(const std::complex<double>* a, std::size_t n, const std::vector<int>& component) {
  bool coupled[3][3] = {};
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < n; ++i)
      if (component[i] != component[j] && a[j * n + i] != 0.0) coupled[component[i]][component[j]] = true;
  std::array<int, 3> group{0, 1, 2};
  for (int pass = 0; pass < 2; ++pass)  // two passes settle the connectivity of three nodes
    for (int c = 0; c < 3; ++c)
      for (int d = 0; d < 3; ++d)
        if (coupled[c][d] || coupled[d][c]) group[c] = group[d] = std::min(group[c], group[d]);
  return group;
}

}  // namespace

std::array<int, 3> coupled_components(const LocalMatrices& local) {
  const std::size_t n = local.n(), count = local.count();
  GS_EXPECTS(local.matrices.size() == n * n * count, "coupled_components: matrix sizes");
  std::vector<int> component(n);
  for (std::size_t i = 0; i < n; ++i) component[i] = int(i / std::size_t(local.orders));
  // The union of every matrix's couplings: merge each matrix's groups into the running ones.
  std::array<int, 3> group{0, 1, 2};
  for (std::size_t k = 0; k < count && group != std::array<int, 3>{0, 0, 0}; ++k) {
    const std::array<int, 3> mine = component_groups(&local.matrices[k * n * n], n, component);
    for (int pass = 0; pass < 2; ++pass)
      for (int c = 0; c < 3; ++c)
        for (int d = 0; d < 3; ++d)
          if (mine[c] == mine[d] || group[c] == group[d]) group[c] = group[d] = std::min(group[c], group[d]);
  }
  return group;
}

namespace {

/// Partial-pivoting LU of the n×n column-major matrix a in place, group by group (component_groups):
/// each group's submatrix S_g is factored alone, P S_g = L U, and its factors are written back at
/// the group's elements of a (elements between groups are zero and stay so). rows, columns, sizes:
/// LuFactors' arrays of this matrix. Returns the smallest |U_ii|. Factoring the groups alone is
/// exact: partial pivoting on all of a would choose the same pivots (its candidates outside the
/// group are zero), at a third of the flops for a y | (x, z) split.
double factor_in_place(std::complex<double>* a, std::size_t n, const std::vector<int>& component, int* rows,
                       int* columns, int* sizes) {
  const std::array<int, 3> group = component_groups(a, n, component);
  double smallest = INFINITY;
  std::size_t start = 0;
  for (int g = 0; g < 3; ++g) {
    std::vector<std::size_t> members;  // ascending
    for (std::size_t i = 0; i < n; ++i)
      if (group[component[i]] == g) members.push_back(i);
    sizes[g] = int(members.size());
    if (members.empty()) continue;
    const Eigen::Index m = Eigen::Index(members.size());
    Eigen::MatrixXcd sub(m, m);
    for (Eigen::Index j = 0; j < m; ++j)
      for (Eigen::Index i = 0; i < m; ++i) sub(i, j) = a[members[j] * n + members[i]];
    const Eigen::PartialPivLU<Eigen::MatrixXcd> lu(sub);
    // Eigen's P moves row i to row indices(i) (P S = L U): row indices(i) of P S is row i of S.
    const auto& moved_to = lu.permutationP().indices();
    for (Eigen::Index i = 0; i < m; ++i) {
      rows[start + std::size_t(moved_to(i))] = int(members[std::size_t(i)]);
      columns[start + std::size_t(i)] = int(members[std::size_t(i)]);
    }
    for (Eigen::Index j = 0; j < m; ++j)
      for (Eigen::Index i = 0; i < m; ++i) a[members[j] * n + members[i]] = lu.matrixLU()(i, j);
    smallest = std::min(smallest, lu.matrixLU().diagonal().cwiseAbs().minCoeff());
    start += members.size();
  }
  return smallest;
}

/// Factors the matrices in place in complex128 (OpenMP over the matrices; factor_in_place, with
/// component[i] the Cartesian component of unknown i), checks them with `expect_regular` (largest
/// element, smallest pivot) and returns the factors rounded to Real.
template <class Real, class Check>
LuFactors<Real> factor(std::vector<std::complex<double>>& matrices, std::size_t n, std::size_t count,
                       const std::vector<int>& component, Check expect_regular) {
  GS_EXPECTS(matrices.size() == n * n * count && component.size() == n, "factor: matrix sizes");
  LuFactors<Real> out{n, {}, std::vector<std::size_t>(count), std::vector<int>(n * count), std::vector<int>(n * count),
                      std::vector<int>(3 * count)};
  std::vector<double> largest(count), smallest_pivot(count);
#pragma omp parallel for schedule(dynamic)
  for (std::ptrdiff_t k = 0; k < std::ptrdiff_t(count); ++k) {
    std::complex<double>* a = &matrices[std::size_t(k) * n * n];
    double scale = 0;  // the largest |A_ij|², infinite where an element is not finite
    for (std::size_t i = 0; i < n * n; ++i) {
      const double v = std::norm(a[i]);
      scale = std::isfinite(v) ? std::max(scale, v) : INFINITY;
    }
    largest[std::size_t(k)] = std::sqrt(scale);
    const std::size_t at = std::size_t(k) * n;
    smallest_pivot[std::size_t(k)] =
        factor_in_place(a, n, component, &out.rows[at], &out.columns[at], &out.sizes[3 * std::size_t(k)]);
  }
  std::size_t total = 0;
  for (std::size_t k = 0; k < count; ++k) {
    out.offsets[k] = total;
    for (int g = 0; g < 3; ++g) total += 2 * std::size_t(out.sizes[3 * k + g]) * std::size_t(out.sizes[3 * k + g]);
  }
  out.lu.resize(total);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t k = 0; k < std::ptrdiff_t(count); ++k) {
    const std::complex<double>* a = &matrices[std::size_t(k) * n * n];
    const int* columns = &out.columns[std::size_t(k) * n];
    Real* block = &out.lu[out.offsets[std::size_t(k)]];
    for (int g = 0; g < 3; ++g) {
      const std::size_t m = std::size_t(out.sizes[3 * std::size_t(k) + g]);
      for (std::size_t j = 0; j < m; ++j) {
        Real* column = block + j * 2 * m;
        for (std::size_t i = 0; i < m; ++i) {
          const std::complex<double> v = a[std::size_t(columns[j]) * n + std::size_t(columns[i])];
          const std::complex<double> stored = i == j ? 1.0 / v : v;
          column[i] = Real(stored.real());
          column[m + i] = Real(stored.imag());
        }
      }
      block += 2 * m * m;
      columns += m;
    }
  }
  expect_regular(std::span<const double>(largest), std::span<const double>(smallest_pivot));
  return out;
}

/// The panel update of both substitutions: v_r[i] −= Σ_c column_c[i] x_r[c] for rows [begin, end),
/// the panel's columns c (real parts cr[c], imaginary parts ci[c]) and the K vectors (planar: v_r's
/// real parts at re[r·stride], imaginary parts at im[r·stride]), summed over the panel in double
/// before one store per row.
template <class Real, std::size_t K, std::size_t Panel>
void panel_update(const Real* const (&cr)[Panel], const Real* const (&ci)[Panel], const double (&xr)[K][Panel],
                  const double (&xi)[K][Panel], std::size_t begin, std::size_t end, std::size_t stride,
                  double* __restrict__ re, double* __restrict__ im) {
  for (std::size_t i = begin; i < end; ++i) {
    double sr[K] = {}, si[K] = {};
    for (std::size_t c = 0; c < Panel; ++c) {
      const double ar = double(cr[c][i]), ai = double(ci[c][i]);
      for (std::size_t r = 0; r < K; ++r) {
        sr[r] += ar * xr[r][c] - ai * xi[r][c];
        si[r] += ar * xi[r][c] + ai * xr[r][c];
      }
    }
    for (std::size_t r = 0; r < K; ++r) {
      re[r * stride + i] -= sr[r];
      im[r * stride + i] -= si[r];
    }
  }
}

/// v ← S⁻¹ v for K vectors of n values, planar (vector r's real parts at re[r·stride], imaginary
/// parts at im[r·stride]), already gathered in the order of P S, from the factors of one n×n block S
/// (`lu`: its 2n² values, LuFactors): the forward substitution with the unit lower L, then the back
/// substitution with U, in panels of `panel` columns: the panel's own triangle first, then one pass
/// over the rest of the vector for all its columns (a pass per column would load and store the
/// vector `panel` times as often). The factors are read contiguously: n² complex multiply-adds per
/// vector, as a product with S⁻¹. Sums in double.
template <class Real, std::size_t K>
void lu_solve_together(const Real* __restrict__ lu, std::size_t n, std::size_t stride, double* __restrict__ re,
                       double* __restrict__ im) {
  constexpr std::size_t panel = 4;
  const auto column = [&](std::size_t j) { return lu + 2 * j * n; };  // real parts; imaginary at + n
  // L: columns [j, j + w), then rows [j + w, n) for all of them
  for (std::size_t j = 0; j < n; j += panel) {
    const std::size_t w = std::min(panel, n - j);
    double xr[K][panel] = {}, xi[K][panel] = {};
    const Real* cr[panel] = {};
    const Real* ci[panel] = {};
    for (std::size_t c = 0; c < w; ++c) {
      cr[c] = column(j + c);
      ci[c] = cr[c] + n;
      for (std::size_t r = 0; r < K; ++r) {
        double *yr = re + r * stride, *yi = im + r * stride;
        xr[r][c] = yr[j + c];
        xi[r][c] = yi[j + c];
        for (std::size_t i = c + 1; i < w; ++i) {
          yr[j + i] -= double(cr[c][j + i]) * xr[r][c] - double(ci[c][j + i]) * xi[r][c];
          yi[j + i] -= double(cr[c][j + i]) * xi[r][c] + double(ci[c][j + i]) * xr[r][c];
        }
      }
    }
    if (w < panel) break;  // the last, partial panel has nothing below it
    panel_update<Real, K, panel>(cr, ci, xr, xi, j + panel, n, stride, re, im);
  }
  // U: columns [j − w, j) from the last, then rows [0, j − w) for all of them
  for (std::size_t j = n; j > 0;) {
    const std::size_t w = std::min(panel, j), first = j - w;
    double xr[K][panel] = {}, xi[K][panel] = {};
    const Real* cr[panel] = {};
    const Real* ci[panel] = {};
    for (std::size_t c = w; c-- > 0;) {
      const std::size_t col = first + c;
      cr[c] = column(col);
      ci[c] = cr[c] + n;
      const double dr = double(cr[c][col]), di = double(ci[c][col]);  // 1/U_col,col
      for (std::size_t r = 0; r < K; ++r) {
        double *yr = re + r * stride, *yi = im + r * stride;
        xr[r][c] = dr * yr[col] - di * yi[col];
        xi[r][c] = dr * yi[col] + di * yr[col];
        yr[col] = xr[r][c];
        yi[col] = xi[r][c];
        for (std::size_t i = first; i < col; ++i) {
          yr[i] -= double(cr[c][i]) * xr[r][c] - double(ci[c][i]) * xi[r][c];
          yi[i] -= double(cr[c][i]) * xi[r][c] + double(ci[c][i]) * xr[r][c];
        }
      }
    }
    for (std::size_t c = w; c < panel; ++c) {  // a partial panel: zero columns, a full panel's loop (vectorised)
      cr[c] = cr[0];
      ci[c] = ci[0];
    }
    panel_update<Real, K, panel>(cr, ci, xr, xi, 0, first, stride, re, im);
    j = first;
  }
}

/// v ← A⁻¹ v for k vectors (planar, vector r at re[r·n], im[r·n], gathered by rows[]: LuFactors)
/// from matrix `matrix`'s factors, block by block.
template <class Real>
void lu_solve(const LuFactors<Real>& factors, std::size_t matrix, double* re, double* im, std::size_t k) {
  const std::size_t n = factors.n;
  const Real* lu = &factors.lu[factors.offsets[matrix]];
  std::size_t start = 0;
  for (int g = 0; g < 3; ++g) {
    const std::size_t m = std::size_t(factors.sizes[3 * matrix + g]);
    if (m == 0) continue;
    std::size_t r = 0;
    for (; r + 2 <= k; r += 2) lu_solve_together<Real, 2>(lu, m, n, re + r * n + start, im + r * n + start);
    if (r < k) lu_solve_together<Real, 1>(lu, m, n, re + r * n + start, im + r * n + start);
    lu += 2 * m * m;
    start += m;
  }
}

template <class Real>
class HostPreconditioner final : public Preconditioner<Real> {
 public:
  using typename Preconditioner<Real>::Complex;
  HostPreconditioner(AveragedSweep averaged, LocalMatrices local, std::vector<int> rhs_incidence)
      : orders_(averaged.orders), slices_(averaged.slices), rhs_(std::move(rhs_incidence)),
        averaged_(std::move(averaged)), local_averaged_(std::move(local.averaged)) {
    GS_EXPECTS(local.incidences == averaged_.incidences && local.orders == orders_ && local.slices == slices_,
            "preconditioner: the averaged and local parts disagree in size");
    for (int a : rhs_) GS_EXPECTS(a >= 0 && a < averaged_.incidences, "preconditioner: rhs names an unknown incidence");
    const int orders = orders_, slices = slices_;
    averaged_only_ = local.matrices.empty();
    if (!averaged_only_) {
      // Unknown i of L_p is (component i / orders, order i % orders).
      std::vector<int> local_component(local.n());
      for (std::size_t i = 0; i < local.n(); ++i) local_component[i] = int(i / std::size_t(orders));
      local_ = factor<Real>(local.matrices, local.n(), local.count(), local_component,
                            [&](auto largest, auto pivots) { expect_regular_local(largest, pivots, slices); });
      const BatchLayout l{std::size_t(slices_), rhs_.size(), 3 * std::size_t(orders_)};
      t1_.resize(l.size());
      t2_.resize(l.size());
    }
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    // per thread: v_p of one (rhs, order)'s averaged sweep (3·Nz complex128), or the gathered values
    // (real and imaginary parts) of one (slice, rhs) block of L⁻¹
    scratch_per_thread_ = std::max(6 * std::size_t(slices_), 2 * local.n());
    scratch_.resize(std::size_t(threads) * scratch_per_thread_);
  }

  [[nodiscard]] Memory memory() const override { return Memory::host; }

  /// P x = L⁻¹ L̄ Ā⁻¹ x (preconditioner.hpp).
  void apply(const Complex* x, Complex* y, Stream) override {
    if (averaged_only_) return apply_averaged(x, y);
    apply_averaged(x, t1_.data());
    apply_local_averaged(t1_.data(), t2_.data());
    apply_local(t2_.data(), y);
  }

 private:
  double* thread_scratch() {
#ifdef _OPENMP
    return &scratch_[std::size_t(omp_get_thread_num()) * scratch_per_thread_];
#else
    return scratch_.data();
#endif
  }

  /// y ← L⁻¹ x per (slice, rhs) block.
  void apply_local(const Complex* x, Complex* y) {
    const std::size_t n = local_.n, nr = rhs_.size();
    const std::ptrdiff_t count = std::ptrdiff_t(slices_) * std::ptrdiff_t(nr);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t pr = 0; pr < count; ++pr) {
      double *re = thread_scratch(), *im = re + n;
      const std::size_t p = std::size_t(pr) / nr, r = std::size_t(pr) % nr, k = std::size_t(rhs_[r]) * slices_ + p;
      const Complex* in = x + std::size_t(pr) * n;
      const int* rows = &local_.rows[k * n];
      for (std::size_t i = 0; i < n; ++i) {
        re[i] = double(in[rows[i]].real());
        im[i] = double(in[rows[i]].imag());
      }
      lu_solve(local_, k, re, im, 1);
      const int* columns = &local_.columns[k * n];
      for (std::size_t i = 0; i < n; ++i) y[std::size_t(pr) * n + std::size_t(columns[i])] = Complex(Real(re[i]), Real(im[i]));
    }
  }

  /// y ← L̄ x: a 3×3 per (slice, rhs, order).
  void apply_local_averaged(const Complex* x, Complex* y) {
    using C = std::complex<double>;
    const std::size_t nm = std::size_t(orders_), nr = rhs_.size();
    for (std::size_t p = 0; p < std::size_t(slices_); ++p)
      for (std::size_t r = 0; r < nr; ++r)
        for (std::size_t m = 0; m < nm; ++m) {
          const C* l = &local_averaged_[((std::size_t(rhs_[r]) * nm + m) * slices_ + p) * 9];
          const std::size_t base = (p * nr + r) * 3 * nm + m;
          const C v[3] = {C(x[base]), C(x[base + nm]), C(x[base + 2 * nm])};
          for (int i = 0; i < 3; ++i) y[base + i * nm] = Complex(l[i * 3] * v[0] + l[i * 3 + 1] * v[1] + l[i * 3 + 2] * v[2]);
        }
  }

  /// y ← Ā⁻¹ x by the averaged sweep (AveragedSweep), one (rhs, order) at a time, in complex128: v_p
  /// from the bottom up, then x_p from the top down.
  void apply_averaged(const Complex* x, Complex* y) {
    using C = std::complex<double>;
    using S = AveragedSweep;
    const int nz = slices_, nm = orders_, nr = int(rhs_.size());
    const std::size_t block = 3 * std::size_t(nm);
    const std::ptrdiff_t count = std::ptrdiff_t(nr) * nm;
#pragma omp parallel for schedule(static) if (count * nz >= 4096)
    for (std::ptrdiff_t rm = 0; rm < count; ++rm) {
      const int r = int(rm / nm), m = int(rm % nm), a = rhs_[std::size_t(r)];
      C* v = reinterpret_cast<C*>(thread_scratch());  // v_p at 3p
      const auto value = [&](int p, int entry) { return averaged_.values[averaged_.at(a, p, entry, m)]; };
      const auto element = [&](int p, int c) { return (std::size_t(p) * nr + r) * block + std::size_t(c) * nm + m; };
      // Row i of the 3×2 matrix at `entry` of slice p times the amplitudes w.
      const auto row_times = [&](int p, int entry, int i, const C (&w)[2]) {
        return value(p, entry + 2 * i) * w[0] + value(p, entry + 2 * i + 1) * w[1];
      };
      // w ← s (w + M u), M the 2×3 matrix at `entry` of slice p: the amplitudes carried to the next slice.
      const auto carry = [&](C (&w)[2], int p, int entry, const C* u, C s) {
        for (int k = 0; k < 2; ++k)
          w[k] = s * (w[k] + value(p, entry + 3 * k) * u[0] + value(p, entry + 3 * k + 1) * u[1] +
                      value(p, entry + 3 * k + 2) * u[2]);
      };
      C g[2] = {0.0, 0.0};
      for (int p = nz - 1; p >= 0; --p) {
        const C b[3] = {C(x[element(p, 0)]), C(x[element(p, 1)]), C(x[element(p, 2)])};
        C* vp = v + 3 * p;
        for (int i = 0; i < 3; ++i)
          vp[i] = value(p, S::inverse + 3 * i) * b[0] + value(p, S::inverse + 3 * i + 1) * b[1] +
                  value(p, S::inverse + 3 * i + 2) * b[2] - row_times(p, S::gain_g, i, g);
        if (p > 0) carry(g, p, S::up, vp, value(p, S::step));
      }
      C amplitude[2] = {0.0, 0.0};
      for (int p = 0; p < nz; ++p) {
        C* xp = v + 3 * p;
        for (int i = 0; i < 3; ++i) {
          xp[i] -= row_times(p, S::gain_a, i, amplitude);
          y[element(p, i)] = Complex(xp[i]);
        }
        if (p + 1 < nz) carry(amplitude, p, S::down, xp, value(p + 1, S::step));
      }
    }
  }

  int orders_, slices_;
  bool averaged_only_ = false;
  std::vector<int> rhs_;
  AveragedSweep averaged_;
  LuFactors<Real> local_;
  std::vector<std::complex<double>> local_averaged_;
  std::vector<double> scratch_;
  std::size_t scratch_per_thread_ = 0;
  std::vector<Complex> t1_, t2_;
};

/// The coarse preconditioner on the host (make_host_coarse_preconditioner).
template <class Real>
class HostCoarsePreconditioner final : public Preconditioner<Real> {
 public:
  using typename Preconditioner<Real>::Complex;
  HostCoarsePreconditioner(std::unique_ptr<Preconditioner<Real>> averaged, CoarseMatrices coarse,
                           std::vector<int> rhs_incidence, int orders)
      : averaged_(std::move(averaged)), rhs_(std::move(rhs_incidence)), orders_(orders), coarse_orders_(coarse.orders) {
    for (int a : rhs_) GS_EXPECTS(a >= 0 && a < coarse.incidences, "coarse preconditioner: rhs names an unknown incidence");
    // Unknown u of A_c is (slice, component (u / coarse orders) mod 3, coarse order).
    std::vector<int> component(coarse.n());
    for (std::size_t u = 0; u < coarse.n(); ++u) component[u] = int(u / coarse.orders.size() % 3);
    factors_ = factor<Real>(coarse.matrices, coarse.n(), std::size_t(coarse.incidences), component,
                            [](auto largest, auto pivots) { expect_regular_coarse(largest, pivots); });
    std::size_t most = 0;
    for (int a = 0; a < coarse.incidences; ++a) {
      std::vector<int> mine;
      for (std::size_t r = 0; r < rhs_.size(); ++r)
        if (rhs_[r] == a) mine.push_back(int(r));
      most = std::max(most, mine.size());
      rhs_of_.push_back(std::move(mine));
    }
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    scratch_per_thread_ = 2 * factors_.n * most;
    scratch_.resize(std::size_t(threads) * scratch_per_thread_);
  }

  [[nodiscard]] Memory memory() const override { return Memory::host; }

  void apply(const Complex* x, Complex* y, Stream stream) override {
    averaged_->apply(x, y, stream);
    const std::size_t n = factors_.n, nc = coarse_orders_.size(), nm = std::size_t(orders_), nr = rhs_.size();
    // Coarse unknown u = (p·3 + i)·nc + mc of rhs r in the batched layout.
    const auto at = [&](std::size_t u, std::size_t r) {
      const std::size_t pi = u / nc;
      return ((pi / 3) * nr + r) * 3 * nm + (pi % 3) * nm + std::size_t(coarse_orders_[u % nc]);
    };
    // Per incidence, all its rhs in one pass over the factors (the factors' n² values dominate the
    // memory traffic); OpenMP over the incidences.
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t ia = 0; ia < std::ptrdiff_t(rhs_of_.size()); ++ia) {
      const std::size_t a = std::size_t(ia);
      const std::vector<int>& mine = rhs_of_[a];
#ifdef _OPENMP
      double* re = &scratch_[std::size_t(omp_get_thread_num()) * scratch_per_thread_];
#else
      double* re = scratch_.data();
#endif
      double* im = re + mine.size() * n;
      const int* rows = &factors_.rows[a * n];
      for (std::size_t k = 0; k < mine.size(); ++k)
        for (std::size_t i = 0; i < n; ++i) {
          const Complex v = x[at(std::size_t(rows[i]), std::size_t(mine[k]))];
          re[k * n + i] = double(v.real());
          im[k * n + i] = double(v.imag());
        }
      lu_solve(factors_, a, re, im, mine.size());
      const int* columns = &factors_.columns[a * n];
      for (std::size_t k = 0; k < mine.size(); ++k)
        for (std::size_t i = 0; i < n; ++i)
          y[at(std::size_t(columns[i]), std::size_t(mine[k]))] = Complex(Real(re[k * n + i]), Real(im[k * n + i]));
    }
  }

 private:
  std::unique_ptr<Preconditioner<Real>> averaged_;
  std::vector<int> rhs_;
  int orders_;
  std::vector<int> coarse_orders_;
  std::vector<std::vector<int>> rhs_of_;  // per incidence, its rhs
  LuFactors<Real> factors_;
  std::vector<double> scratch_;
  std::size_t scratch_per_thread_ = 0;
};

}  // namespace

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_host_coarse_preconditioner(std::unique_ptr<Preconditioner<Real>> averaged,
                                                                      CoarseMatrices coarse, std::vector<int> rhs_incidence,
                                                                      int orders) {
  return std::make_unique<HostCoarsePreconditioner<Real>>(std::move(averaged), std::move(coarse),
                                                          std::move(rhs_incidence), orders);
}
template std::unique_ptr<Preconditioner<float>> make_host_coarse_preconditioner<float>(
    std::unique_ptr<Preconditioner<float>>, CoarseMatrices, std::vector<int>, int);
template std::unique_ptr<Preconditioner<double>> make_host_coarse_preconditioner<double>(
    std::unique_ptr<Preconditioner<double>>, CoarseMatrices, std::vector<int>, int);

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_host_preconditioner(AveragedSweep averaged, LocalMatrices local,
                                                               std::vector<int> rhs_incidence) {
  return std::make_unique<HostPreconditioner<Real>>(std::move(averaged), std::move(local), std::move(rhs_incidence));
}
template std::unique_ptr<Preconditioner<float>> make_host_preconditioner<float>(AveragedSweep, LocalMatrices,
                                                                                std::vector<int>);
template std::unique_ptr<Preconditioner<double>> make_host_preconditioner<double>(AveragedSweep, LocalMatrices,
                                                                                  std::vector<int>);

}  // namespace gratingsim::physics
