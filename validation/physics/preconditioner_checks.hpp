#pragma once
// Checks of physics/preconditioner.hpp shared by the host and the GPU tests: in the two limits where
// P = L⁻¹ L̄ Ā⁻¹ is the exact inverse of A, P applied to A x returns x for random x. A is the
// solver's own operator (convolution engine + z-operator), an implementation independent of the
// preconditioner's dense assembly (z-operator on unit sources, kernel coefficients indexed by hand).
#include <Eigen/Dense>
#include <algorithm>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "physics/problem.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

namespace gratingsim::test {

/// A stack of laterally uniform layers (one absorbing) on a 1D or 2D lattice: A = Ā, L = L̄.
inline physics::Structure uniform_stack(bool one_dimensional) {
  using namespace physics;
  Structure s;
  s.lattice = one_dimensional ? Lattice{1.3, 0.0} : Lattice{1.2, 1.0};
  s.superstrate = Material::constant_index(1.0);
  s.substrate = Material::constant_permittivity(2.25);
  const std::complex<double> eps[] = {{4.0, 0.0}, {2.1, 0.3}, {6.0, 0.0}};
  const int slices[] = {3, 2, 4};
  for (int i = 0; i < 3; ++i) {
    Layer l;
    l.thickness = 0.15 + 0.1 * i;
    l.slices = slices[i];
    l.background = Material::constant_permittivity(eps[i]);
    s.layers.push_back(l);
  }
  return s;
}

/// One slice with strong lateral contrast: the slices do not interact (there is one), A = L.
inline physics::Structure single_slice(bool one_dimensional) {
  using namespace physics;
  Structure s = one_dimensional ? lamellar(1) : crossed(1);
  s.layers.resize(1);
  s.layers[0].slices = 1;
  Rectangle& first = std::get<Rectangle>(one_dimensional ? s.layers[0].shapes[0] : s.layers[0].shapes[1]);
  first.material = Material::constant_permittivity({12.0, 0.5});
  return s;
}

/// A lamellar grating or the crossed one with a random absorbing ridge over a second, laterally
/// uniform layer of random thickness and another slice thickness: every component of the Green tensors
/// is non-zero (at conical incidence) and the slices differ in their steps. The 1D ridge is a trapezoid
/// line with sloped walls (75°–88°), so its normal-vector field is the tilted one (every kernel of that
/// pattern, D_z among them, non-zero); `upright`: its walls at 90°, so its slices are one uniform run (the
/// sweep's Woodbury form, sweep_preconditioner.hpp).
inline physics::Structure random_stack(bool one_dimensional, int slices, bool upright = false) {
  using namespace physics;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Structure s = one_dimensional ? lamellar(slices) : crossed(slices);
  Rectangle& ridge = std::get<Rectangle>(one_dimensional ? s.layers[0].shapes[0] : s.layers[0].shapes[1]);
  ridge.material = Material::constant_permittivity({2.0 + 10.0 * u(rng()), 0.5 * u(rng())});
  if (one_dimensional) {
    TrapezoidLine line;
    line.center_x = ridge.center.x;
    line.bottom_width = ridge.width_x;
    const double sloped = 75 + 13 * u(rng());
    line.sidewall_angle_deg = upright ? 90.0 : sloped;
    line.material = ridge.material;
    s.layers[0].shapes = {line};
  }
  Layer film;
  film.thickness = 0.07 + 0.1 * u(rng());
  film.slices = 2;
  film.background = Material::constant_permittivity({3.0, 0.1});
  s.layers.push_back(film);
  return s;
}

/// max |P A x − x| / max |x| for random x, on `backend` in Real; P the averaged preconditioner, the
/// coarse one for `coarse` coarse harmonics, or the sweep.
template <class Real>
double inverse_error(const physics::Structure& structure, conv::Backend backend, physics::Formulation formulation,
                     int m1, int m2, physics::Preconditioning kind = physics::Preconditioning::averaged,
                     int coarse = 0,
                     const std::vector<physics::Incidence>& inc = {{1.0, 25, 30}, {1.0, 10, 0}}) {
  using namespace physics;
  std::vector<std::string> warnings;
  ProblemSettings settings;
  settings.m1 = m1;
  settings.m2 = m2;
  settings.backend = backend;
  settings.formulation = formulation;
  DiscreteProblem<Real> problem(structure, inc, settings, 1, warnings);
  const auto p = kind == Preconditioning::coarse  ? problem.make_coarse_preconditioner(coarse)
                 : kind == Preconditioning::sweep ? problem.make_sweep_preconditioner()
                                                  : problem.make_preconditioner();
  const BatchLayout& l = problem.layout();
  const auto x = random_complex<Real>(l.size());
  std::vector<std::complex<Real>> back(l.size(), poison<Real>());
  auto space = problem.make_space(3);
  space->upload(x, 0);
  problem.apply(space->data(0), space->data(1));
  p->apply(space->data(1), space->data(2), problem.stream());
  space->download(2, back);
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    err = std::max(err, double(std::abs(back[i] - x[i])));
    scale = std::max(scale, double(std::abs(x[i])));
  }
  return err / scale;
}

