#include "physics/preconditioner.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace gratingsim::physics {

std::string_view to_string(Preconditioning p) {
  switch (p) {
    case Preconditioning::automatic: return "auto";
    case Preconditioning::averaged: return "averaged";
    case Preconditioning::none: return "none";
  }
  return "?";
}

Preconditioning parse_preconditioning(std::string_view name) {
  for (Preconditioning p : {Preconditioning::automatic, Preconditioning::averaged, Preconditioning::none})
    if (name == to_string(p)) return p;
  GS_EXPECTS(false, "unknown preconditioner '" + std::string(name) + "' (choose auto, averaged or none)");
  return Preconditioning::none;
}

std::size_t preconditioner_bytes(std::size_t slices, std::size_t orders, std::size_t incidences, std::size_t real_bytes) {
  const std::size_t n = 3 * slices, n_l = 3 * orders, complex_bytes = 2 * real_bytes;
  const std::size_t averaged = n * n * orders * incidences, local = n_l * n_l * slices * incidences;
  const std::size_t scratch = 2 * slices * 2 * incidences * 3 * orders;  // two batched vectors
  return (averaged + local + scratch) * complex_bytes + 9 * orders * slices * incidences * 16;
}

MeanTensors mean_tensors(const conv::Problem& problem, std::span<const std::complex<double>> slice_kernels) {
  const std::size_t size = problem.kernel_size();
  GS_EXPECTS(slice_kernels.size() == std::size_t(problem.kernels) * size, "mean_tensors: kernel count of the slice");
  // Coefficient (0, 0) sits at (0 + 2M1)·K2 + (0 + 2M2), K2 = 2N2 − 1 (convolution.hpp).
  const std::size_t centre = std::size_t(problem.n1 - 1) * (2 * problem.n2 - 1) + std::size_t(problem.n2 - 1);
  const auto mean = [&](int k) { return slice_kernels[std::size_t(k) * size + centre]; };
  MeanTensors t;
  if (problem.scalar()) {  // Laurent: J = χ ⊛ e for each component
    for (int i = 0; i < 3; ++i) t.c[i * 3 + i] = mean(0);
    return t;
  }
  GS_EXPECTS(problem.inputs == 3 && problem.outputs >= 3 && problem.outputs <= 5,
          "mean_tensors: expected the normal-vector pattern (3 inputs, 3 to 5 outputs)");
  for (const conv::Term& term : problem.pattern) {
    if (term.output < 3)
      t.c[term.output * 3 + term.input] += mean(term.kernel);
    else
      t.d[(term.output - 3) * 3 + term.input] += mean(term.kernel);
  }
  return t;
}

