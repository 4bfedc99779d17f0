// Wavelengths batched (issue #10, physics/problem.hpp) on the device: the device z-operator with k1
// per incidence (a batch of two wavelengths, the superstrate dispersive) equals the host one on random
// fields, and a solve of every wavelength in one problem equals each wavelength solved alone on every
// GPU backend (gpu-cufft, gpu-fused, gpu-direct), in both formulations and precisions, bit for bit as
// a result is in any batch of incidences (test_gpu_solver.cpp): an engine slice's convolution reads
// only its own kernels and inputs, each rhs's Krylov scalars and z-operator sweeps are its own, and
// the device reductions sum each rhs over the (unchanged) slices. 1D normal-vector complex128 solves
// run preconditioned (automatic), so the device preconditioner's batch is covered too.
#include <string>

#include "physics/device.hpp"
#include "physics/problem.hpp"
#include "validation/physics/device_z_operator_check.hpp"
#include "validation/physics/batched_wavelengths.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

TEMPLATE_TEST_CASE("the device z-operator with k1 per incidence equals the host one on a batch of wavelengths",
                   "[physics][gpu][batch]", float, double) {
  std::vector<std::string> warnings;
  ProblemSettings settings;
  settings.m1 = 3;
  settings.m2 = 2;
  // Two wavelengths (members) of two incidences each; one strongly evanescent set of orders.
  const std::vector<Incidence> inc{{0.93, 25, 35}, {0.93, 60, 10}, {1.07, 25, 35}, {1.07, 60, 10}};
  const DiscreteProblem<double> problem(test::dispersive_crossed(9), inc, settings, 1, warnings);
  REQUIRE(problem.members() == 2);
  const GreenCoefficients g = green_coefficients(problem.discretisation().grid, problem.orders());
  REQUIRE(g.k1[0] != g.k1[2]);
  const std::vector<int> rhs_incidence{0, 0, 1, 1, 2, 2, 3, 3};
  test::check_device_z_operator<TestType>(g, rhs_incidence, problem.layout(), {0b000, 0b001, 0b011, 0b101, 0b111});
}

TEST_CASE("GPU: a batch of wavelengths equals each wavelength solved alone, bit for bit", "[physics][gpu][batch]") {
  for (Formulation formulation : test::formulations)
    for (conv::Backend backend : {conv::Backend::gpu_cufft, conv::Backend::gpu_fused, conv::Backend::gpu_direct})
      for (Precision precision : {Precision::double_, Precision::single}) {
        INFO(to_string(formulation) << ", " << conv::to_string(backend) << ", " << to_string(precision));
        test::check_batched_equals_separate(formulation, backend, precision, 0);
      }
}
