// physics/preconditioner.hpp: P = L⁻¹ L̄ Ā⁻¹ is the exact inverse of A where it should be (laterally
// uniform stacks; one slice), preconditioned solves agree with unpreconditioned ones to the solver
// tolerance, and the preconditioner makes a high-contrast p-polarised case converge in a fraction of
// the iterations. The coarse preconditioner: A_c is A's principal submatrix at the coarse orders,
// its application equals dense inverses, it is A⁻¹ when the coarse orders are all orders, and it
// cuts iterations on a 2D grating.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>

#include "physics/preconditioner.hpp"
#include "physics/solver.hpp"
#include "physics/sweep_preconditioner.hpp"
#include "validation/physics/preconditioner_checks.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

TEST_CASE("P is the exact inverse of A for laterally uniform stacks and for one slice (host)", "[physics][preconditioner]") {
  for (Formulation formulation : test::formulations)
    for (bool one_dimensional : {true, false}) {
      const int m1 = 3, m2 = one_dimensional ? 0 : 2;
      INFO(to_string(formulation) << (one_dimensional ? ", 1D" : ", 2D"));
      CHECK(test::inverse_error<double>(test::uniform_stack(one_dimensional), conv::Backend::cpu_direct, formulation,
                                        m1, m2) < 1e-11);
      CHECK(test::inverse_error<double>(test::single_slice(one_dimensional), conv::Backend::cpu_fftw, formulation, m1,
                                        m2) < 1e-11);
      CHECK(test::inverse_error<float>(test::single_slice(one_dimensional), conv::Backend::cpu_fftw, formulation, m1,
                                       m2) < 2e-4);
    }
}

TEST_CASE("the host application (Ā's sweep, L_p's LU factors) equals dense inverses", "[physics][preconditioner]") {
  // Ā of a random absorbing grating (sloped 1D ridge or crossed, conical incidence) assembled densely
  // and inverted by Eigen, against its sweep; random L_p against Eigen's inverses. Odd and even sizes
  // (the substitutions take two columns at a time), one and two rhs per incidence, 1 to 9 orders.
  for (const auto& [m1, m2, slices] : {std::tuple{2, 0, 3}, std::tuple{1, 1, 2}, std::tuple{0, 0, 1}})
    for (const std::vector<int>& rhs : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{1, 0}}) {
      INFO("M = " << m1 << ", " << m2 << ", " << slices << " ridge slices, " << rhs.size() << " rhs");
      const test::RandomParts parts = test::random_parts(m1, m2, slices);
      const BatchLayout layout{std::size_t(parts.sweep.slices), rhs.size(), 3 * std::size_t(parts.sweep.orders)};
      const auto x = test::random_complex<double>(layout.size());
      // Two correct inversions agree to about κ·ε: 1e-12, or more for an ill-conditioned draw.
      const double tol = std::max(1e-12, 100 * std::numeric_limits<double>::epsilon() *
                                             test::largest_condition(parts.dense, parts.local));
      INFO("tolerance " << tol);
      {
        const LocalMatrices no_local{parts.sweep.incidences, parts.sweep.orders, parts.sweep.slices, {}, {}};
        std::vector<std::complex<double>> y(x.size(), test::poison<double>());
        make_host_preconditioner<double>(parts.sweep, no_local, rhs)->apply(x.data(), y.data(), nullptr);
        CHECK(test::relative_difference(y, test::dense_averaged_apply(parts.dense, rhs, x)) < tol);
      }
      const auto p = make_host_preconditioner<double>(parts.sweep, parts.local, rhs);
      std::vector<std::complex<double>> y(x.size(), test::poison<double>());
      p->apply(x.data(), y.data(), nullptr);
      CHECK(test::relative_difference(y, test::dense_apply(parts.dense, parts.local, rhs, x)) < tol);
    }
}

