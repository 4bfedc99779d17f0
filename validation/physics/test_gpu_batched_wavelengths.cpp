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
#include "validation/physics/batched_wavelengths.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

TEMPLATE_TEST_CASE("the device z-operator with k1 per incidence equals the host one on a batch of wavelengths",
                   "[physics][gpu][batch]", float, double) {
  using Complex = std::complex<TestType>;
  const double tol = std::is_same_v<TestType, float> ? 1e-6 : 1e-13;
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
  const BatchLayout layout = problem.layout();
  for (int sources : {3, 4, 5}) {
    INFO(sources << " source components");
    auto host = make_host_z_operator<TestType>(g, rhs_incidence, sources);
    auto dev = make_device_z_operator<TestType>(g, rhs_incidence, sources);
    DeviceStream stream;
    const BatchLayout source_layout{layout.slices, layout.rhs, layout.block / 3 * sources};
    auto space = make_device_vector_space<TestType>(layout, 2, stream.get());
    auto source_space = make_device_vector_space<TestType>(source_layout, 1, stream.get());
    const auto x = test::random_complex<TestType>(layout.size()),
               c = test::random_complex<TestType>(source_layout.size());
    std::vector<Complex> expect(layout.size(), test::poison<TestType>());
    host->apply(x.data(), c.data(), expect.data(), nullptr);
    REQUIRE(test::l2_norm<TestType>(expect) > 0);
    space->upload(x, 0);
    source_space->upload(c, 0);
    std::vector<Complex> got(layout.size(), test::poison<TestType>());
    space->upload(got, 1);
    dev->apply(space->data(0), source_space->data(0), space->data(1), stream.get());
    space->download(1, got);
    CHECK(test::relative_l2<TestType, TestType>(got, expect) <= tol);
    const std::size_t sums = layout.rhs * (layout.block / 3) * 4;
    std::vector<std::complex<double>> sums_host(sums, test::poison<double>()), sums_dev(sums, test::poison<double>());
    host->far_field_sums(c.data(), sums_host.data(), nullptr);
    dev->far_field_sums(source_space->data(0), sums_dev.data(), stream.get());
    REQUIRE(test::l2_norm<double>(sums_host) > 0);
    CHECK(test::relative_l2<double, double>(sums_dev, sums_host) <= 1e-13);
  }
}

TEST_CASE("GPU: a batch of wavelengths equals each wavelength solved alone, bit for bit", "[physics][gpu][batch]") {
  for (Formulation formulation : test::formulations)
    for (conv::Backend backend : {conv::Backend::gpu_cufft, conv::Backend::gpu_fused, conv::Backend::gpu_direct})
      for (Precision precision : {Precision::double_, Precision::single}) {
        INFO(to_string(formulation) << ", " << conv::to_string(backend) << ", " << to_string(precision));
        test::check_batched_equals_separate(formulation, backend, precision, 0);
      }
}