AveragedInverse averaged_inverse(const GreenCoefficients& g, std::span<const MeanTensors> slices) {
  using C = std::complex<double>;
  GS_EXPECTS(int(slices.size()) == g.slices, "averaged_inverse: one mean tensor per slice");
  const int nz = g.slices, nm = g.orders, na = g.incidences;
  AveragedInverse out{na, nm, nz, {}};
  const std::size_t n = out.n(), block = 3 * std::size_t(nm);
  out.matrices.assign(n * n * nm * na, C(0));
  // One host z-operator with one rhs per incidence and 5 source components (J, then D_x, D_y):
  // y = x + D − K(k1² J) with x = e_j at slice p, J = C̄_p e_j, D = D̄_p e_j gives column (p, j) of
  // Ā for every (incidence, order) at once.
  std::vector<int> rhs(static_cast<std::size_t>(na));
  for (int a = 0; a < na; ++a) rhs[a] = a;
  auto z = make_host_z_operator<double>(g, rhs, 5);
  std::vector<C> x(std::size_t(nz) * na * block), c(std::size_t(nz) * na * 5 * nm), y(x.size());
  for (int p = 0; p < nz; ++p)
    for (int j = 0; j < 3; ++j) {
      const MeanTensors& t = slices[p];
      for (int a = 0; a < na; ++a)
        for (int m = 0; m < nm; ++m) {
          x[(std::size_t(p) * na + a) * block + j * nm + m] = 1.0;
          for (int comp = 0; comp < 3; ++comp)
            c[(std::size_t(p) * na + a) * 5 * nm + comp * nm + m] = t.c[comp * 3 + j];
          for (int comp = 0; comp < 2; ++comp)
            c[(std::size_t(p) * na + a) * 5 * nm + (3 + comp) * nm + m] = t.d[comp * 3 + j];
        }
      z->apply(x.data(), c.data(), y.data(), nullptr);
      const std::size_t column = std::size_t(p) * 3 + j;
      for (int a = 0; a < na; ++a)
        for (int m = 0; m < nm; ++m) {
          C* a_col = &out.matrices[((std::size_t(a) * nm + m) * n + column) * n];
          for (int q = 0; q < nz; ++q)
            for (int comp = 0; comp < 3; ++comp) a_col[q * 3 + comp] = y[(std::size_t(q) * na + a) * block + comp * nm + m];
          x[(std::size_t(p) * na + a) * block + j * nm + m] = 0.0;
          for (int comp = 0; comp < 5; ++comp) c[(std::size_t(p) * na + a) * 5 * nm + comp * nm + m] = 0.0;
        }
    }
  // Invert every Ā in place.
  const std::ptrdiff_t count = std::ptrdiff_t(na) * nm;
  const Eigen::Index en = Eigen::Index(n);
  std::vector<char> singular(std::size_t(count), 0);
#pragma omp parallel for schedule(dynamic)
  for (std::ptrdiff_t am = 0; am < count; ++am) {
    Eigen::Map<Eigen::MatrixXcd> a(&out.matrices[std::size_t(am) * n * n], en, en);
    const Eigen::PartialPivLU<Eigen::MatrixXcd> lu(a);
    // Partial pivoting never reports singularity: test the pivots (U's diagonal) against the scale.
    const double scale = a.cwiseAbs().maxCoeff();
    const auto pivots = lu.matrixLU().diagonal().cwiseAbs();
    if (!(pivots.minCoeff() > 1e-13 * scale) || !std::isfinite(scale)) {
      singular[std::size_t(am)] = 1;
      continue;
    }
    a = lu.inverse();
  }
  for (std::ptrdiff_t am = 0; am < count; ++am)
    GS_EXPECTS(!singular[std::size_t(am)], "the laterally averaged problem is singular for incidence " +
                                            std::to_string(am / nm) + ", order index " + std::to_string(am % nm) +
                                            " (a guided resonance of the averaged stack?): use preconditioner: none");
  return out;
}