TEST_CASE("the host application equals dense inverses when the components of L_p decouple (random block matrices)",
          "[physics][preconditioner]") {
  // L_p splits into groups of Cartesian components without conical incidence (y | x, z); the
  // factorisation then factors each group alone. Random matrices with the elements between groups
  // zeroed, for the 1D split and for three separate components, against Eigen's dense inverses.
  using Groups = std::array<int, 3>;
  for (const Groups& groups : {Groups{0, 1, 0}, Groups{0, 1, 2}})
    for (const auto& [m1, slices] : {std::pair{2, 3}, std::pair{0, 1}}) {
      INFO("M = " << m1 << ", " << slices << " ridge slices, groups " << groups[0] << groups[1] << groups[2]);
      test::RandomParts parts = test::random_parts(m1, 0, slices);
      LocalMatrices& local = parts.local;
      const std::size_t n_l = local.n(), orders = std::size_t(local.orders);
      for (std::size_t k = 0; k < local.count(); ++k)  // unknown i of L_p: component i / orders
        for (std::size_t j = 0; j < n_l; ++j)
          for (std::size_t i = 0; i < n_l; ++i)
            if (groups[i / orders] != groups[j / orders]) local.matrices[(k * n_l + j) * n_l + i] = 0.0;
      const std::vector<int> rhs{0, 0, 1, 1};
      const auto p = make_host_preconditioner<double>(parts.sweep, local, rhs);
      const BatchLayout layout{std::size_t(local.slices), rhs.size(), 3 * orders};
      const auto x = test::random_complex<double>(layout.size());
      std::vector<std::complex<double>> y(x.size(), test::poison<double>());
      p->apply(x.data(), y.data(), nullptr);
      const double tol = std::max(1e-12, 100 * std::numeric_limits<double>::epsilon() *
                                             test::largest_condition(parts.dense, local));
      CHECK(test::relative_difference(y, test::dense_apply(parts.dense, local, rhs, x)) < tol);
      // A singular group is still found: zero a y column of one L_p.
      for (std::size_t i = 0; i < n_l; ++i) local.matrices[((1 * std::size_t(local.slices) + 0) * n_l + orders) * n_l + i] = 0.0;
      CHECK_THROWS_WITH(make_host_preconditioner<double>(parts.sweep, local, rhs),
                        Catch::Contains("slice block of slice 0 is singular"));
    }
}

TEST_CASE("a singular slice block is refused, naming it (host)", "[physics][preconditioner]") {
  test::check_singular_parts_refused([](auto real, const auto& averaged, const auto& local, const std::vector<int>& rhs) {
    return make_host_preconditioner<decltype(real)>(averaged, local, rhs);
  });
}

TEST_CASE("a singular averaged stack is refused by its sweep, naming incidence, order and slice", "[physics][preconditioner]") {
  // The bottom slice with C̄ = 0 and D̄ = −ŷŷ: its N = I + D̄ has a zero row and column (no wave reaches
  // it: Φ = 0), for every incidence and order; the first one is named. A NaN tensor is refused too.
  const auto problem = test::random_stack_problem(2, 0, 2);
  const std::vector<MeanTensors> tensors = slice_mean_tensors(problem->convolution().problem(), problem->kernels());
  const GreenCoefficients g = green_coefficients(problem->grids(), problem->orders());
  CHECK_NOTHROW(averaged_sweep(g, tensors));
  auto singular = tensors;
  singular.back() = MeanTensors{};
  singular.back().d[4] = -1.0;
  CHECK_THROWS_WITH(averaged_sweep(g, singular),
                    Catch::Contains("singular for incidence 0, order index 0 at slice " + std::to_string(g.slices - 1)));
  auto not_finite = tensors;
  not_finite[1].c[0] = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(averaged_sweep(g, not_finite), InvalidArgument);
}

TEST_CASE("the preconditioner is named auto, averaged, coarse, sweep or none", "[physics][preconditioner]") {
  for (Preconditioning p : {Preconditioning::automatic, Preconditioning::averaged, Preconditioning::coarse,
                            Preconditioning::sweep, Preconditioning::none})
    CHECK(parse_preconditioning(to_string(p)) == p);
  CHECK_THROWS_WITH(parse_preconditioning("jacobi"), Catch::Contains("auto, averaged, coarse, sweep or none"));
}