/// A random absorbing grating (random_stack: the sloped 1D ridge for m2 = 0, else the crossed grating,
/// each over a film; normal-vector formulation, cpu-direct) at two incidences, one conical, harmonics
/// m1 × m2.
inline std::unique_ptr<physics::DiscreteProblem<double>> random_stack_problem(int m1, int m2, int ridge_slices) {
  using namespace physics;
  std::vector<std::string> warnings;
  ProblemSettings settings;
  settings.m1 = m1;
  settings.m2 = m2;
  settings.backend = conv::Backend::cpu_direct;
  const std::vector<Incidence> inc{{1.0, 25, 30}, {1.0, 10, 0}};
  return std::make_unique<DiscreteProblem<double>>(random_stack(m2 == 0, ridge_slices), inc, settings, 1, warnings);
}

/// The parts of the averaged preconditioner for random_stack_problem(m1, m2, ridge_slices): Ā assembled
/// densely (the reference: its assembly is checked against the z-operator on unit vectors in
/// test_preconditioner.cpp), Ā's sweep, and random L_p and L̄_p (fresh random, no structure: partial
/// pivoting has rows to swap).
struct RandomParts {
  physics::AveragedMatrices dense;
  physics::AveragedSweep sweep;
  physics::LocalMatrices local;
};
inline RandomParts random_parts(int m1, int m2, int ridge_slices) {
  using namespace physics;
  const auto problem = random_stack_problem(m1, m2, ridge_slices);
  const std::vector<MeanTensors> tensors = slice_mean_tensors(problem->convolution().problem(), problem->kernels());
  const GreenCoefficients g = green_coefficients(problem->grids(), problem->orders());
  const std::size_t n_l = 3 * std::size_t(g.orders);
  return {averaged_matrices(g, tensors), averaged_sweep(g, tensors),
          LocalMatrices{g.incidences, g.orders, g.slices,
                        random_complex<double>(n_l * n_l * std::size_t(g.slices) * g.incidences),
                        random_complex<double>(9 * std::size_t(g.orders) * g.slices * g.incidences)}};
}

/// The largest 2-norm condition number of the matrices the averaged preconditioner inverts (every Ā
/// and L_p): random dense matrices are now and then ill-conditioned, and their inverses then agree
/// between two correct factorisations only to about κ·ε.
inline double largest_condition(const physics::AveragedMatrices& averaged, const physics::LocalMatrices& local) {
  double worst = 1;
  // κ² = λmax/λmin of AᴴA (an eigenvalue solve: SVDs of the hundreds of matrices took minutes)
  const auto scan = [&](const std::vector<std::complex<double>>& matrices, std::size_t n) {
    for (std::size_t k = 0; k * n * n < matrices.size(); ++k) {
      const Eigen::Map<const Eigen::MatrixXcd> a(matrices.data() + k * n * n, Eigen::Index(n), Eigen::Index(n));
      const Eigen::MatrixXcd gram = a.adjoint() * a;
      const Eigen::VectorXd lambda = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXcd>(gram, Eigen::EigenvaluesOnly).eigenvalues();
      worst = std::max(worst, std::sqrt(lambda(lambda.size() - 1) / std::max(lambda(0), 1e-300)));
    }
  };
  scan(averaged.matrices, averaged.n());
  scan(local.matrices, local.n());
  return worst;
}

/// A singular slice block L_p (a row of 1e-15) and a NaN entry are refused, the first naming the slice,
/// and the parts themselves are accepted. `make(Real{}, averaged_sweep, local, rhs_incidence)` builds a
/// preconditioner of precision Real (host or device).
template <class Make>
void check_singular_parts_refused(Make make) {
  const std::vector<int> rhs{0, 0, 1, 1};
  const RandomParts parts = random_parts(1, 0, 2);
  const physics::LocalMatrices& local = parts.local;
  const std::size_t n_l = local.n();
  auto singular_local = local;
  for (std::size_t j = 0; j < n_l; ++j) singular_local.matrices[((0 * local.slices + 1) * n_l + j) * n_l + 5] = 1e-15;  // row 5
  CHECK_THROWS_WITH(make(double{}, parts.sweep, singular_local, rhs), Catch::Contains("slice block of slice 1 is singular"));
  auto not_finite = local;
  not_finite.matrices[7] = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(make(float{}, parts.sweep, not_finite, rhs), InvalidArgument);
  CHECK_NOTHROW(make(double{}, parts.sweep, local, rhs));
}

