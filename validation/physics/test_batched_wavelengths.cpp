// Wavelengths batched (issue #10, physics/problem.hpp): one DiscreteProblem serves incidences of
// several wavelengths, each wavelength (member) its own stack of engine slices with its own kernels,
// k1 per incidence in the z-operator. A solve with every wavelength in one problem equals the solves
// of each wavelength alone, bit for bit on the host backends (cpu-direct, cpu-fftw), in both
// formulations and precisions: each rhs's Krylov scalars are its own, the convolution of an engine
// slice reads only its own kernels and inputs, the z-operator's sweeps of a (rhs, order) only that
// rhs's coefficients, and the host vector space sums each rhs over a fixed partition of the (unchanged)
// slices. Also: the problem's members and convolution plan, uneven incidence counts, splitting by the
// memory budget, and the preconditioners on a batch.
#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include <omp.h>

#include "physics/problem.hpp"
#include "physics/solver.hpp"
#include "validation/physics/batched_wavelengths.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

TEST_CASE("batched wavelengths: one problem holds every wavelength as its own stack of engine slices",
          "[physics][batch]") {
  const test::BatchCase c = test::batch_cases()[0];
  const std::vector<Incidence> incidences = c.incidences();  // runs of one wavelength, 2 incidences each
  const int members = int(c.wavelengths.size());
  for (Formulation formulation : test::formulations) {
    ProblemSettings settings;
    settings.m1 = c.m1;
    settings.formulation = formulation;
    std::vector<std::string> warnings;
    const DiscreteProblem<double> problem(c.structure, incidences, settings, 1, warnings);
    const int nz = problem.discretisation().grid.slices();
    CHECK(problem.members() == members);
    CHECK(problem.rhs() == 2 * int(incidences.size()));
    CHECK(int(problem.layout().slices) == nz);
    const conv::Problem& plan = problem.convolution().problem();
    CHECK(plan.slices == nz * members);
    CHECK(plan.per_slice == (formulation == Formulation::laurent ? 3 : 1) * 2 * int(c.angles.size()));
    // Engine slice p·members + w holds member w's kernels: those of the same slice solved alone.
    const std::size_t per_slice = plan.kernels_total() / std::size_t(plan.slices);
    for (int w = 0; w < members; ++w) {
      const std::vector<Incidence> own(incidences.begin() + w * 2, incidences.begin() + (w + 1) * 2);
      const DiscreteProblem<double> alone(c.structure, own, settings, 1, warnings);
      for (int p = 0; p < nz; ++p) {
        INFO("member " << w << ", slice " << p);
        CHECK(std::equal(alone.kernels().begin() + std::ptrdiff_t(std::size_t(p) * per_slice),
                         alone.kernels().begin() + std::ptrdiff_t(std::size_t(p + 1) * per_slice),
                         problem.kernels().begin() + std::ptrdiff_t((std::size_t(p) * members + w) * per_slice)));
      }
    }
  }
  // Runs of unequal length are no batch.
  std::vector<Incidence> uneven = incidences;
  uneven.pop_back();
  std::vector<std::string> warnings;
  CHECK_THROWS_AS(DiscreteProblem<double>(c.structure, uneven, ProblemSettings{}, 1, warnings), InvalidArgument);
}

TEST_CASE("batched wavelengths: a batch equals each wavelength solved alone, bit for bit on the host backends",
          "[physics][batch]") {
  for (Formulation formulation : test::formulations)
    for (conv::Backend backend : {conv::Backend::cpu_direct, conv::Backend::cpu_fftw})
      for (Precision precision : {Precision::double_, Precision::single}) {
        INFO(to_string(formulation) << ", " << conv::to_string(backend) << ", " << to_string(precision));
        test::check_batched_equals_separate(formulation, backend, precision, 0);
      }
}

TEST_CASE("batched wavelengths: uneven incidence counts, Richardson, fields and a memory budget of two wavelengths",
          "[physics][batch]") {
  const test::BatchCase c = test::batch_cases()[0];
  // Every wavelength has 2 incidences but 760 nm has 3: it is solved apart, the others together.
  std::vector<Incidence> incidences = c.incidences();
  incidences.push_back({760, 65, 10});
  std::rotate(incidences.begin(), incidences.end() - 1, incidences.end());  // solve() keeps the given order
  SolverOptions o;
  o.m1 = c.m1;
  o.richardson = true;
  o.keep_fields = true;
  o.max_wavelengths_per_batch = 1;
  const SolveResult separate = solve(c.structure, incidences, o);
  o.max_wavelengths_per_batch = 100;  // as many as there are (0, automatic, is one on the host without the sweep)
  const SolveResult batched = solve(c.structure, incidences, o);
  test::check_same_results(batched, separate, 0);
  for (std::size_t i = 0; i < incidences.size(); ++i) {
    REQUIRE(batched.incidences[i].fields);
    CHECK(batched.incidences[i].fields->harmonics == separate.incidences[i].fields->harmonics);
    CHECK(batched.incidences[i].slice_counts == separate.incidences[i].slice_counts);
  }
  // A memory limit that holds 2 wavelengths of the 3 with 2 incidences (Laurent, no preconditioner;
  // Richardson's finer grid sizes the batch): batches of 2, the same results.
  o.formulation = Formulation::laurent;
  o.preconditioner = Preconditioning::none;
  o.keep_fields = false;
  o.max_wavelengths_per_batch = 1;
  const SolveResult laurent_separate = solve(c.structure, incidences, o);
  const int finest = slice_grid(c.structure, 2).slices();
  o.memory_limit_bytes = estimate_bytes(std::size_t(finest), std::size_t(2 * c.m1 + 1), 4, c.m1, 0, sizeof(double),
                                        o.gmres_restart + 4, false, Formulation::laurent, 2);
  o.max_wavelengths_per_batch = 100;
  test::check_same_results(solve(c.structure, incidences, o), laurent_separate, 0);
  // Below one wavelength's need the solve refuses, as before batching.
  o.memory_limit_bytes = estimate_bytes(std::size_t(finest), std::size_t(2 * c.m1 + 1), 2, c.m1, 0, sizeof(double),
                                        o.gmres_restart + 4, false, Formulation::laurent, 1) - 1;
  CHECK_THROWS_AS(solve(c.structure, incidences, o), InvalidArgument);
}