TEST_CASE("preconditioned and unpreconditioned solves agree to the solver tolerance", "[physics][preconditioner]") {
  Structure s = test::lamellar(8);
  std::get<Rectangle>(s.layers[0].shapes[0]).material = Material::constant_permittivity({12.0, 0.2});
  Structure crossed = test::crossed(4);
  const std::vector<Incidence> inc{{1.0, 10, 0}, {1.0, 40, 25}};
  for (Formulation formulation : test::formulations)
    for (int dims : {1, 2}) {
      INFO(to_string(formulation) << ", " << dims << "D");
      SolverOptions o;
      o.m1 = dims == 1 ? 8 : 2;
      o.m2 = dims == 1 ? 0 : 2;
      o.backend = conv::Backend::cpu_fftw;
      o.formulation = formulation;
      o.gmres_restart = 100;
      o.tolerance = 1e-10;  // Ā's near-resonances set floors near 1e-11 (preconditioner.hpp)
      const Structure& structure = dims == 1 ? s : crossed;
      o.preconditioner = Preconditioning::none;
      const SolveResult plain = solve(structure, inc, o);
      o.preconditioner = Preconditioning::averaged;
      const SolveResult pre = solve(structure, inc, o);
      for (std::size_t i = 0; i < inc.size(); ++i) {
        const IncidenceResult &a = plain.incidences[i], &b = pre.incidences[i];
        CHECK(b.preconditioned == std::vector<bool>{true});
        CHECK(a.preconditioned == std::vector<bool>{false});
        for (int pol : {s_pol, p_pol}) {
          CHECK(b.solves[0][pol].converged);
          CHECK(b.solves[0][pol].residual <= 1e-10);
          CHECK(std::abs(a.total_R[pol] - b.total_R[pol]) < 1e-9);
          CHECK(std::abs(a.orders[0].reflection.p_from_p - b.orders[0].reflection.p_from_p) < 1e-9);
          CHECK(std::abs(a.orders[0].reflection.s_from_s - b.orders[0].reflection.s_from_s) < 1e-9);
        }
      }
    }
}

TEST_CASE("auto takes the sweep for 1D lattices and leaves 2D ones alone", "[physics][preconditioner]") {
  SolverOptions o;
  o.m1 = 2;
  o.m2 = 2;
  const std::vector<Incidence> inc{{1.0, 10, 0}};
  // 2D: coarse only when asked for (its set-up outweighs its saving on the GPU, docs/solver.md §7).
  CHECK(solve(test::crossed(2), inc, o).incidences[0].preconditioned == std::vector<bool>{false});
  o.preconditioner = Preconditioning::coarse;
  CHECK(solve(test::crossed(2), inc, o).incidences[0].preconditioned == std::vector<bool>{true});
  o.preconditioner = Preconditioning::automatic;
  o.formulation = Formulation::laurent;
  CHECK(solve(test::crossed(2), inc, o).incidences[0].preconditioned == std::vector<bool>{false});
  // 1D: the sweep in either formulation and precision; one or two iterations (A⁻¹ up to rounding).
  o.m2 = 0;
  for (Formulation formulation : test::formulations)
    for (Precision precision : {Precision::double_, Precision::single}) {
      o.formulation = formulation;
      o.precision = precision;
      o.tolerance = precision == Precision::single ? 1e-6 : 1e-10;
      const IncidenceResult r = solve(test::lamellar(2), inc, o).incidences[0];
      CHECK(r.preconditioned == std::vector<bool>{true});
      CHECK(r.solves[0][p_pol].iterations <= 2);
    }
  // Beyond sweep_orders_limit orders: averaged in the normal-vector formulation in complex128, else none.
  o.m1 = int(sweep_orders_limit / 2) + 1;
  o.precision = Precision::double_;
  o.formulation = Formulation::normal_vector;
  const IncidenceResult many = solve(test::lamellar(2), inc, o).incidences[0];
  CHECK(many.preconditioned == std::vector<bool>{true});
  CHECK(many.solves[0][p_pol].iterations > 2);
  o.formulation = Formulation::laurent;
  CHECK(solve(test::lamellar(2), inc, o).incidences[0].preconditioned == std::vector<bool>{false});
  // A metal beyond sweep_orders_limit orders (up to 321): the sweep at once, in either formulation (averaged can
  // pass the switch's check on a metal and then take hundreds of iterations, solver.cpp memory_plan).
  for (Formulation formulation : test::formulations) {
    INFO(to_string(formulation));
    o.formulation = formulation;
    const IncidenceResult metal = solve(test::thin_metal_lamellar(2), inc, o).incidences[0];
    CHECK(metal.preconditioned == std::vector<bool>{true});
    CHECK(metal.solves[0][p_pol].iterations <= 2);
  }
  o.method = Method::dense_lu;
  o.m1 = 2;
  CHECK(solve(test::lamellar(2), inc, o).incidences[0].preconditioned == std::vector<bool>{false});
}

