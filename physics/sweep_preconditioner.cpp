#include "physics/sweep_preconditioner.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "physics/green_tensors.hpp"

namespace gratingsim::physics {

using detail::GreenTensors;
using detail::Tensor;

std::size_t sweep_preconditioner_bytes(std::size_t slices, std::size_t orders, std::size_t incidences,
                                       std::size_t real_bytes) {
  const double o = double(orders), matrices = double(incidences) * double(slices) * (33.0 * o * o + o),
               scratch = 2.0 * double(incidences) * (3.0 * o * (double(slices) + 1.0) + 4.0 * o);  // two rhs each
  const double complex_numbers = matrices + scratch;
  return std::size_t(std::min(complex_numbers * 2.0 * double(real_bytes), 1.8e19));
}

double sweep_setup_work(std::size_t slices, std::size_t orders, std::size_t incidences) {
  return 114.0 * double(orders) * double(orders) * double(orders) * double(slices) * double(incidences);
}

namespace {

using Matrix = Eigen::MatrixXcd;
using C = std::complex<double>;

/// The dense source C (rows J_i·orders + m, columns F_j·orders + m') and D (rows x, y only) of one
/// engine slice over every pair of orders, from its kernels: Laurent C = χ ⊛ I, D = 0; normal-vector the
/// pattern's terms (outputs 0..2 are J, 3..4 are D). χ_k(m − m') sits at (d1 + 2M1)·K2 + (d2 + 2M2).
void slice_operators(const conv::Problem& problem, const C* slice_kernels, int nm, Matrix& c, Matrix& d) {
  std::vector<conv::Term> source, d_terms;
  if (problem.scalar())
    source = {{0, 0, 0}, {1, 1, 0}, {2, 2, 0}};
  else
    for (const conv::Term& t : problem.pattern) (t.output < 3 ? source : d_terms).push_back(t);
  const int n1 = problem.n1, n2 = problem.n2, k2 = 2 * n2 - 1;
  const std::size_t ksize = problem.kernel_size();
  const auto coefficient = [&](int k, int m, int mp) {
    const int d1 = m / n2 - mp / n2, d2 = m % n2 - mp % n2;
    return slice_kernels[std::size_t(k) * ksize + std::size_t(d1 + n1 - 1) * k2 + std::size_t(d2 + n2 - 1)];
  };
  c.setZero(3 * nm, 3 * nm);
  d.setZero(3 * nm, 3 * nm);
  for (int mp = 0; mp < nm; ++mp)
    for (int m = 0; m < nm; ++m) {
      for (const conv::Term& t : source) c(t.output * nm + m, t.input * nm + mp) += coefficient(t.kernel, m, mp);
      for (const conv::Term& t : d_terms) d((t.output - 3) * nm + m, t.input * nm + mp) += coefficient(t.kernel, m, mp);
    }
}

}  // namespace

SweepMatrices sweep_matrices(const GreenCoefficients& g, const conv::Problem& problem,
                             std::span<const std::complex<double>> kernels) {
  const int nz = g.slices, nm = g.orders, na = g.incidences;
  GS_EXPECTS(std::size_t(nm) == problem.field_size() && kernels.size() == problem.kernels_total() &&
                 problem.slices == nz * g.members && !g.self.empty(),
             "sweep_matrices: sizes of the problem, kernels and Green coefficients disagree");
  SweepMatrices out{na, nm, nz, {}, {}, {}, {}, {}, {}};
  const Eigen::Index n = Eigen::Index(out.n()), h = Eigen::Index(out.h());
  const std::size_t count = std::size_t(na) * nz;
  out.inverse.resize(count * std::size_t(n * n));
  for (auto* v : {&out.gain_g, &out.gain_a, &out.up, &out.down}) v->resize(count * std::size_t(n * h));
  out.step.resize(count * nm);
  const std::size_t per_slice = std::size_t(problem.kernels) * problem.kernel_size();
  std::string failure;  // the first singular N_p, by incidence (written under a critical section)
  int failed_incidence = na;
  // OpenMP over the incidences; each sweeps its slices bottom-up (ρ_q needs ρ_{q+1}) and writes its own
  // matrices, so the result does not depend on the thread count.
#pragma omp parallel for schedule(dynamic)
  for (int a = 0; a < na; ++a) {
    const int member = member_of(g, a);
    std::vector<GreenTensors> t;
    for (int m = 0; m < nm; ++m) t.push_back(detail::green_tensors(g, std::size_t(a) * nm + m));
    const auto coefficient_index = [&](int m, int p) { return (std::size_t(a) * nm + m) * nz + p; };
    // Ẽ⁺, Ẽ⁻ (n × h): column (pol, m) holds scale·ê (pol 0) or scale·p̂± (pol 1) at rows (i, m).
    Matrix e_plus = Matrix::Zero(n, h), e_minus = Matrix::Zero(n, h);
    for (int m = 0; m < nm; ++m)
      for (int i = 0; i < 3; ++i) {
        e_plus(i * nm + m, m) = e_minus(i * nm + m, m) = t[m].scale * t[m].e[i];
        e_plus(i * nm + m, nm + m) = t[m].scale * t[m].plus[i];
        e_minus(i * nm + m, nm + m) = t[m].scale * t[m].minus[i];
      }
    // ρ_{N−1} = e^{2ikz z_{N−1}} diag(r_s, r_p).
    Matrix rho = Matrix::Zero(h, h);
    for (int m = 0; m < nm; ++m) {
      const std::size_t io = std::size_t(a) * nm + m, i = coefficient_index(m, nz - 1);
      const C depth2 = g.depth[i] * g.depth[i];
      rho(m, m) = depth2 * g.rs[io];
      rho(nm + m, nm + m) = depth2 * g.rp[io];
    }
    Matrix c, d, phi(h, n), psi(h, n), lprime(n, n);
    for (int p = nz - 1; p >= 0; --p) {
      const std::size_t engine_slice = std::size_t(p) * g.members + member;
      slice_operators(problem, kernels.data() + engine_slice * per_slice, nm, c, d);
      // L' = I + D + (c_p self + ẑẑ) C; Φ = W Π⁻ C, Ψ = W Π⁺ C (rows: amplitude (pol, m)).
      lprime = d;
      lprime.diagonal().array() += 1.0;
      for (int m = 0; m < nm; ++m) {
        const std::size_t i = coefficient_index(m, p);
        const Tensor gs = detail::self_green(t[m], g, i);
        const C w = g.weight[i];
        for (int row = 0; row < 3; ++row)
          for (int k = 0; k < 3; ++k)
            if (gs[row * 3 + k] != C(0)) lprime.row(row * nm + m) += gs[row * 3 + k] * c.row(k * nm + m);
        phi.row(m) = w * (t[m].e[0] * c.row(m) + t[m].e[1] * c.row(nm + m) + t[m].e[2] * c.row(2 * nm + m));
        psi.row(m) = phi.row(m);
        phi.row(nm + m) =
            w * (t[m].minus[0] * c.row(m) + t[m].minus[1] * c.row(nm + m) + t[m].minus[2] * c.row(2 * nm + m));
        psi.row(nm + m) =
            w * (t[m].plus[0] * c.row(m) + t[m].plus[1] * c.row(nm + m) + t[m].plus[2] * c.row(2 * nm + m));
        out.step[(std::size_t(a) * nz + p) * nm + m] = g.step[i];
      }
      const Matrix e_rho = e_plus * rho;
      const Matrix big_n = lprime + e_rho * phi;
      const Eigen::PartialPivLU<Matrix> lu(big_n);
      const double largest = big_n.cwiseAbs().maxCoeff();
      const double pivot = lu.matrixLU().diagonal().cwiseAbs().minCoeff();
      if (!(std::isfinite(largest) && pivot > 1e-13 * largest)) {
#pragma omp critical(sweep_failure)
        if (a < failed_incidence) {
          failed_incidence = a;
          failure = "the sweep preconditioner's slice matrix of incidence " + std::to_string(a) + ", slice " +
                    std::to_string(p) + " is singular (smallest pivot " + std::to_string(pivot) + " against " +
                    std::to_string(largest) + "): a resonance of the slices below it?";
        }
        break;
      }
      const std::size_t k = std::size_t(a) * nz + p;
      Eigen::Map<Matrix> inverse(&out.inverse[k * std::size_t(n * n)], n, n);
      Eigen::Map<Matrix> gain_g(&out.gain_g[k * std::size_t(n * h)], n, h), gain_a(&out.gain_a[k * std::size_t(n * h)], n, h);
      Eigen::Map<Matrix> up(&out.up[k * std::size_t(n * h)], h, n), down(&out.down[k * std::size_t(n * h)], h, n);
      inverse = lu.inverse();
      gain_g.noalias() = inverse * e_plus;
      gain_a.noalias() = inverse * (e_rho + e_minus);
      up = rho * phi + psi;
      down = phi;
      if (p > 0) {  // ρ_{p−1} = S_p (ρ_p − Γ_p H_p) S_p
        rho -= up * gain_a;
        for (Eigen::Index i = 0; i < h; ++i) {
          const C s = g.step[coefficient_index(int(i % nm), p)];
          rho.row(i) *= s;
          rho.col(i) *= s;
        }
      }
    }
  }
  GS_EXPECTS(failure.empty(), failure);
  return out;
}

namespace {

template <class Real>
class HostSweepPreconditioner final : public Preconditioner<Real> {
 public:
  using Complex = std::complex<Real>;
  HostSweepPreconditioner(SweepMatrices sweep, std::vector<int> rhs_incidence)
      : s_(std::move(sweep)), rhs_incidence_(std::move(rhs_incidence)), scratch_(per_rhs() * rhs_incidence_.size()) {}

