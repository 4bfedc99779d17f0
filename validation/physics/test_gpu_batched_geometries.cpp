// Geometries batched (issue #11, physics/solver.hpp's solve(pairs)) on the device: the device
// z-operator computes each member's slice tables from that member's grid (a height and a film change
// move z) and equals the host one on random fields, and a batch of structures equals each structure
// solved alone on every GPU backend (gpu-cufft, gpu-fused, gpu-direct), in both formulations and
// precisions, bit for bit as a batch of wavelengths does (test_gpu_batched_wavelengths.cpp says why).
// 1D normal-vector complex128 solves run preconditioned (automatic): the device preconditioner on
// members of different grids is covered too.
#include <string>

#include "physics/device.hpp"
#include "physics/problem.hpp"
#include "validation/physics/device_z_operator_check.hpp"
#include "validation/physics/batched_geometries.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

TEMPLATE_TEST_CASE("the device z-operator on members of different grids equals the host one",
                   "[physics][gpu][batch]", float, double) {
  std::vector<std::string> warnings;
  ProblemSettings settings;
  settings.m1 = 6;
  const std::vector<Structure> s = test::jacobian_structures();
  const std::vector<Incidence> inc{{633, 65, 0}, {633, 40, 30}};
  // The start point, a height change and a film change: three grids of 8 slices.
  const std::vector<ProblemMember> members{{s[0], inc, warnings}, {s[2], inc, warnings}, {s[4], inc, warnings}};
  const DiscreteProblem<double> problem(members, settings, 1);
  const GreenCoefficients g = green_coefficients(problem.grids(), problem.orders());
  REQUIRE(g.grids[0].z != g.grids[1].z);
  REQUIRE(g.grids[0].z != g.grids[2].z);
  std::vector<int> rhs_incidence;
  for (int a = 0; a < g.incidences; ++a) rhs_incidence.insert(rhs_incidence.end(), {a, a});
  test::check_device_z_operator<TestType>(g, rhs_incidence, problem.layout(), {0b000, 0b001});
}

TEST_CASE("GPU: a batch of structures equals each structure solved alone, bit for bit", "[physics][gpu][batch]") {
  for (Formulation formulation : test::formulations)
    for (conv::Backend backend : {conv::Backend::gpu_cufft, conv::Backend::gpu_fused, conv::Backend::gpu_direct})
      for (Precision precision : {Precision::double_, Precision::single}) {
        INFO(to_string(formulation) << ", " << conv::to_string(backend) << ", " << to_string(precision));
        test::check_geometry_cases(formulation, backend, precision, 0);
      }
}

TEST_CASE("GPU: a batch of structures agrees with the CPU to the solver tolerance", "[physics][gpu][batch]") {
  // gpu-fused against cpu-direct, complex128: different engines round differently, so agreement is to
  // the solve's accuracy (relative residual 1e-10 → |Δ amplitude| ≤ 1e-7 here), not bit for bit.
  SolverOptions o;
  o.m1 = 6;
  o.max_wavelengths_per_batch = 100;
  const std::vector<Structure> s = test::jacobian_structures();
  const std::vector<Incidence> inc{{633, 65, 0}, {633, 40, 30}, {500, 65, 0}, {500, 40, 30}};
  std::vector<StructureIncidences> pairs;
  for (const Structure& structure : s) pairs.push_back({structure, inc});
  o.backend = conv::Backend::cpu_direct;
  const std::vector<SolveResult> cpu = solve(pairs, o);
  o.backend = conv::Backend::gpu_fused;
  const std::vector<SolveResult> gpu = solve(pairs, o);
  for (std::size_t k = 0; k < s.size(); ++k) {
    INFO("structure " << k);
    test::check_same_results(gpu[k], cpu[k], 1e-7);
  }
}