TEST_CASE("an ε = 12 lamellar grating in p converges in a third of the iterations or fewer", "[physics][preconditioner]") {
  // The case #10 names: without a preconditioner GMRES needs hundreds of iterations in p.
  Structure s = test::lamellar(20);
  std::get<Rectangle>(s.layers[0].shapes[0]).material = Material::constant_permittivity(12.0);
  const std::vector<Incidence> inc{{1.0, 10, 0}};
  SolverOptions o;
  o.m1 = 20;
  o.backend = conv::Backend::cpu_fftw;
  o.gmres_restart = 200;
  o.tolerance = 1e-8;
  o.on_unconverged = OnUnconverged::mark;
  o.preconditioner = Preconditioning::none;
  const IncidenceResult plain = solve(s, inc, o).incidences[0];
  o.preconditioner = Preconditioning::averaged;
  const IncidenceResult pre = solve(s, inc, o).incidences[0];
  const int without = plain.solves[0][p_pol].iterations, with = pre.solves[0][p_pol].iterations;
  INFO("p iterations: " << without << " without, " << with << " with the preconditioner");
  CHECK(pre.solves[0][p_pol].converged);
  CHECK(3 * with <= without);
}

namespace {

/// max over the matrices of max |a − b| / max |b| (one matrix: `size` consecutive values).
double matrixwise_difference(const std::vector<std::complex<double>>& a, const std::vector<std::complex<double>>& b,
                             std::size_t size) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t k = 0; k < a.size(); k += size) {
    double err = 0, scale = 0;
    for (std::size_t i = k; i < k + size; ++i) {
      err = std::max(err, std::abs(a[i] - b[i]));
      scale = std::max(scale, std::abs(b[i]));
    }
    worst = std::max(worst, err / scale);
  }
  return worst;
}

/// A lamellar grating or the crossed one with a random absorbing ridge, at random oblique (conical)
/// incidences: every component of the Green tensors is non-zero.
Structure random_grating(bool one_dimensional, int slices) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Structure s = one_dimensional ? test::lamellar(slices) : test::crossed(slices);
  Rectangle& ridge = std::get<Rectangle>(one_dimensional ? s.layers[0].shapes[0] : s.layers[0].shapes[1]);
  ridge.material = Material::constant_permittivity({2.0 + 10.0 * u(test::rng()), 0.5 * u(test::rng())});
  return s;
}

std::vector<Incidence> random_incidences() {
  std::uniform_real_distribution<double> theta(5.0, 70.0), phi(0.0, 90.0);
  return {{1.0, theta(test::rng()), phi(test::rng())}, {1.0, theta(test::rng()), 0.0}};
}

/// The cpu-direct problem (M1 = 3, M2 = 1 or 0) of random_grating(one_dimensional, 3) at `incidences`.
std::unique_ptr<DiscreteProblem<double>> random_problem(Formulation formulation, bool one_dimensional,
                                                        const std::vector<Incidence>& incidences) {
  std::vector<std::string> warnings;
  ProblemSettings settings;
  settings.m1 = 3;
  settings.m2 = one_dimensional ? 0 : 1;
  settings.backend = conv::Backend::cpu_direct;
  settings.formulation = formulation;
  return std::make_unique<DiscreteProblem<double>>(random_grating(one_dimensional, 3), incidences, settings, 1,
                                                   warnings);
}