/// Ā⁻¹ x per (rhs, order) for the batched layout (rhs r of incidence rhs_incidence[r]), from dense
/// inverses that Eigen computes here.
inline std::vector<std::complex<double>> dense_averaged_apply(const physics::AveragedMatrices& averaged,
                                                              const std::vector<int>& rhs_incidence,
                                                              const std::vector<std::complex<double>>& x) {
  using Eigen::Index;
  const Index nz = averaged.slices, nm = averaged.orders, nr = Index(rhs_incidence.size()), n = 3 * nz;
  const auto at = [&](Index p, Index r, Index comp, Index m) { return std::size_t(((p * nr + r) * 3 + comp) * nm + m); };
  std::vector<std::complex<double>> t(x.size());
  for (Index r = 0; r < nr; ++r) {
    const Index a = rhs_incidence[std::size_t(r)];
    for (Index m = 0; m < nm; ++m) {  // Ā⁻¹, over (slice, component) at order m
      const Eigen::MatrixXcd inverse =
          Eigen::Map<const Eigen::MatrixXcd>(&averaged.matrices[std::size_t((a * nm + m) * n * n)], n, n).inverse();
      Eigen::VectorXcd v(n);
      for (Index i = 0; i < n; ++i) v(i) = x[at(i / 3, r, i % 3, m)];
      const Eigen::VectorXcd w = inverse * v;
      for (Index i = 0; i < n; ++i) t[at(i / 3, r, i % 3, m)] = w(i);
    }
  }
  return t;
}

/// P x = L⁻¹ L̄ Ā⁻¹ x for the batched layout (rhs r of incidence rhs_incidence[r]) from dense inverses
/// that Eigen computes here, independently of the preconditioner's factors or cuBLAS.
inline std::vector<std::complex<double>> dense_apply(const physics::AveragedMatrices& averaged,
                                                     const physics::LocalMatrices& local,
                                                     const std::vector<int>& rhs_incidence,
                                                     const std::vector<std::complex<double>>& x) {
  using Eigen::Index;
  const Index nz = averaged.slices, nm = averaged.orders, nr = Index(rhs_incidence.size());
  const Index n_l = 3 * nm;
  const auto at = [&](Index p, Index r, Index comp, Index m) { return std::size_t(((p * nr + r) * 3 + comp) * nm + m); };
  const std::vector<std::complex<double>> t = dense_averaged_apply(averaged, rhs_incidence, x);
  std::vector<std::complex<double>> y(x.size());
  for (Index r = 0; r < nr; ++r) {
    const Index a = rhs_incidence[std::size_t(r)];
    for (Index p = 0; p < nz; ++p) {  // L̄ per order, then L⁻¹ over (component, order)
      Eigen::VectorXcd v(n_l);
      for (Index m = 0; m < nm; ++m) {
        const Eigen::Map<const Eigen::Matrix<std::complex<double>, 3, 3, Eigen::RowMajor>> lbar(
            &local.averaged[std::size_t(((a * nm + m) * nz + p) * 9)]);
        const Eigen::Vector3cd u(t[at(p, r, 0, m)], t[at(p, r, 1, m)], t[at(p, r, 2, m)]);
        const Eigen::Vector3cd w = lbar * u;
        for (Index c = 0; c < 3; ++c) v(c * nm + m) = w(c);
      }
      const Eigen::MatrixXcd inverse =
          Eigen::Map<const Eigen::MatrixXcd>(&local.matrices[std::size_t((a * nz + p) * n_l * n_l)], n_l, n_l).inverse();
      const Eigen::VectorXcd w = inverse * v;
      for (Index i = 0; i < n_l; ++i) y[at(p, r, i / nm, i % nm)] = w(i);
    }
  }
  return y;
}

