// The solvers: batched GMRES and BiCGStab equal the dense LU of the same discrete system to the
// solver tolerance; complex64 agrees with complex128; batching right-hand sides changes nothing
// (bit for bit on the host backends);
// backends agree; non-convergence is never silent; the automatic method takes BiCGStab on 2D dielectric lattices and
// GMRES on 1D lattices and metals, and says which ran.
#include <cmath>

#include "physics/problem.hpp"
#include "physics/solver.hpp"
#include "validation/physics/batch_independence.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

namespace {

/// Largest difference between two results over every order's R, T and Jones amplitudes.
double max_difference(const IncidenceResult& a, const IncidenceResult& b) {
  REQUIRE(a.orders.size() == b.orders.size());
  double m = 0;
  const auto jones = [&](const Jones& x, const Jones& y) {
    m = std::max({m, std::abs(x.s_from_s - y.s_from_s), std::abs(x.s_from_p - y.s_from_p),
                  std::abs(x.p_from_s - y.p_from_s), std::abs(x.p_from_p - y.p_from_p)});
  };
  for (std::size_t k = 0; k < a.orders.size(); ++k) {
    const DiffractionOrder &x = a.orders[k], &y = b.orders[k];
    REQUIRE((x.m1 == y.m1 && x.m2 == y.m2));
    for (int pol : {s_pol, p_pol}) m = std::max({m, std::abs(x.R[pol] - y.R[pol]), std::abs(x.T[pol] - y.T[pol])});
    jones(x.reflection, y.reflection);
    jones(x.transmission, y.transmission);
  }
  return m;
}

}  // namespace

TEST_CASE("GMRES and BiCGStab equal the dense LU reference to the solver tolerance", "[physics][solver]") {
  struct Case {
    const char* name;
    Structure structure;
    int m1, m2;
    std::vector<Incidence> incidences;
  };
  const Case cases[] = {
      {"1D lamellar", test::lamellar(6), 5, 0, {{1.0, 10, 0}, {1.0, 35, 20}}},
      {"crossed", test::crossed(4), 1, 1, {{0.93, 25, 35}, {0.93, 0, 0}}},  // λ = 1 = Λy would graze
  };
  for (const Case& c : cases) {
    SolverOptions o;
    o.m1 = c.m1;
    o.m2 = c.m2;
    o.method = Method::dense_lu;
    const SolveResult dense = solve(c.structure, c.incidences, o);
    for (Method method : {Method::gmres, Method::bicgstab}) {
      o.method = method;
      o.gmres_restart = 10;  // force restarts
      const SolveResult iterative = solve(c.structure, c.incidences, o);
      for (std::size_t i = 0; i < c.incidences.size(); ++i) {
        INFO(c.name << ", incidence " << i << (method == Method::gmres ? ", GMRES(10)" : ", BiCGStab"));
        const IncidenceResult& d = dense.incidences[i];
        const IncidenceResult& it = iterative.incidences[i];
        for (const auto& pair : d.solves)
          for (const SolveStats& st : pair) CHECK(st.residual < 1e-12);
        for (const auto& pair : it.solves)
          for (const SolveStats& st : pair) {
            CHECK(st.converged);
            CHECK(st.residual <= 1e-10);
            CHECK(st.iterations > 0);
          }
        CHECK(max_difference(d, it) < 1e-8);
      }
    }
  }
}

TEST_CASE("the automatic method: BiCGStab on a 2D dielectric lattice, GMRES on 1D lattices and metals", "[physics][solver]") {
  // krylov_method (solver.cpp). Which method ran is read from the result (IncidenceResult::methods) and checked
  // independently by the products it counted: BiCGStab takes two per iteration (and one per true residual),
  // GMRES one per Arnoldi step (and one per restart).
  struct Case {
    const char* name;
    Structure structure;
    int m1, m2;
    Method expected;
  };
  const Case cases[] = {
      {"crossed, dielectric", test::crossed(4), 2, 2, Method::bicgstab},
      {"1D lamellar", test::lamellar(6), 6, 0, Method::gmres},
      {"crossed, metal", test::metal_crossed(4), 2, 2, Method::gmres},
  };
  const std::vector<Incidence> incidences = {{0.93, 25, 35}};
  for (const Case& c : cases) {
    INFO(c.name);
    SolverOptions o;
    o.m1 = c.m1;
    o.m2 = c.m2;
    o.tolerance = 1e-9;
    o.max_iterations = 3000;
    o.backend = conv::Backend::cpu_fftw;
    REQUIRE(o.method == Method::automatic);  // the default
    const SolveResult automatic = solve(c.structure, incidences, o);
    const IncidenceResult& a = automatic.incidences[0];
    REQUIRE(a.methods.size() == a.solves.size());
    CHECK(a.methods[0] == c.expected);
    for (const SolveStats& st : a.solves[0]) {
      CHECK(st.converged);
      if (c.expected == Method::bicgstab) CHECK(st.matvecs >= 2 * st.iterations);
      else if (!a.preconditioned[0]) CHECK(st.matvecs < 2 * st.iterations);  // the sweep adds products of its own
    }
    // The same as naming the method, bit for bit (host backend), and within the tolerance of the other method.
    o.method = c.expected;
    const SolveResult named = solve(c.structure, incidences, o);
    CHECK(named.incidences[0].methods[0] == c.expected);
    CHECK(max_difference(a, named.incidences[0]) == 0);
    o.method = c.expected == Method::gmres ? Method::bicgstab : Method::gmres;
    const SolveResult other = solve(c.structure, incidences, o);
    CHECK(other.incidences[0].methods[0] == o.method);
    CHECK(max_difference(a, other.incidences[0]) < 1e-6);
  }
}

