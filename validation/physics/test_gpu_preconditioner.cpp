// The preconditioner on the device (physics/device_preconditioner.cu): its application (Ā's sweep, cuBLAS
// inverses of L_p) equals the host's and dense inverses, singular slice blocks are refused as on the host, exact inverse in the same limits as on the host, and device-preconditioned solves equal
// host-preconditioned ones. The coarse preconditioner's device application equals the host's.
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <utility>

#include "physics/device.hpp"
#include "physics/preconditioner.hpp"
#include "physics/solver.hpp"
#include "validation/physics/preconditioner_checks.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

/// y = P x with P on the device (x, y on the host).
template <class Real>
std::vector<std::complex<Real>> device_apply(Preconditioner<Real>& p, const BatchLayout& layout,
                                             const std::vector<std::complex<Real>>& x) {
  DeviceStream stream;
  auto space = make_device_vector_space<Real>(layout, 2, stream.get());
  space->upload(x, 0);
  p.apply(space->data(0), space->data(1), stream.get());
  std::vector<std::complex<Real>> y(x.size(), test::poison<Real>());
  space->download(1, y);
  return y;
}

TEST_CASE("the device application (Ā's sweep, cuBLAS inverses of L_p) equals the host's and dense inverses",
          "[physics][preconditioner][gpu]") {
  for (const auto& [m1, m2, slices] : {std::tuple{2, 0, 3}, std::tuple{20, 0, 24}, std::tuple{2, 1, 2}})
    for (const std::vector<int>& rhs : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 1}}) {
      INFO("M = " << m1 << ", " << m2 << ", " << slices << " ridge slices, " << rhs.size() << " rhs");
      const test::RandomParts parts = test::random_parts(m1, m2, slices);
      const BatchLayout layout{std::size_t(parts.sweep.slices), rhs.size(), 3 * std::size_t(parts.sweep.orders)};
      const auto x = test::random_complex<double>(layout.size());
      const auto device = make_device_preconditioner<double>(parts.sweep, parts.local, rhs);
      const auto on_device = device_apply(*device, layout, x);
      std::vector<std::complex<double>> on_host(x.size());
      make_host_preconditioner<double>(parts.sweep, parts.local, rhs)->apply(x.data(), on_host.data(), nullptr);
      // Two correct inversions agree to about κ·ε: 1e-12, or more for an ill-conditioned draw.
      const double tol = std::max(1e-12, 100 * std::numeric_limits<double>::epsilon() *
                                             test::largest_condition(parts.dense, parts.local));
      INFO("tolerance " << tol);
      CHECK(test::relative_difference(on_device, on_host) < tol);
      CHECK(test::relative_difference(on_device, test::dense_apply(parts.dense, parts.local, rhs, x)) < tol);
      // Ā⁻¹ alone, in both precisions (the sweep runs in complex128 either way).
      const LocalMatrices no_local{parts.sweep.incidences, parts.sweep.orders, parts.sweep.slices, {}, {}};
      const auto averaged = test::dense_averaged_apply(parts.dense, rhs, x);
      CHECK(test::relative_difference(
                device_apply(*make_device_preconditioner<double>(parts.sweep, no_local, rhs), layout, x), averaged) < tol);
      const std::vector<std::complex<float>> xf(x.begin(), x.end());
      const auto single = device_apply(*make_device_preconditioner<float>(parts.sweep, no_local, rhs), layout, xf);
      const std::vector<std::complex<double>> widened(single.begin(), single.end());
      CHECK(test::relative_difference(widened, averaged) < 1e6 * tol);
    }
}

