// The preconditioner on the device (physics/device_preconditioner.cu): exact inverse in the same
// limits as on the host, and device-preconditioned solves equal host-preconditioned ones.
#include <cmath>

#include "physics/device.hpp"
#include "physics/preconditioner.hpp"
#include "physics/solver.hpp"
#include "validation/physics/preconditioner_checks.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

TEST_CASE("P is the exact inverse of A in its limits on the device", "[physics][preconditioner][gpu]") {
  for (conv::Backend backend : {conv::Backend::gpu_cufft, conv::Backend::gpu_direct})
    for (Formulation formulation : test::formulations)
      for (bool one_dimensional : {true, false}) {
        if (!test::serves(backend, conv::Precision::double_, formulation, one_dimensional)) continue;
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
