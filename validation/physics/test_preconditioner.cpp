// physics/preconditioner.hpp: P = L⁻¹ L̄ Ā⁻¹ is the exact inverse of A where it should be (laterally
// uniform stacks; one slice), preconditioned solves agree with unpreconditioned ones to the solver
// tolerance, and the preconditioner makes a high-contrast p-polarised case converge in a fraction of
// the iterations.
#include <cmath>
#include <utility>

#include "physics/preconditioner.hpp"
#include "physics/solver.hpp"
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

TEST_CASE("the host application from LU factors equals the product with dense inverses (random matrices)", "[physics][preconditioner]") {
  // Odd and even sizes (the substitutions take two columns at a time), one and two rhs per incidence.
  for (const auto& [orders, slices] : {std::pair{5, 3}, std::pair{4, 4}, std::pair{1, 1}})
    for (const std::vector<int>& rhs : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{1, 0}}) {
      INFO(orders << " orders, " << slices << " slices, " << rhs.size() << " rhs");
      const auto [averaged, local] = test::random_parts(2, orders, slices);
      const auto p = make_host_preconditioner<double>(averaged, local, rhs);
      const auto x = test::random_complex<double>(std::size_t(slices) * rhs.size() * 3 * orders);
      std::vector<std::complex<double>> y(x.size(), test::poison<double>());
      p->apply(x.data(), y.data(), nullptr);
      CHECK(test::relative_difference(y, test::dense_apply(averaged, local, rhs, x)) < 1e-12);
    }
}

TEST_CASE("a singular averaged matrix or slice block is refused, naming it (host)", "[physics][preconditioner]") {
  test::check_singular_parts_refused([](auto real, const auto& averaged, const auto& local, const std::vector<int>& rhs) {
    return make_host_preconditioner<decltype(real)>(averaged, local, rhs);
  });
}

TEST_CASE("the preconditioner is named auto, averaged or none", "[physics][preconditioner]") {
  for (Preconditioning p : {Preconditioning::automatic, Preconditioning::averaged, Preconditioning::none})
    CHECK(parse_preconditioning(to_string(p)) == p);
  CHECK_THROWS_WITH(parse_preconditioning("jacobi"), Catch::Contains("auto, averaged or none"));
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

TEST_CASE("auto preconditions 1D normal-vector problems in complex128 and leaves the rest alone", "[physics][preconditioner]") {
  SolverOptions o;
  o.m1 = 2;
  o.m2 = 2;
  const std::vector<Incidence> inc{{1.0, 10, 0}};
  CHECK(solve(test::crossed(2), inc, o).incidences[0].preconditioned == std::vector<bool>{false});
  o.m2 = 0;
  CHECK(solve(test::lamellar(2), inc, o).incidences[0].preconditioned == std::vector<bool>{true});
  o.formulation = Formulation::laurent;
  CHECK(solve(test::lamellar(2), inc, o).incidences[0].preconditioned == std::vector<bool>{false});
  o.formulation = Formulation::normal_vector;
  o.precision = conv::Precision::single;
  o.tolerance = 1e-6;
  CHECK(solve(test::lamellar(2), inc, o).incidences[0].preconditioned == std::vector<bool>{false});
  o.precision = conv::Precision::double_;
  o.method = Method::dense_lu;
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