TEST_CASE("L_p assembled on the device from the kernels and G_pp gives the preconditioner of the host-assembled L_p",
          "[physics][preconditioner][gpu]") {
  // random_stack_problem: the sloped 1D ridge (the tilted pattern, K = 7) or the crossed grating (K = 7), at a
  // conical and a plane incidence; the rhs are the problem's (s, p per incidence). Both preconditioners invert
  // the same matrices up to the rounding of their assembly (the order of the sums), so they agree to κ·ε.
  for (const auto& [m1, m2, slices] : {std::tuple{2, 0, 3}, std::tuple{12, 0, 5}, std::tuple{2, 1, 2}}) {
    INFO("M = " << m1 << ", " << m2 << ", " << slices << " ridge slices");
    const auto problem = test::random_stack_problem(m1, m2, slices);
    const conv::Problem& pattern = problem->convolution().problem();
    const std::vector<MeanTensors> tensors = slice_mean_tensors(pattern, problem->kernels());
    const GreenCoefficients g = green_coefficients(problem->grids(), problem->orders());
    const AveragedSweep sweep = averaged_sweep(g, tensors);
    const LocalMatrices local = local_matrices(g, pattern, problem->kernels(), tensors);
    const LocalParts parts = local_parts(g, pattern, problem->kernels(), tensors);
    CHECK(parts.groups == coupled_components(local));  // the structural groups are the measured ones here
    const std::vector<int> rhs{0, 0, 1, 1};
    const BatchLayout layout{std::size_t(sweep.slices), rhs.size(), 3 * std::size_t(sweep.orders)};
    const auto x = test::random_complex<double>(layout.size());
    const auto assembled_here = device_apply(*make_device_preconditioner<double>(sweep, parts, rhs), layout, x);
    const auto uploaded = device_apply(*make_device_preconditioner<double>(sweep, local, rhs), layout, x);
    const double tol = std::max(1e-12, 100 * std::numeric_limits<double>::epsilon() *
                                           test::largest_condition(averaged_matrices(g, tensors), local));
    INFO("tolerance " << tol);
    CHECK(test::relative_difference(assembled_here, uploaded) < tol);
    const std::vector<std::complex<float>> xf(x.begin(), x.end());
    const auto single = device_apply(*make_device_preconditioner<float>(sweep, parts, rhs), layout, xf);
    const auto single_uploaded = device_apply(*make_device_preconditioner<float>(sweep, local, rhs), layout, xf);
    const std::vector<std::complex<double>> a(single.begin(), single.end()), b(single_uploaded.begin(), single_uploaded.end());
    CHECK(test::relative_difference(a, b) < std::max(1e-5, 1e6 * tol));
  }
}

TEST_CASE("the device inverts the groups of components of L_p that no element couples alone (random block matrices)",
          "[physics][preconditioner][gpu]") {
  // Random L_p with the elements between groups zeroed (the 1D split y | x, z and three separate
  // components) against the host's factors and Eigen's dense inverses; a singular group is still found.
  using Groups = std::array<int, 3>;
  for (const Groups& groups : {Groups{0, 1, 0}, Groups{0, 1, 2}}) {
    INFO("groups " << groups[0] << groups[1] << groups[2]);
    test::RandomParts parts = test::random_parts(6, 0, 4);
    LocalMatrices& local = parts.local;
    const std::size_t n_l = local.n(), orders = std::size_t(local.orders);
    for (std::size_t k = 0; k < local.count(); ++k)
      for (std::size_t j = 0; j < n_l; ++j)
        for (std::size_t i = 0; i < n_l; ++i)
          if (groups[i / orders] != groups[j / orders]) local.matrices[(k * n_l + j) * n_l + i] = 0.0;
    REQUIRE(coupled_components(local) == groups);
    const std::vector<int> rhs{0, 0, 1, 1};
    const BatchLayout layout{std::size_t(local.slices), rhs.size(), 3 * orders};
    const auto x = test::random_complex<double>(layout.size());
    const auto on_device = device_apply(*make_device_preconditioner<double>(parts.sweep, local, rhs), layout, x);
    std::vector<std::complex<double>> on_host(x.size(), test::poison<double>());
    make_host_preconditioner<double>(parts.sweep, local, rhs)->apply(x.data(), on_host.data(), nullptr);
    const double tol = std::max(1e-12, 100 * std::numeric_limits<double>::epsilon() *
                                           test::largest_condition(parts.dense, local));
    CHECK(test::relative_difference(on_device, on_host) < tol);
    CHECK(test::relative_difference(on_device, test::dense_apply(parts.dense, local, rhs, x)) < tol);
    for (std::size_t i = 0; i < n_l; ++i) local.matrices[((1 * std::size_t(local.slices) + 2) * n_l + orders) * n_l + i] = 0.0;
    CHECK_THROWS_WITH(make_device_preconditioner<double>(parts.sweep, local, rhs),
                      Catch::Contains("slice block of slice 2 is singular"));
  }
}

