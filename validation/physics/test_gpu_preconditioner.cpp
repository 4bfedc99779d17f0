// The preconditioner on the device (physics/device_preconditioner.cu): its cuBLAS inverses applied equal
// the host's LU factors applied and dense inverses (random matrices), singular matrices are refused as on
// the host, exact inverse in the same limits as on the host, and device-preconditioned solves equal
// host-preconditioned ones. The coarse preconditioner's device application equals the host's.
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

TEST_CASE("the cuBLAS inverses on the device apply as the host LU factors and dense inverses (random matrices)",
          "[physics][preconditioner][gpu]") {
  for (const auto& [orders, slices] : {std::pair{5, 3}, std::pair{41, 24}})
    for (const std::vector<int>& rhs : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 1}}) {
      INFO(orders << " orders, " << slices << " slices, " << rhs.size() << " rhs");
      const auto [averaged, local] = test::random_parts(2, orders, slices);
      const BatchLayout layout{std::size_t(slices), rhs.size(), 3 * std::size_t(orders)};
      const auto x = test::random_complex<double>(layout.size());
      const auto device = make_device_preconditioner<double>(averaged, local, rhs);
      const auto on_device = device_apply(*device, layout, x);
      std::vector<std::complex<double>> on_host(x.size());
      make_host_preconditioner<double>(averaged, local, rhs)->apply(x.data(), on_host.data(), nullptr);
      // Two correct inversions agree to about κ·ε: 1e-12, or more for an ill-conditioned draw.
      const double tol = std::max(1e-12, 100 * std::numeric_limits<double>::epsilon() *
                                             test::largest_condition(averaged, local));
      INFO("tolerance " << tol);
      CHECK(test::relative_difference(on_device, on_host) < tol);
      CHECK(test::relative_difference(on_device, test::dense_apply(averaged, local, rhs, x)) < tol);
    }
}

TEST_CASE("a singular averaged matrix or slice block is refused on the device as on the host", "[physics][preconditioner][gpu]") {
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

TEST_CASE("the coarse preconditioner on the device applies as on the host (random matrices)", "[physics][preconditioner][gpu]") {
  // Sizes: a small one, and a large one (n = 3·48·9 = 1296 coarse unknowns, 20.7 KB of shared memory).
  for (const auto& [m1, m2, slices] : {std::tuple{2, 1, 3}, std::tuple{4, 3, 48}})
    for (const std::vector<int>& rhs : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 1}}) {
      INFO("M = " << m1 << ", " << m2 << ", " << slices << " slices, " << rhs.size() << " rhs");
      // Shifted by 4·sqrt(n) on the diagonal: well conditioned, so float measures rounding only.
      const auto [averaged, coarse] = test::random_coarse_parts(2, m1, m2, slices, 4.0 * std::sqrt(3.0 * slices * 9));
      const LocalMatrices no_local{averaged.incidences, averaged.orders, averaged.slices, {}, {}};
      const BatchLayout layout{std::size_t(slices), rhs.size(), 3 * std::size_t(averaged.orders)};
      const auto x = test::random_complex<double>(layout.size());
      const auto reference = test::dense_coarse_apply(averaged, coarse, rhs, x);
      {
        const auto device = make_device_coarse_preconditioner<double>(
            make_device_preconditioner<double>(averaged, no_local, rhs), coarse, rhs, averaged.orders);
        std::vector<std::complex<double>> on_host(x.size(), test::poison<double>());
        make_host_coarse_preconditioner<double>(make_host_preconditioner<double>(averaged, no_local, rhs), coarse, rhs,
                                                averaged.orders)
            ->apply(x.data(), on_host.data(), nullptr);
        const auto on_device = device_apply(*device, layout, x);
        CHECK(test::relative_difference(on_device, on_host) < 1e-12);
        CHECK(test::relative_difference(on_device, reference) < 1e-12);
      }
      {
        std::vector<std::complex<float>> xf(x.begin(), x.end());
        const auto device = make_device_coarse_preconditioner<float>(
            make_device_preconditioner<float>(averaged, no_local, rhs), coarse, rhs, averaged.orders);
        std::vector<std::complex<float>> on_host(x.size(), test::poison<float>());
        make_host_coarse_preconditioner<float>(make_host_preconditioner<float>(averaged, no_local, rhs), coarse, rhs,
                                               averaged.orders)
            ->apply(xf.data(), on_host.data(), nullptr);
        const auto on_device = device_apply(*device, layout, xf);
        const std::vector<std::complex<double>> d(on_device.begin(), on_device.end()), h(on_host.begin(), on_host.end());
        CHECK(test::relative_difference(d, h) < 1e-5);
        CHECK(test::relative_difference(d, reference) < 1e-5);
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