/// Parts of the coarse preconditioner: Ā (dense and its sweep) of random_parts(m1, m2, ridge_slices) and
/// a random A_c per incidence on the coarse orders |m1|, |m2| ≤ 1 with `shift`·I added (well
/// conditioned: the float comparisons measure rounding, not conditioning).
struct RandomCoarseParts {
  physics::AveragedMatrices dense;
  physics::AveragedSweep sweep;
  physics::CoarseMatrices coarse;
};
inline RandomCoarseParts random_coarse_parts(int m1, int m2, int ridge_slices, double shift) {
  RandomParts parts = random_parts(m1, m2, ridge_slices);
  const int incidences = parts.sweep.incidences, slices = parts.sweep.slices;
  physics::CoarseMatrices coarse{incidences, slices, std::min(1, m1), std::min(1, m2), {}, {}};
  for (int c1 = -coarse.m1; c1 <= coarse.m1; ++c1)
    for (int c2 = -coarse.m2; c2 <= coarse.m2; ++c2) coarse.orders.push_back((c1 + m1) * (2 * m2 + 1) + c2 + m2);
  const std::size_t nc = coarse.n();
  coarse.matrices = random_complex<double>(nc * nc * std::size_t(incidences));
  for (int a = 0; a < incidences; ++a)
    for (std::size_t i = 0; i < nc; ++i) coarse.matrices[(a * nc + i) * nc + i] += shift;
  return {std::move(parts.dense), std::move(parts.sweep), std::move(coarse)};
}

/// P x of the coarse preconditioner from dense inverses that Eigen computes here: Ā⁻¹ per (rhs, order),
/// then the coarse entries (unknown u = (p·3 + i)·n_c + mc) replaced by A_c⁻¹ x_c.
inline std::vector<std::complex<double>> dense_coarse_apply(const physics::AveragedMatrices& averaged,
                                                            const physics::CoarseMatrices& coarse,
                                                            const std::vector<int>& rhs_incidence,
                                                            const std::vector<std::complex<double>>& x) {
  using Eigen::Index;
  const Index nm = averaged.orders, nr = Index(rhs_incidence.size());
  const Index nc = Index(coarse.orders.size()), n_c = Index(coarse.n());
  const auto at = [&](Index p, Index r, Index comp, Index m) { return std::size_t(((p * nr + r) * 3 + comp) * nm + m); };
  std::vector<std::complex<double>> y = dense_averaged_apply(averaged, rhs_incidence, x);
  for (Index r = 0; r < nr; ++r) {
    const Index a = rhs_incidence[std::size_t(r)];
    const auto coarse_at = [&](Index u) { return at(u / nc / 3, r, u / nc % 3, coarse.orders[std::size_t(u % nc)]); };
    const Eigen::MatrixXcd inverse =
        Eigen::Map<const Eigen::MatrixXcd>(&coarse.matrices[std::size_t(a * n_c * n_c)], n_c, n_c).inverse();
    Eigen::VectorXcd v(n_c);
    for (Index u = 0; u < n_c; ++u) v(u) = x[coarse_at(u)];
    const Eigen::VectorXcd w = inverse * v;
    for (Index u = 0; u < n_c; ++u) y[coarse_at(u)] = w(u);
  }
  return y;
}

/// max |a − b| / max |b|
inline double relative_difference(const std::vector<std::complex<double>>& a, const std::vector<std::complex<double>>& b) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

/// The solves the tests of automatic's switch to the sweep compare (physics/solver.cpp, solve_group), from
/// `o` (backend, precision, tolerance, restart set): `first`, the first solve alone for `first_iterations`
/// with what automatic starts a problem with where it does not take the sweep (averaged for 1D lattices in
/// the normal-vector formulation in complex128, else none); `automatic`, preconditioner auto with twice
/// the iterations (the check at the first's end); `sweep`, the sweep's own answer in complex128 to 1e-10 on
/// `sweep_backend`.
struct ContinuationRuns {
  physics::IncidenceResult first, automatic, sweep;
};

inline ContinuationRuns continuation_runs(const physics::Structure& structure,
                                          const std::vector<physics::Incidence>& incidences, physics::SolverOptions o,
                                          int first_iterations, conv::Backend sweep_backend) {
  using physics::Preconditioning;
  ContinuationRuns runs;
  o.on_unconverged = physics::OnUnconverged::mark;
  o.max_iterations = first_iterations;
  o.preconditioner = structure.lattice.one_dimensional() && o.formulation == physics::Formulation::normal_vector &&
                             o.precision == Precision::double_
                         ? Preconditioning::averaged
                         : Preconditioning::none;
  runs.first = physics::solve(structure, incidences, o).incidences[0];
  o.max_iterations = 2 * first_iterations;
  o.preconditioner = Preconditioning::automatic;
  runs.automatic = physics::solve(structure, incidences, o).incidences[0];
  o.backend = sweep_backend;
  o.precision = Precision::double_;
  o.tolerance = 1e-10;
  o.preconditioner = Preconditioning::sweep;
  runs.sweep = physics::solve(structure, incidences, o).incidences[0];
  return runs;
}

}  // namespace gratingsim::test