TEST_CASE("a singular slice block is refused on the device as on the host", "[physics][preconditioner][gpu]") {
  test::check_singular_parts_refused([](auto real, const auto& averaged, const auto& local, const std::vector<int>& rhs) {
    return make_device_preconditioner<decltype(real)>(averaged, local, rhs);
  });
}

TEST_CASE("P is the exact inverse of A in its limits on the device", "[physics][preconditioner][gpu]") {
  for (conv::Backend backend : {conv::Backend::gpu_cufft, conv::Backend::gpu_direct})
    for (Formulation formulation : test::formulations)
      for (bool one_dimensional : {true, false}) {
        if (!test::serves(backend, Precision::double_, formulation, one_dimensional)) continue;
        const int m1 = 3, m2 = one_dimensional ? 0 : 2;
        INFO(conv::to_string(backend) << ", " << to_string(formulation) << (one_dimensional ? ", 1D" : ", 2D"));
        CHECK(test::inverse_error<double>(test::uniform_stack(one_dimensional), backend, formulation, m1, m2) < 1e-11);
        CHECK(test::inverse_error<double>(test::single_slice(one_dimensional), backend, formulation, m1, m2) < 1e-11);
        CHECK(test::inverse_error<float>(test::single_slice(one_dimensional), backend, formulation, m1, m2) < 2e-4);
      }
}

TEST_CASE("device-preconditioned solves equal host-preconditioned ones", "[physics][preconditioner][gpu]") {
  Structure s = test::lamellar(10);
  std::get<Rectangle>(s.layers[0].shapes[0]).material = Material::constant_permittivity({12.0, 0.2});
  const std::vector<Incidence> inc{{1.0, 10, 0}, {1.0, 40, 25}};
  for (Formulation formulation : test::formulations) {
    INFO(to_string(formulation));
    SolverOptions o;
    o.m1 = 10;
    o.formulation = formulation;
    o.gmres_restart = 100;
    o.tolerance = 1e-10;
    o.preconditioner = Preconditioning::averaged;
    o.backend = conv::Backend::cpu_fftw;
    const SolveResult host = solve(s, inc, o);
    o.backend = conv::Backend::gpu_cufft;
    const SolveResult device = solve(s, inc, o);
    for (std::size_t i = 0; i < inc.size(); ++i)
      for (int pol : {s_pol, p_pol}) {
        CHECK(device.incidences[i].preconditioned == std::vector<bool>{true});
        CHECK(device.incidences[i].solves[0][pol].converged);
        CHECK(std::abs(device.incidences[i].total_R[pol] - host.incidences[i].total_R[pol]) < 1e-8);
        CHECK(std::abs(device.incidences[i].orders[0].reflection.p_from_p -
                       host.incidences[i].orders[0].reflection.p_from_p) < 1e-8);
      }
  }
}