TEST_CASE("the matrix-free operator applied to random vectors equals the dense matrix it assembles", "[physics][solver]") {
  std::vector<std::string> warnings;
  const std::vector<Incidence> inc{{1.0, 20, 10}};
  ProblemSettings settings;
  settings.m1 = 2;
  settings.m2 = 1;
  DiscreteProblem<double> problem(test::crossed(3), inc, settings, 1, warnings);
  const BatchLayout& l = problem.layout();
  // A x by the operator, and by summing columns A e_j x_j: the same operator, so this checks that
  // apply() is linear and that the dense assembly indexes the batch as apply() does.
  const auto x = test::random_complex<double>(l.size());
  std::vector<std::complex<double>> y(l.size(), test::poison<double>()), b(l.size()), sol(l.size());
  auto space = problem.make_space(2);
  space->upload(x, 0);
  problem.apply(space->data(0), space->data(1));
  space->download(1, y);
  // Solve A z = y densely: z must come back as x.
  solve_dense<double>(problem, y, sol);
  CHECK(test::relative_l2<double, double>(sol, x) < 1e-12);
}

TEST_CASE("complex64 agrees with complex128", "[physics][solver]") {
  SolverOptions o;
  o.m1 = 6;
  const std::vector<Incidence> inc{{1.0, 10, 0}};
  const IncidenceResult d = solve(test::lamellar(6), inc, o).incidences[0];
  o.precision = Precision::single;
  o.tolerance = 1e-5;
  const IncidenceResult f = solve(test::lamellar(6), inc, o).incidences[0];
  for (int pol : {s_pol, p_pol}) {
    CHECK(std::abs(f.total_R[pol] - d.total_R[pol]) < 1e-5 * d.total_R[pol] + 1e-6);
    CHECK(std::abs(f.total_T[pol] - d.total_T[pol]) < 1e-5);
    CHECK(f.solves[0][pol].converged);
  }
}

TEST_CASE("batched right-hand sides give the results of separate solves", "[physics][solver]") {
  SolverOptions o;
  o.m1 = o.m2 = 2;
  const std::vector<Incidence> inc{{0.9, 0, 0}, {0.9, 50, 75}, {1.1, 20, 0}};  // two wavelength groups
  const SolveResult together = solve(test::crossed(3), inc, o);
  for (std::size_t i = 0; i < inc.size(); ++i) {
    const SolveResult alone = solve(test::crossed(3), std::vector<Incidence>{inc[i]}, o);
    INFO("incidence " << i);
    CHECK(together.incidences[i].incidence.theta_deg == inc[i].theta_deg);
    CHECK(max_difference(together.incidences[i], alone.incidences[0]) < 1e-8);
  }
}

TEST_CASE("a result does not depend on the batch it was solved in, bit for bit (host backends)", "[physics][solver]") {
  constexpr conv::Backend host_backends[] = {conv::Backend::cpu_direct, conv::Backend::cpu_fftw};
  test::check_batch_independence_of(host_backends);
}

TEST_CASE("host backends agree: cpu-fftw equals cpu-direct", "[physics][solver]") {
  for (Formulation formulation : test::formulations) {
    INFO(to_string(formulation));
    if (!test::serves(conv::Backend::cpu_fftw, Precision::double_, formulation)) {
      WARN("cpu-fftw does not serve the " + std::string(to_string(formulation)) + " formulation yet: skipped");
      continue;
    }
    SolverOptions o;
    o.m1 = o.m2 = 2;
    o.formulation = formulation;
    const std::vector<Incidence> inc{{1.0, 25, 35}};
    const IncidenceResult direct = solve(test::crossed(3), inc, o).incidences[0];
    o.backend = conv::Backend::cpu_fftw;
    const IncidenceResult fftw = solve(test::crossed(3), inc, o).incidences[0];
    CHECK(max_difference(direct, fftw) < 1e-8);
  }
}

TEST_CASE("non-convergence is thrown or marked, never silent", "[physics][solver]") {
  SolverOptions o;
  o.m1 = 5;
  o.max_iterations = 2;
  o.preconditioner = Preconditioning::none;  // the sweep (auto on 1D) converges in one iteration
  const std::vector<Incidence> inc{{1.0, 10, 0}};
  CHECK_THROWS_AS(solve(test::lamellar(6), inc, o), NotConverged);
  CHECK_THROWS_WITH(solve(test::lamellar(6), inc, o), Catch::Contains("did not reach the tolerance"));
  o.on_unconverged = OnUnconverged::mark;
  for (Method m : {Method::gmres, Method::bicgstab}) {
    o.method = m;
    const SolveResult r = solve(test::lamellar(6), inc, o);
    CHECK_FALSE(r.incidences[0].solves[0][s_pol].converged);
    CHECK(r.incidences[0].solves[0][s_pol].residual > 1e-10);
    CHECK(r.incidences[0].solves[0][s_pol].iterations <= 2);
    REQUIRE(!r.warnings.empty());
    CHECK(r.warnings[0].find("result marked unconverged") != std::string::npos);
  }
}