LocalInverse local_inverse(const GreenCoefficients& g, const conv::Problem& problem,
                           std::span<const std::complex<double>> kernels, std::span<const MeanTensors> mean) {
  using C = std::complex<double>;
  const int nz = g.slices, nm = g.orders, na = g.incidences;
  GS_EXPECTS(int(mean.size()) == nz && std::size_t(nm) == problem.field_size() &&
              kernels.size() == problem.kernels_total() && problem.slices == nz,
          "local_inverse: sizes of the problem, kernels and Green coefficients disagree");
  LocalInverse out{na, nm, nz, {}, {}};
  const std::size_t n = out.n(), block = 3 * std::size_t(nm);
  // G_pp = −k1² K_pp per (a, m, p), row-major 3×3: the host z-operator (x = 0, no D) on unit sources.
  std::vector<C> gpp(std::size_t(na) * nm * nz * 9);
  {
    std::vector<int> rhs;
    for (int a = 0; a < na; ++a) rhs.push_back(a);
    auto z = make_host_z_operator<double>(g, rhs, 3);
    std::vector<C> x(std::size_t(nz) * na * block, C(0)), c(x.size(), C(0)), y(x.size());
    for (int p = 0; p < nz; ++p)
      for (int j = 0; j < 3; ++j) {
        for (int a = 0; a < na; ++a)
          for (int m = 0; m < nm; ++m) c[(std::size_t(p) * na + a) * block + j * nm + m] = 1.0;
        z->apply(x.data(), c.data(), y.data(), nullptr);
        for (int a = 0; a < na; ++a)
          for (int m = 0; m < nm; ++m) {
            c[(std::size_t(p) * na + a) * block + j * nm + m] = 0.0;
            for (int i = 0; i < 3; ++i)
              gpp[((std::size_t(a) * nm + m) * nz + p) * 9 + i * 3 + j] = y[(std::size_t(p) * na + a) * block + i * nm + m];
          }
      }
  }
  // The pattern's terms: J (outputs 0..2) and D (outputs 3, 4); Laurent: J_i = χ ⊛ e_i.
  std::vector<conv::Term> source, d_terms;
  if (problem.scalar())
    source = {{0, 0, 0}, {1, 1, 0}, {2, 2, 0}};
  else
    for (const conv::Term& t : problem.pattern) (t.output < 3 ? source : d_terms).push_back(t);
  const int n1 = problem.n1, n2 = problem.n2, k2 = 2 * n2 - 1;
  const std::size_t ksize = problem.kernel_size();
  out.inverses.assign(std::size_t(na) * nz * n * n, C(0));
  out.averaged.assign(std::size_t(na) * nm * nz * 9, C(0));
  const std::ptrdiff_t count = std::ptrdiff_t(na) * nz;
  std::vector<char> singular(std::size_t(count), 0);
#pragma omp parallel for schedule(dynamic)
  for (std::ptrdiff_t ap = 0; ap < count; ++ap) {
    const int a = int(ap / nz), p = int(ap % nz);
    const C* slice_kernels = kernels.data() + std::size_t(p) * problem.kernels * ksize;
    // χ_k(m − m') for orders m, m' in the harmonic layout (m1 + M1)·N2 + (m2 + M2).
    const auto coefficient = [&](int k, int m, int mp) {
      const int d1 = m / n2 - mp / n2, d2 = m % n2 - mp % n2;
      return slice_kernels[std::size_t(k) * ksize + std::size_t(d1 + n1 - 1) * k2 + std::size_t(d2 + n2 - 1)];
    };
    Eigen::Map<Eigen::MatrixXcd> l(&out.inverses[std::size_t(ap) * n * n], Eigen::Index(n), Eigen::Index(n));
    l.setIdentity();
    for (int m = 0; m < nm; ++m) {
      const C* gm = &gpp[((std::size_t(a) * nm + m) * nz + p) * 9];
      for (int mp = 0; mp < nm; ++mp) {
        for (const conv::Term& t : d_terms) l((t.output - 3) * nm + m, t.input * nm + mp) += coefficient(t.kernel, m, mp);
        for (const conv::Term& t : source) {
          const C k = coefficient(t.kernel, m, mp);
          for (int row = 0; row < 3; ++row) l(row * nm + m, t.input * nm + mp) += gm[row * 3 + t.output] * k;
        }
      }
      // L̄ = I + D̄ + G C̄ at this order.
      C* lbar = &out.averaged[((std::size_t(a) * nm + m) * nz + p) * 9];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          C v = (i == j ? 1.0 : 0.0) + (i < 2 ? mean[p].d[i * 3 + j] : C(0));
          for (int k = 0; k < 3; ++k) v += gm[i * 3 + k] * mean[p].c[k * 3 + j];
          lbar[i * 3 + j] = v;
        }
    }
    const Eigen::PartialPivLU<Eigen::MatrixXcd> lu(l);
    const double scale = l.cwiseAbs().maxCoeff();
    if (!(lu.matrixLU().diagonal().cwiseAbs().minCoeff() > 1e-13 * scale) || !std::isfinite(scale)) {
      singular[std::size_t(ap)] = 1;
      continue;
    }
    l = lu.inverse();
  }
  for (std::ptrdiff_t ap = 0; ap < count; ++ap)
    GS_EXPECTS(!singular[std::size_t(ap)], "the slice block of slice " + std::to_string(ap % nz) + " is singular");
  return out;
}

namespace {

template <class Real>
class HostPreconditioner final : public Preconditioner<Real> {
 public:
  using typename Preconditioner<Real>::Complex;
  HostPreconditioner(const AveragedInverse& inverse, const LocalInverse& local, std::vector<int> rhs_incidence)
      : incidences_(inverse.incidences), orders_(inverse.orders), slices_(inverse.slices),
        rhs_(std::move(rhs_incidence)), matrices_(inverse.matrices.begin(), inverse.matrices.end()),
        local_(local.inverses.begin(), local.inverses.end()), local_averaged_(local.averaged) {
    GS_EXPECTS(local.incidences == incidences_ && local.orders == orders_ && local.slices == slices_,
            "preconditioner: the averaged and local parts disagree in size");
    const BatchLayout l{std::size_t(slices_), rhs_.size(), 3 * std::size_t(orders_)};
    t1_.resize(l.size());
    t2_.resize(l.size());
    for (int a : rhs_) GS_EXPECTS(a >= 0 && a < incidences_, "preconditioner: rhs names an unknown incidence");
    for (int a = 0; a < incidences_; ++a) {
      std::vector<int> mine;
      for (std::size_t r = 0; r < rhs_.size(); ++r)
        if (rhs_[r] == a) mine.push_back(int(r));
      rhs_of_.push_back(mine);
    }
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    // gathered x and the sum, per thread
    scratch_.resize(std::size_t(threads) * 2 * std::max<std::size_t>(inverse.n(), 3 * std::size_t(orders_)));
  }