/// Per incidence a, the n×n matrix of A (the solver's whole operator: convolution engine + z-operator)
/// between the unknowns at(j, a) of the batched layout, column-major at [(a·n + j)·n + i]: A applied to
/// unit vectors at every incidence's unknown j at once (each rhs 2a, incidence a's s right-hand side,
/// its own), read at the unknowns i.
template <class At>
std::vector<std::complex<double>> operator_block(DiscreteProblem<double>& problem, int incidences, std::size_t n, At at) {
  using C = std::complex<double>;
  std::vector<C> block(std::size_t(incidences) * n * n, test::poison<double>());
  std::vector<C> unit(problem.layout().size()), column(problem.layout().size());
  for (std::size_t j = 0; j < n; ++j) {
    std::fill(unit.begin(), unit.end(), C(0));
    for (int a = 0; a < incidences; ++a) unit[at(j, a)] = 1.0;
    problem.apply(unit.data(), column.data());
    for (int a = 0; a < incidences; ++a)
      for (std::size_t i = 0; i < n; ++i) block[(std::size_t(a) * n + j) * n + i] = column[at(i, a)];
  }
  return block;
}

}  // namespace

TEST_CASE("the assembled Ā and L̄ equal the z-operator on unit vectors and L_p the diagonal blocks of A", "[physics][preconditioner]") {
  // Independent references: Ā column by column from the host z-operator (the solver's K, swept) on
  // unit vectors, one (incidence, order, slice, component) at a time, with the mean tensors as the
  // source; L_p column by column from the solver's whole operator A (convolution engine + z-operator)
  // on unit vectors, read in the slice's own rows. L̄_p is Ā's diagonal block (p, p).
  using C = std::complex<double>;
  for (Formulation formulation : test::formulations)
    for (bool one_dimensional : {true, false}) {
      INFO(to_string(formulation) << (one_dimensional ? ", 1D" : ", 2D"));
      const std::vector<Incidence> inc = random_incidences();
      const auto problem_owner = random_problem(formulation, one_dimensional, inc);
      DiscreteProblem<double>& problem = *problem_owner;
      const conv::Problem& pattern = problem.convolution().problem();
      const std::vector<MeanTensors> tensors = slice_mean_tensors(pattern, problem.kernels());
      const GreenCoefficients g = green_coefficients(problem.discretisation().grid, problem.orders());
      const AveragedMatrices averaged = averaged_matrices(g, tensors);
      const LocalMatrices local = local_matrices(g, pattern, problem.kernels(), tensors);
      const int na = g.incidences, nm = g.orders, nz = g.slices;
      const std::size_t n = 3 * std::size_t(nz), block = 3 * std::size_t(nm);

      std::vector<C> reference(averaged.matrices.size(), test::poison<double>());
      std::vector<C> reference_bar(local.averaged.size(), test::poison<double>());
      std::vector<int> one_rhs_per_incidence(std::size_t(na), 0);
      for (int a = 0; a < na; ++a) one_rhs_per_incidence[std::size_t(a)] = a;
      const auto z = make_host_z_operator<double>(g, one_rhs_per_incidence, 0b011);
      std::vector<C> x(std::size_t(nz) * na * block), c(std::size_t(nz) * na * 5 * nm), y(x.size());
      for (int a = 0; a < na; ++a)
        for (int m = 0; m < nm; ++m)
          for (int p = 0; p < nz; ++p)
            for (int j = 0; j < 3; ++j) {
              std::fill(x.begin(), x.end(), C(0));
              std::fill(c.begin(), c.end(), C(0));
              x[(std::size_t(p) * na + a) * block + j * nm + m] = 1.0;
              for (int comp = 0; comp < 3; ++comp)
                c[(std::size_t(p) * na + a) * 5 * nm + comp * nm + m] = tensors[p].c[comp * 3 + j];
              for (int comp = 0; comp < 2; ++comp)
                c[(std::size_t(p) * na + a) * 5 * nm + (3 + comp) * nm + m] = tensors[p].d[comp * 3 + j];
              z->apply(x.data(), c.data(), y.data(), nullptr);
              for (int q = 0; q < nz; ++q)
                for (int i = 0; i < 3; ++i) {
                  const C v = y[(std::size_t(q) * na + a) * block + i * nm + m];
                  reference[((std::size_t(a) * nm + m) * n + std::size_t(p) * 3 + j) * n + std::size_t(q) * 3 + i] = v;
                  if (q == p) reference_bar[((std::size_t(a) * nm + m) * nz + p) * 9 + i * 3 + j] = v;
                }
            }
      const double averaged_error = matrixwise_difference(averaged.matrices, reference, n * n);
      const double bar_error = matrixwise_difference(local.averaged, reference_bar, 9);
      INFO("Ā: " << averaged_error << ", L̄: " << bar_error);
      CHECK(averaged_error < 1e-13);
      CHECK(bar_error < 1e-13);

      // L_p: rhs 2a is incidence a's s right-hand side (DiscreteProblem's order: s, p per incidence).
      const BatchLayout& l = problem.layout();
      const std::size_t n_l = local.n(), nr = l.rhs;
      std::vector<C> reference_local(local.matrices.size(), test::poison<double>());
      for (int p = 0; p < nz; ++p) {  // unknown j = component·orders + m of slice p
        const std::vector<C> slice = operator_block(problem, na, n_l, [&](std::size_t j, int a) {
          return (std::size_t(p) * nr + 2 * std::size_t(a)) * block + j;
        });
        for (int a = 0; a < na; ++a)
          std::copy_n(&slice[std::size_t(a) * n_l * n_l], n_l * n_l,
                      &reference_local[(std::size_t(a) * nz + p) * n_l * n_l]);
      }
      const double local_error = matrixwise_difference(local.matrices, reference_local, n_l * n_l);
      INFO("L_p: " << local_error);
      CHECK(local_error < 1e-12);
    }
}