  // x, y in the batched layout (slice p, rhs r, component·orders + m); per rhs one sweep up and one down
  // (sweep_preconditioner.hpp), v_p kept in complex128 between them in the rhs's scratch.
  void apply(const Complex* x, Complex* y, Stream) override {
    const int nz = s_.slices, nm = s_.orders, nr = int(rhs_incidence_.size());
    const Eigen::Index n = Eigen::Index(s_.n()), h = Eigen::Index(s_.h());
    const auto block = [&](int p, int r) { return (std::size_t(p) * nr + r) * std::size_t(n); };
#pragma omp parallel for schedule(static)
    for (int r = 0; r < nr; ++r) {
      const int a = rhs_incidence_[std::size_t(r)];
      std::complex<double>* scratch = &scratch_[std::size_t(r) * per_rhs()];
      Eigen::Map<Eigen::VectorXcd> b(scratch, n), g(scratch + n, h), amplitude(scratch + n + h, h);
      const auto v = [&](int p) { return Eigen::Map<Eigen::VectorXcd>(scratch + n + 2 * h + p * n, n); };
      g.setZero();
      amplitude.setZero();
      for (int p = nz - 1; p >= 0; --p) {
        const std::size_t k = std::size_t(a) * nz + p;
        for (Eigen::Index i = 0; i < n; ++i) b(i) = std::complex<double>(x[block(p, r) + std::size_t(i)]);
        const Eigen::Map<const Matrix> inverse(&s_.inverse[k * std::size_t(n * n)], n, n);
        const Eigen::Map<const Matrix> gain_g(&s_.gain_g[k * std::size_t(n * h)], n, h);
        const Eigen::Map<const Matrix> up(&s_.up[k * std::size_t(n * h)], h, n);
        auto vp = v(p);
        vp.noalias() = inverse * b;
        vp.noalias() -= gain_g * g;
        if (p > 0) {
          g.noalias() += up * vp;
          for (Eigen::Index i = 0; i < h; ++i) g(i) *= s_.step[k * nm + std::size_t(i % nm)];
        }
      }
      for (int p = 0; p < nz; ++p) {
        const std::size_t k = std::size_t(a) * nz + p;
        const Eigen::Map<const Matrix> gain_a(&s_.gain_a[k * std::size_t(n * h)], n, h);
        const Eigen::Map<const Matrix> down(&s_.down[k * std::size_t(n * h)], h, n);
        auto xp = v(p);
        xp.noalias() -= gain_a * amplitude;
        for (Eigen::Index i = 0; i < n; ++i) y[block(p, r) + std::size_t(i)] = Complex(xp(i));
        if (p + 1 < nz) {
          amplitude.noalias() += down * xp;
          for (Eigen::Index i = 0; i < h; ++i) amplitude(i) *= s_.step[(k + 1) * nm + std::size_t(i % nm)];
        }
      }
    }
  }

  [[nodiscard]] Memory memory() const override { return Memory::host; }

 private:
  /// Per rhs: b, g, the down-going amplitude and v_p of every slice, complex128.
  [[nodiscard]] std::size_t per_rhs() const { return s_.n() * (std::size_t(s_.slices) + 1) + 2 * s_.h(); }

  SweepMatrices s_;
  std::vector<int> rhs_incidence_;
  std::vector<std::complex<double>> scratch_;
};

}  // namespace

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_host_sweep_preconditioner(SweepMatrices sweep, std::vector<int> rhs_incidence) {
  for (int a : rhs_incidence)
    GS_EXPECTS(a >= 0 && a < sweep.incidences, "sweep preconditioner: a right-hand side's incidence is out of range");
  return std::make_unique<HostSweepPreconditioner<Real>>(std::move(sweep), std::move(rhs_incidence));
}

template std::unique_ptr<Preconditioner<float>> make_host_sweep_preconditioner<float>(SweepMatrices, std::vector<int>);
template std::unique_ptr<Preconditioner<double>> make_host_sweep_preconditioner<double>(SweepMatrices, std::vector<int>);

}  // namespace gratingsim::physics