TEST_CASE("the coarse preconditioner on the device applies as on the host", "[physics][preconditioner][gpu]") {
  // Sizes: a small one, and a large one (n = 3·50·9 = 1350 coarse unknowns, 21.6 KB of shared memory).
  for (const auto& [m1, m2, slices] : {std::tuple{2, 1, 3}, std::tuple{4, 3, 48}})
    for (const std::vector<int>& rhs : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 1}}) {
      INFO("M = " << m1 << ", " << m2 << ", " << slices << " ridge slices, " << rhs.size() << " rhs");
      // A_c shifted by 4·sqrt(n) on the diagonal: well conditioned, so float measures rounding only.
      const auto [dense, sweep, coarse] = test::random_coarse_parts(m1, m2, slices, 4.0 * std::sqrt(3.0 * (slices + 2) * 9));
      const LocalMatrices no_local{sweep.incidences, sweep.orders, sweep.slices, {}, {}};
      const BatchLayout layout{std::size_t(sweep.slices), rhs.size(), 3 * std::size_t(sweep.orders)};
      const auto x = test::random_complex<double>(layout.size());
      const auto reference = test::dense_coarse_apply(dense, coarse, rhs, x);
      const double tol = std::max(1e-12, 100 * std::numeric_limits<double>::epsilon() *
                                             test::largest_condition(dense, no_local));
      INFO("tolerance " << tol);
      {
        const auto device = make_device_coarse_preconditioner<double>(
            make_device_preconditioner<double>(sweep, no_local, rhs), coarse, rhs, sweep.orders);
        std::vector<std::complex<double>> on_host(x.size(), test::poison<double>());
        make_host_coarse_preconditioner<double>(make_host_preconditioner<double>(sweep, no_local, rhs), coarse, rhs,
                                                sweep.orders)
            ->apply(x.data(), on_host.data(), nullptr);
        const auto on_device = device_apply(*device, layout, x);
        CHECK(test::relative_difference(on_device, on_host) < tol);
        CHECK(test::relative_difference(on_device, reference) < tol);
      }
      {
        std::vector<std::complex<float>> xf(x.begin(), x.end());
        const auto device = make_device_coarse_preconditioner<float>(
            make_device_preconditioner<float>(sweep, no_local, rhs), coarse, rhs, sweep.orders);
        std::vector<std::complex<float>> on_host(x.size(), test::poison<float>());
        make_host_coarse_preconditioner<float>(make_host_preconditioner<float>(sweep, no_local, rhs), coarse, rhs,
                                               sweep.orders)
            ->apply(xf.data(), on_host.data(), nullptr);
        const auto on_device = device_apply(*device, layout, xf);
        const std::vector<std::complex<double>> d(on_device.begin(), on_device.end()), h(on_host.begin(), on_host.end());
        CHECK(test::relative_difference(d, h) < 1e6 * tol);
        CHECK(test::relative_difference(d, reference) < 1e6 * tol);
      }
    }
}

TEST_CASE("device coarse-preconditioned solves equal host ones", "[physics][preconditioner][gpu]") {
  REQUIRE(test::serves(conv::Backend::gpu_cufft, Precision::double_, Formulation::normal_vector));
  Structure s = test::crossed(4);
  const std::vector<Incidence> inc{{1.0, 20, 45}, {1.0, 10, 0}};
  SolverOptions o;
  o.m1 = 3;
  o.m2 = 3;
  o.gmres_restart = 100;
  o.tolerance = 1e-10;
  o.preconditioner = Preconditioning::coarse;
  o.backend = conv::Backend::cpu_fftw;
  const SolveResult host = solve(s, inc, o);
  o.backend = conv::Backend::gpu_cufft;
  const SolveResult device = solve(s, inc, o);
  for (std::size_t i = 0; i < inc.size(); ++i)
    for (int pol : {s_pol, p_pol}) {
      CHECK(device.incidences[i].preconditioned == std::vector<bool>{true});
      CHECK(device.incidences[i].solves[0][pol].converged);
      // the same preconditioner up to rounding (inverse against LU factors): iterations within 2
      CHECK(std::abs(device.incidences[i].solves[0][pol].iterations - host.incidences[i].solves[0][pol].iterations) <= 2);
      CHECK(std::abs(device.incidences[i].total_R[pol] - host.incidences[i].total_R[pol]) < 1e-8);
    }
}
