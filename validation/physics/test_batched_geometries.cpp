// Geometries batched (issue #11: a fit's finite-difference Jacobian as one batch; physics/problem.hpp,
// physics/solver.hpp's solve(pairs)): one problem holds members of different structures, each with its
// own kernels and slice grid (a height or film change moves z, not the slice count). A batch equals
// each structure solved alone, bit for bit on the host backends (cpu-direct, cpu-fftw), in both
// formulations and precisions, for the same reasons as a batch of wavelengths
// (test_batched_wavelengths.cpp): each rhs's Krylov scalars are its own, an engine slice's convolution
// reads only its own kernels and inputs, the z-operator's sweeps of a (rhs, order) only that rhs's
// coefficients, computed from its member's grid by the same expressions as alone. A member of another
// slice count cannot join a problem: solve(pairs) solves it in a batch of its own.
#include <algorithm>

#include "physics/problem.hpp"
#include "physics/solver.hpp"
#include "validation/physics/batched_geometries.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

TEST_CASE("batched geometries: one problem holds each structure's own grid and kernels", "[physics][batch]") {
  const std::vector<Structure> s = test::jacobian_structures();
  const std::vector<Incidence> at_633{{633, 65, 0}}, at_500{{500, 65, 0}};
  ProblemSettings settings;
  settings.m1 = 4;
  std::vector<std::string> warnings;
  // The start point at two wavelengths (one structure: one grid), a height change and a film change.
  const std::vector<ProblemMember> members{
      {s[0], at_633, warnings}, {s[0], at_500, warnings}, {s[2], at_633, warnings}, {s[4], at_633, warnings}};
  const DiscreteProblem<double> problem(members, settings, 1);
  REQUIRE(problem.members() == 4);
  const std::vector<ZGrid> grids = problem.grids();
  REQUIRE(grids.size() == 4);
  CHECK(&problem.discretisation(0) == &problem.discretisation(1));
  CHECK(grids[0].z == grids[1].z);
  CHECK(grids[2].z != grids[0].z);  // 151.3 nm lines: every slice above the film moves
  CHECK(grids[3].z != grids[0].z);  // 41.1 nm film: its slices and the lines above it move
  for (std::size_t w = 0; w < members.size(); ++w) {
    INFO("member " << w);
    CHECK(grids[w].z == slice_grid(members[w].structure).z);
    CHECK(grids[w].thickness == slice_grid(members[w].structure).thickness);
  }
  // Engine slice p·members + w holds member w's kernels: those of its structure solved alone.
  const std::size_t per_slice = problem.kernels().size() / (grids[0].z.size() * members.size());
  for (std::size_t w = 0; w < members.size(); ++w) {
    const DiscreteProblem<double> alone(members[w].structure, members[w].incidences, settings, 1, warnings);
    for (std::size_t p = 0; p < grids[0].z.size(); ++p) {
      INFO("member " << w << ", slice " << p);
      CHECK(std::equal(alone.kernels().begin() + std::ptrdiff_t(p * per_slice),
                       alone.kernels().begin() + std::ptrdiff_t((p + 1) * per_slice),
                       problem.kernels().begin() + std::ptrdiff_t((p * members.size() + w) * per_slice)));
    }
  }
  // Another slice count (7 line slices), another lattice, or another incidence count: no batch.
  const std::vector<Incidence> two{{633, 65, 0}, {633, 40, 30}};
  Structure wider = s[0];
  wider.lattice.period_x = 410;
  for (const std::vector<ProblemMember>& refused :
       {std::vector<ProblemMember>{{s[0], at_633, warnings}, {s[6], at_633, warnings}},
        std::vector<ProblemMember>{{s[0], at_633, warnings}, {wider, at_633, warnings}},
        std::vector<ProblemMember>{{s[0], at_633, warnings}, {s[1], two, warnings}}})
    CHECK_THROWS_AS(DiscreteProblem<double>(refused, settings, 1), InvalidArgument);
}

TEST_CASE("batched geometries: a batch equals each structure solved alone, bit for bit on the host backends",
          "[physics][batch]") {
  for (Formulation formulation : test::formulations)
    for (conv::Backend backend : {conv::Backend::cpu_direct, conv::Backend::cpu_fftw})
      for (Precision precision : {Precision::double_, Precision::single}) {
        INFO(to_string(formulation) << ", " << conv::to_string(backend) << ", " << to_string(precision));
        test::check_geometry_cases(formulation, backend, precision, 0);
      }
}

TEST_CASE("batched geometries: Richardson and fields on each structure's own grid", "[physics][batch]") {
  SolverOptions o;
  o.m1 = 6;
  o.richardson = true;
  o.keep_fields = true;
  test::check_geometries_batched(test::jacobian_structures(), {{633, 65, 0}, {500, 65, 0}}, o, 0);
}

TEST_CASE("batched geometries: each structure gets its own warnings", "[physics][batch]") {
  // Solves stopped after 3 iterations (marked unconverged: one warning per incidence and polarisation)
  // and the Si substrate absorbing (one per wavelength), for the start point and a height change.
  SolverOptions o;
  o.m1 = 6;
  o.max_iterations = 3;
  o.preconditioner = Preconditioning::none;  // the sweep (auto on 1D) converges in one iteration
  o.on_unconverged = OnUnconverged::mark;
  const std::vector<Structure> s = test::jacobian_structures();
  const std::vector<Incidence> incidences{{633, 65, 0}, {633, 40, 30}, {500, 65, 0}, {500, 40, 30}};
  const std::vector<StructureIncidences> pairs{{s[0], incidences}, {s[2], incidences}};
  o.max_wavelengths_per_batch = 100;
  const std::vector<SolveResult> batched = solve(pairs, o);
  o.max_wavelengths_per_batch = 1;
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    INFO("structure " << k);
    const SolveResult alone = solve(pairs[k].structure, incidences, o);
    std::vector<std::string> got = batched[k].warnings, expected = alone.warnings;  // in other batch orders
    std::sort(got.begin(), got.end());
    std::sort(expected.begin(), expected.end());
    CHECK(got == expected);
    const auto count = [&](const char* what) {
      return std::count_if(batched[k].warnings.begin(), batched[k].warnings.end(),
                           [&](const std::string& w) { return w.find(what) != std::string::npos; });
    };
    CHECK(count("did not reach the tolerance") == 8);
    CHECK(count("substrate absorbs") == 2);
    CHECK(batched[k].warnings.size() == 10);
  }
}
