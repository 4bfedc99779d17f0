// The discrete problem's set-up (physics/problem.hpp): its kernels, built in parallel over the
// slices' contents (issue #15), equal each content's kernels built alone, slice by slice and to the
// bit, in both formulations; an invalid content's error leaves the parallel build as an exception; the
// planned convolution is physics::convolution_problem's.
#include <omp.h>

#include <cstring>
#include <random>

#include "physics/discretisation.hpp"
#include "physics/problem.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

namespace {

/// Pillars on a square lattice of period 1 whose radius changes with every step (random radii and
/// permittivities each run): `steps` distinct slice contents.
Structure random_pillars(int steps, bool crossed) {
  std::uniform_real_distribution<double> u(0, 1);
  auto& g = test::rng();
  Structure s;
  s.lattice = {1.0, crossed ? 1.0 : 0.0};
  s.superstrate = Material::constant_index(1.0);
  s.substrate = Material::constant_permittivity(2.25);
  Layer layer;
  layer.thickness = 0.3;
  layer.slices = steps;
  layer.background = Material::constant_index(1.0);
  for (int k = 0; k < steps; ++k) {
    const Material m = Material::constant_permittivity({2 + 3 * u(g), 0.1 * u(g)});
    if (crossed) {
      Ellipse e;
      e.semi_axis_x = 0.1 + 0.3 * u(g);
      e.semi_axis_y = 0.1 + 0.3 * u(g);
      e.material = m;
      layer.steps.push_back({e});
    } else {
      Rectangle r;
      r.width_x = 0.1 + 0.6 * u(g);
      r.material = m;
      layer.steps.push_back({r});
    }
  }
  s.layers = {layer};
  return s;
}

}  // namespace

TEST_CASE("problem kernels: built in parallel, each slice's equal its content's kernels built alone", "[physics][problem]") {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(4);  // several threads even on a one-core runner
  for (const bool crossed : {false, true})
    for (const Formulation formulation : {Formulation::normal_vector, Formulation::laurent}) {
      INFO((crossed ? "crossed" : "1D") << ", " << to_string(formulation));
      const Structure s = random_pillars(9, crossed);
      const Incidence incidence{0.633, 20, crossed ? 30.0 : 0.0};
      ProblemSettings settings;
      settings.m1 = 3;
      settings.m2 = crossed ? 2 : 0;
      settings.backend = conv::Backend::cpu_fftw;
      settings.formulation = formulation;
      std::vector<std::string> warnings;
      const DiscreteProblem<double> problem(s, {&incidence, 1}, settings, 1, warnings);
      const Discretisation& d = problem.discretisation();
      REQUIRE(d.contents.size() == 9);
      const std::size_t per_slice = problem.kernels().size() / std::size_t(d.grid.slices());
      for (int p = 0; p < d.grid.slices(); ++p) {
        const SliceContent& c = d.contents[std::size_t(d.content_of_slice[std::size_t(p)])];
        const Complex eps1 = s.superstrate.permittivity(incidence.wavelength);
        const std::vector<Complex> alone =
            formulation == Formulation::normal_vector
                ? normal_vector_kernels(s.lattice, c, incidence.wavelength, eps1, settings.m1, settings.m2)
                : contrast_harmonics(s.lattice, c, incidence.wavelength, eps1, settings.m1, settings.m2);
        REQUIRE(alone.size() == per_slice);
        INFO("slice " << p);
        CHECK(std::memcmp(alone.data(), problem.kernels().data() + std::size_t(p) * per_slice,
                          per_slice * sizeof(Complex)) == 0);
      }
    }
  omp_set_num_threads(threads);
}

TEST_CASE("problem kernels: an invalid content fails the parallel build with its error", "[physics][problem]") {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(4);
  Structure s = random_pillars(8, true);
  // ε = 0 is refused by the normal-vector kernels (they use 1/ε): the error leaves the OpenMP loop as
  // the exception a serial build throws (not std::terminate).
  for (const int step : {3, 6}) std::get<Ellipse>(s.layers[0].steps[std::size_t(step)][0]).material =
                                    Material::constant_permittivity(0.0);
  ProblemSettings settings;
  settings.m1 = settings.m2 = 2;
  settings.backend = conv::Backend::cpu_fftw;
  const Incidence incidence{0.633, 10, 0};
  std::vector<std::string> warnings;
  CHECK_THROWS_WITH((DiscreteProblem<double>(s, {&incidence, 1}, settings, 1, warnings)),
                    Catch::Contains("ε ≠ 0"));
  omp_set_num_threads(threads);
}

TEST_CASE("problem convolution: the plan is physics::convolution_problem's, as the automatic backend choice times it",
          "[physics][problem]") {
  // app/solving.cpp times backends on convolution_problem(); it once mirrored the construction and drifted.
  std::uniform_int_distribution<int> harmonics(1, 4), incidences(1, 3), steps(1, 5);
  for (const bool crossed : {false, true})
    for (const Formulation formulation : {Formulation::normal_vector, Formulation::laurent}) {
      const Structure s = random_pillars(steps(test::rng()), crossed);
      ProblemSettings settings;
      settings.m1 = harmonics(test::rng());
      settings.m2 = crossed ? harmonics(test::rng()) : 0;
      settings.backend = conv::Backend::cpu_fftw;
      settings.formulation = formulation;
      std::vector<Incidence> angles;
      for (int k = incidences(test::rng()); k > 0; --k) angles.push_back({0.633, 10.0 * k, crossed ? 30.0 : 0.0});
      INFO((crossed ? "crossed" : "1D") << ", " << to_string(formulation) << ", M " << settings.m1 << " x "
                                        << settings.m2 << ", " << angles.size() << " incidence(s)");
      std::vector<std::string> warnings;
      const DiscreteProblem<double> problem(s, angles, settings, 1, warnings);
      const conv::Problem& planned = problem.convolution().problem();
      const conv::Problem expected = conv::resolve(convolution_problem(
          formulation, s.lattice, settings.m1, settings.m2, problem.discretisation().grid.slices(), angles.size()));
      CHECK(planned.n1 == expected.n1);
      CHECK(planned.n2 == expected.n2);
      CHECK(planned.l1 == expected.l1);
      CHECK(planned.l2 == expected.l2);
      CHECK(planned.slices == expected.slices);
      CHECK(planned.per_slice == expected.per_slice);
      CHECK(planned.kernels == expected.kernels);
      CHECK(planned.inputs == expected.inputs);
      CHECK(planned.outputs == expected.outputs);
      CHECK(planned.pattern == expected.pattern);
      CHECK(planned.input_size() == problem.discretisation().grid.slices() * 2 * angles.size() * 3 *
                                        std::size_t(2 * settings.m1 + 1) * std::size_t(2 * settings.m2 + 1));
    }
}
