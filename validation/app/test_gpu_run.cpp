// `gratingsim run` on a GPU as a user runs it: a sweep of many wavelengths whose units the workers solve side by
// side on one device (app/work_units.hpp), each unit's two Richardson solves also side by side, with the methods
// automatic gives: BiCGStab (device-resident) on a crossed dielectric grating, GMRES with the sweep preconditioner
// on a 1D metal. Every point must converge and equal the cpu-fftw run of the same case to the solver's tolerance. Written after such a sweep (33 wavelengths, peers rectangles, H200)
// returned the initial guess as the result for 12 of its 66 solves, marked unconverged after 0 iterations: the
// device BiCGStab's per-rhs state was copied on the legacy default stream and landed after its first kernels
// (validation/docs/test_streams.cpp now refuses such copies).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "io/problem.hpp"
#include "io/results.hpp"
#include "validation/app/example_cases.hpp"
#include "validation/app/executable.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using test::quoted;
using test::run_gratingsim;

namespace {

/// A crossed grating of ε = 6 rectangles on glass (the peers benchmark's rectangles, validation/peers), 33
/// wavelengths over λ ± 1 %, conical incidence, both polarisations: 66 solves of 2 slicings each.
constexpr const char* crossed_sweep = R"(# crossed rectangles, 33 wavelengths (validation/app/test_gpu_run.cpp)
units: um
wavelength: {start: 0.99, stop: 1.01, count: 33}
incidence: {theta_deg: 20, phi_deg: 45, polarization: both}
lattice: {period_x: 1.2, period_y: 0.9}
superstrate: air
substrate: sub
materials: {sub: {epsilon: [2.25, 0]}, shape: {epsilon: [6, 0]}}
layers:
  - {name: pattern, thickness: 0.35, slices: 6, shapes: [{type: rectangle, material: shape, width_x: 0.6, width_y: 0.45}]}
numerics: {harmonics: [5, 5], richardson: true, precision: double, solver: {tolerance: 1e-9, max_iterations: 3000}}
output: {fields: false}
)";

/// A thin metal line grating in p and s (the peers benchmark's metal_1d, validation/peers), 33 wavelengths: GMRES and
/// the sweep preconditioner, which automatic gives a 1D metal, on the device (device_sweep_preconditioner.cu).
constexpr const char* metal_sweep = R"(# metal lines, 33 wavelengths (validation/app/test_gpu_run.cpp)
units: um
wavelength: {start: 0.99, stop: 1.01, count: 33}
incidence: {theta_deg: 15, phi_deg: 0, polarization: both}
lattice: {period_x: 0.8}
superstrate: air
substrate: sub
materials: {sub: {epsilon: [2.25, 0]}, shape: {epsilon: [-20, 1.5]}}
layers:
  - {name: pattern, thickness: 0.08, slices: 8, shapes: [{type: line, material: shape, width: 0.4}]}
numerics: {harmonics: 15, richardson: true, precision: double, solver: {tolerance: 1e-9, max_iterations: 3000}}
output: {fields: false}
)";

}  // namespace

TEST_CASE("a GPU sweep of many wavelengths in concurrent units converges at every point and equals the CPU's",
          "[app][run][gpu]") {
  const test::ScratchDirectory dir("gpu_run");
  const auto [name, text] = GENERATE(std::pair{"crossed", crossed_sweep}, std::pair{"metal", metal_sweep});
  INFO(name);
  const fs::path config = dir / (std::string(name) + ".yaml"), cpu = dir / (std::string(name) + "_cpu.h5");
  std::ofstream(config) << text;
  const auto run = [&](const fs::path& out, const std::string& options) {
    const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + options + " --quiet");
    INFO(r.output);
    REQUIRE(r.status == 0);  // 3 would say that some solve did not converge
  };
  run(cpu, " --backend cpu-fftw");
  const io::ResultReader reference(cpu.string());
  // One wavelength per unit (many units in flight), and the automatic units (several wavelengths per solve).
  for (const std::string options : {" --wavelengths-per-unit 1", ""}) {
    INFO("gpu-fused" << options);
    const fs::path gpu = dir / (std::string(name) + "_gpu.h5");
    run(gpu, " --backend gpu-fused --overwrite" + options);
    const io::ResultReader result(gpu.string());
    REQUIRE(result.layout() == reference.layout());
    REQUIRE(result.layout().points() == 33);
    for (std::size_t p = 0; p < reference.layout().points(); ++p) {
      INFO("point " << p);
      REQUIRE(result.done(p));
      const io::PointResult x = result.read(p), y = reference.read(p);
      for (std::size_t i = 0; i < x.converged.size(); ++i) {
        CHECK(int(x.converged[i]) == 1);
        CHECK(x.iterations[i] > 0);
        CHECK(x.residual[i] <= 1e-9);
      }
      // Both solves to a relative residual of 1e-9 (and Richardson's difference of two of them): efficiencies
      // agree far below 1e-6.
      REQUIRE(x.reflectance.size() == y.reflectance.size());
      REQUIRE(x.transmittance.size() == y.transmittance.size());
      for (std::size_t i = 0; i < x.reflectance.size(); ++i) CHECK(std::abs(x.reflectance[i] - y.reflectance[i]) < 1e-6);
      for (std::size_t i = 0; i < x.transmittance.size(); ++i)
        CHECK(std::abs(x.transmittance[i] - y.transmittance[i]) < 1e-6);
    }
  }
}

TEST_CASE("every example case at test size on gpu-fused equals its cpu-fftw run", "[app][run][gpu]") {
  // The examples exercise what a user's case may hold (parameters, field maps, accuracy on demand, metals, sweeps
  // of angles); each runs as `gratingsim run` on both backends, and every point's values must agree to the solves'
  // tolerance (relative to the largest of each quantity; single precision to 1e-4), with the same convergence
  // and method.
  const test::ScratchDirectory dir("gpu_examples");
  const auto files = test::example_cases();
  REQUIRE(files.size() >= 11);
  for (const fs::path& config : files) {
    const std::string name = config.stem().string();
    INFO(name);
    const fs::path small = dir / (name + ".yaml"), cpu = dir / (name + "_cpu.h5"), gpu = dir / (name + "_gpu.h5");
    std::ofstream(small) << test::reduced(test::read_text(config));
    const io::Problem problem = io::load_problem(small.string());
    for (const auto& [backend, out] : {std::pair{"cpu-fftw", cpu}, std::pair{"gpu-fused", gpu}}) {
      const test::Execution r =
          run_gratingsim("run " + quoted(small) + " -o " + quoted(out) + " --backend " + backend + " --quiet");
      INFO(backend << ": " << r.output);
      REQUIRE(r.status == 0);
    }
    const io::ResultReader a(gpu.string()), b(cpu.string());
    REQUIRE(a.layout() == b.layout());
    CHECK(a.info().backend == "gpu-fused");
    const bool single = problem.solver.precision == Precision::single;
    const double tolerance = single ? 1e-4 : std::max(1e-7, 100 * problem.solver.tolerance);
    for (std::size_t p = 0; p < b.layout().points(); ++p) {
      INFO("point " << p);
      REQUIRE(a.done(p));
      test::check_same_point(a.read(p), b.read(p), tolerance);
    }
  }
}