TEST_CASE("batched wavelengths: preconditioned and unpreconditioned batches agree to the solver tolerance",
          "[physics][batch][preconditioner]") {
  // The averaged preconditioner (1D) and the coarse one (2D) on a batch: each incidence's Ā, L_p and
  // A_c are built from its own member's kernels and k1 (a wrong member would leave the residuals
  // right, they are those of A x = b, but change the iterations: the batch equals each wavelength
  // preconditioned alone, bit for bit).
  for (const test::BatchCase& c : test::batch_cases()) {
    INFO(c.name);
    const bool one_dimensional = c.structure.lattice.one_dimensional();
    SolverOptions o;
    o.m1 = c.m1;
    o.m2 = c.m2;
    o.tolerance = 1e-10;
    o.max_wavelengths_per_batch = 100;
    o.preconditioner = Preconditioning::none;
    const SolveResult plain = solve(c.structure, c.incidences(), o);
    o.preconditioner = one_dimensional ? Preconditioning::averaged : Preconditioning::coarse;
    const SolveResult preconditioned = solve(c.structure, c.incidences(), o);
    o.max_wavelengths_per_batch = 1;
    const SolveResult preconditioned_alone = solve(c.structure, c.incidences(), o);
    test::check_same_results(preconditioned, plain, 1e-8);
    test::check_same_results(preconditioned, preconditioned_alone, 0);
    for (const IncidenceResult& r : preconditioned.incidences) CHECK(r.preconditioned[0]);
  }
}

TEST_CASE("automatic on the host batches the sweep's members so that every thread has a group of it",
          "[physics][batch][preconditioner]") {
  // Four copies of the Si lines, one (conical) incidence each (members of one shape, solve(pairs)): with the
  // sweep automatic gives threads / incidences members per problem (host_sweep_members), and a batch's
  // time is counted once, in its first member's result; without the sweep one member per problem. The
  // results are those of one member per problem, bit for bit.
  const test::BatchCase c = test::batch_cases()[2];
  const std::vector<Incidence> incidences{{633, 40, 30}, {700, 40, 30}, {810, 40, 30}, {900, 40, 30}};
  std::vector<StructureIncidences> pairs;
  for (const Incidence& incidence : incidences) pairs.push_back({c.structure, std::span(&incidence, 1)});
  SolverOptions o;
  o.m1 = c.m1;
  o.backend = conv::Backend::cpu_direct;
  o.preconditioner = Preconditioning::sweep;
  o.max_wavelengths_per_batch = 1;
  const std::vector<SolveResult> alone = solve(pairs, o);
  const int threads = omp_get_max_threads();
  const auto timed = [](const std::vector<SolveResult>& results) {
    std::vector<bool> out;
    for (const SolveResult& r : results) out.push_back(r.phases.total() > 0);
    return out;
  };
  CHECK(timed(alone) == std::vector<bool>{true, true, true, true});
  o.max_wavelengths_per_batch = 0;  // automatic
  for (const int t : {2, 4, 8}) {
    INFO(t << " threads: " << host_sweep_members(1, t) << " members per problem");
    omp_set_num_threads(t);
    const std::vector<SolveResult> automatic = solve(pairs, o);
    omp_set_num_threads(threads);
    for (std::size_t k = 0; k < pairs.size(); ++k) test::check_same_results(automatic[k], alone[k], 0);
    const std::vector<std::vector<bool>> expected{{true, false, true, false}, {true, false, false, false},
                                                  {true, false, false, false}};
    CHECK(timed(automatic) == expected[t == 2 ? 0 : t == 4 ? 1 : 2]);
  }
  // Without the sweep (averaged), automatic keeps one member per problem whatever the threads.
  o.preconditioner = Preconditioning::averaged;
  omp_set_num_threads(8);
  const std::vector<SolveResult> averaged = solve(pairs, o);
  omp_set_num_threads(threads);
  CHECK(timed(averaged) == std::vector<bool>{true, true, true, true});
}