  [[nodiscard]] conv::Memory memory() const override { return conv::Memory::host; }

  /// P x = L⁻¹ L̄ Ā⁻¹ x (preconditioner.hpp).
  void apply(const Complex* x, Complex* y, conv::Stream) override {
    apply_averaged(x, t1_.data());
    apply_local_averaged(t1_.data(), t2_.data());
    apply_local(t2_.data(), y);
  }

  /// y ← L⁻¹ x per (slice, rhs) block.
  void apply_local(const Complex* x, Complex* y) {
    using C = std::complex<double>;
    const std::size_t n = 3 * std::size_t(orders_), nr = rhs_.size();
    const std::ptrdiff_t count = std::ptrdiff_t(slices_) * std::ptrdiff_t(nr);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t pr = 0; pr < count; ++pr) {
#ifdef _OPENMP
      C* sum = &scratch_[std::size_t(omp_get_thread_num()) * 2 * std::max<std::size_t>(n, 3 * slices_)];
#else
      C* sum = scratch_.data();
#endif
      const std::size_t p = std::size_t(pr) / nr, r = std::size_t(pr) % nr;
      const Complex* matrix = &local_[(std::size_t(rhs_[r]) * slices_ + p) * n * n];
      const Complex* in = x + std::size_t(pr) * n;
      for (std::size_t i = 0; i < n; ++i) sum[i] = 0;
      for (std::size_t j = 0; j < n; ++j) {
        const C xj = in[j];
        for (std::size_t i = 0; i < n; ++i) sum[i] += C(matrix[j * n + i]) * xj;
      }
      for (std::size_t i = 0; i < n; ++i) y[std::size_t(pr) * n + i] = Complex(sum[i]);
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

  void apply_averaged(const Complex* x, Complex* y) {
    using C = std::complex<double>;
    const std::size_t n = 3 * std::size_t(slices_), nm = std::size_t(orders_), nr = rhs_.size(), block = 3 * nm;
    const std::ptrdiff_t count = std::ptrdiff_t(incidences_) * orders_;
#pragma omp parallel for schedule(static) if (count * n * n >= 65536)
    for (std::ptrdiff_t am = 0; am < count; ++am) {
#ifdef _OPENMP
      C* in = &scratch_[std::size_t(omp_get_thread_num()) * 2 * std::max<std::size_t>(n, 3 * std::size_t(orders_))];
#else
      C* in = scratch_.data();
#endif
      C* sum = in + n;
      const std::size_t a = std::size_t(am) / nm, m = std::size_t(am) % nm;
      const Complex* matrix = &matrices_[std::size_t(am) * n * n];
      // Element (slice p, rhs r, component comp, order m) at (p·nr + r)·block + comp·nm + m.
      const auto at = [&](std::size_t i, std::size_t r) { return ((i / 3) * nr + r) * block + (i % 3) * nm + m; };
      for (int r : rhs_of_[a]) {
        for (std::size_t i = 0; i < n; ++i) {
          in[i] = C(x[at(i, std::size_t(r))]);
          sum[i] = 0;
        }
        for (std::size_t j = 0; j < n; ++j) {
          const Complex* column = matrix + j * n;
          const C xj = in[j];
          for (std::size_t i = 0; i < n; ++i) sum[i] += C(column[i]) * xj;
        }
        for (std::size_t i = 0; i < n; ++i) y[at(i, std::size_t(r))] = Complex(sum[i]);
      }
    }
  }

 private:
  int incidences_, orders_, slices_;
  std::vector<int> rhs_;
  std::vector<std::vector<int>> rhs_of_;
  std::vector<Complex> matrices_;
  std::vector<std::complex<double>> scratch_;
  std::vector<Complex> local_, t1_, t2_;
  std::vector<std::complex<double>> local_averaged_;
};

}  // namespace

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_host_preconditioner(const AveragedInverse& inverse,
                                                               const LocalInverse& local,
                                                               std::vector<int> rhs_incidence) {
  return std::make_unique<HostPreconditioner<Real>>(inverse, local, std::move(rhs_incidence));
}
template std::unique_ptr<Preconditioner<float>> make_host_preconditioner<float>(const AveragedInverse&,
                                                                                const LocalInverse&, std::vector<int>);
template std::unique_ptr<Preconditioner<double>> make_host_preconditioner<double>(const AveragedInverse&,
                                                                                  const LocalInverse&, std::vector<int>);

}  // namespace gratingsim::physics