TEST_CASE("the assembled coarse matrix A_c is the principal submatrix of A at the coarse orders", "[physics][preconditioner]") {
  // Independent reference: A column by column from the solver's whole operator (convolution engine +
  // z-operator) on unit vectors at the coarse unknowns, read at the coarse unknowns.
  using C = std::complex<double>;
  for (Formulation formulation : test::formulations)
    for (bool one_dimensional : {true, false}) {
      INFO(to_string(formulation) << (one_dimensional ? ", 1D" : ", 2D"));
      const std::vector<Incidence> inc = random_incidences();
      const auto problem_owner = random_problem(formulation, one_dimensional, inc);
      DiscreteProblem<double>& problem = *problem_owner;
      const int mc = 2;  // 2D: Mc1 = 2, Mc2 = min(2, M2) = 1
      const CoarseMatrices coarse = coarse_matrices(problem.grids(), problem.orders(),
                                                    problem.convolution().problem(), problem.kernels(), mc);
      const int na = int(inc.size()), nz = int(problem.layout().slices);
      const std::size_t nc = coarse.orders.size(), n = coarse.n();
      REQUIRE(coarse.m1 == 2);
      REQUIRE(coarse.m2 == (one_dimensional ? 0 : 1));
      REQUIRE(n == 3 * std::size_t(nz) * (one_dimensional ? 5 : 15));
      const BatchLayout& l = problem.layout();
      const std::size_t nm = l.block / 3, nr = l.rhs;
      // Coarse unknown u of rhs 2a (incidence a's s right-hand side) in the batched layout.
      const auto at = [&](std::size_t u, int a) {
        const std::size_t pi = u / nc;
        return ((pi / 3) * nr + 2 * std::size_t(a)) * 3 * nm + (pi % 3) * nm + std::size_t(coarse.orders[u % nc]);
      };
      const std::vector<C> reference = operator_block(problem, na, n, at);
      const double error = matrixwise_difference(coarse.matrices, reference, n * n);
      INFO("A_c: " << error);
      CHECK(error < 1e-12);
    }
}

TEST_CASE("the coarse host application equals Ā⁻¹ and A_c⁻¹ from dense inverses", "[physics][preconditioner]") {
  for (const auto& [m1, m2, slices] : {std::tuple{3, 2, 2}, std::tuple{2, 0, 3}, std::tuple{1, 1, 1}})
    for (const std::vector<int>& rhs : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{1, 0}}) {
      INFO("M = " << m1 << ", " << m2 << ", " << slices << " ridge slices, " << rhs.size() << " rhs");
      const auto [dense, sweep, coarse] = test::random_coarse_parts(m1, m2, slices, 0.0);
      const LocalMatrices no_local{sweep.incidences, sweep.orders, sweep.slices, {}, {}};
      const auto p = make_host_coarse_preconditioner<double>(make_host_preconditioner<double>(sweep, no_local, rhs),
                                                             coarse, rhs, sweep.orders);
      const auto x = test::random_complex<double>(std::size_t(sweep.slices) * rhs.size() * 3 * sweep.orders);
      std::vector<std::complex<double>> y(x.size(), test::poison<double>());
      p->apply(x.data(), y.data(), nullptr);
      CHECK(test::relative_difference(y, test::dense_coarse_apply(dense, coarse, rhs, x)) < 1e-11);
    }
}

TEST_CASE("a singular coarse matrix is refused, naming its incidence (host)", "[physics][preconditioner]") {
  auto [dense, sweep, coarse] = test::random_coarse_parts(2, 1, 2, 0.0);
  const std::size_t n = coarse.n();
  for (std::size_t i = 0; i < n; ++i) coarse.matrices[(1 * n + 7) * n + i] = 0.0;  // incidence 1, column 7
  const LocalMatrices no_local{sweep.incidences, sweep.orders, sweep.slices, {}, {}};
  CHECK_THROWS_WITH(make_host_coarse_preconditioner<double>(
                        make_host_preconditioner<double>(sweep, no_local, {0, 0, 1, 1}), coarse, {0, 0, 1, 1},
                        sweep.orders),
                    Catch::Contains("coarse problem (A at the lowest orders) is singular for incidence 1"));
}

TEST_CASE("the coarse preconditioner is the inverse of A when the coarse orders are all orders (host)", "[physics][preconditioner]") {
  for (Formulation formulation : test::formulations)
    for (bool one_dimensional : {true, false}) {
      const int m1 = 2, m2 = one_dimensional ? 0 : 1;
      INFO(to_string(formulation) << (one_dimensional ? ", 1D" : ", 2D"));
      CHECK(test::inverse_error<double>(test::single_slice(one_dimensional), conv::Backend::cpu_fftw, formulation, m1,
                                        m2, Preconditioning::coarse, 2) < 1e-11);
      CHECK(test::inverse_error<double>(random_grating(one_dimensional, 2), conv::Backend::cpu_direct, formulation, m1,
                                        m2, Preconditioning::coarse, 2) < 1e-11);
      CHECK(test::inverse_error<float>(random_grating(one_dimensional, 2), conv::Backend::cpu_direct, formulation, m1,
                                       m2, Preconditioning::coarse, 2) < 2e-4);
    }
}

TEST_CASE("the coarse preconditioner keeps the solution and cuts the iterations of a crossed grating", "[physics][preconditioner]") {
  // Like validation/peers 'rectangles': a crossed grating of ε = 6 rectangles, conical incidence.
  Structure s = test::crossed(6);
  std::get<Ellipse>(s.layers[0].shapes[0]).material = Material::constant_permittivity(6.0);
  std::get<Rectangle>(s.layers[0].shapes[1]).material = Material::constant_permittivity(6.0);
  const std::vector<Incidence> inc{{1.0, 20, 45}};
  SolverOptions o;
  o.m1 = 4;
  o.m2 = 4;
  o.backend = conv::Backend::cpu_fftw;
  o.gmres_restart = 100;
  o.tolerance = 1e-9;
  o.preconditioner = Preconditioning::none;
  const IncidenceResult plain = solve(s, inc, o).incidences[0];
  o.preconditioner = Preconditioning::coarse;
  const IncidenceResult pre = solve(s, inc, o).incidences[0];
  CHECK(pre.preconditioned == std::vector<bool>{true});
  int without = 0, with = 0;
  for (int pol : {s_pol, p_pol}) {
    without += plain.solves[0][pol].iterations;
    with += pre.solves[0][pol].iterations;
    CHECK(pre.solves[0][pol].converged);
    CHECK(std::abs(plain.total_R[pol] - pre.total_R[pol]) < 1e-8);
    CHECK(std::abs(plain.total_T[pol] - pre.total_T[pol]) < 1e-8);
  }
  INFO("iterations (s + p): " << without << " without, " << with << " with the coarse preconditioner");
  CHECK(with < without);
}
