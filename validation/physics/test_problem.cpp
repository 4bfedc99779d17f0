// The discrete problem's set-up (physics/problem.hpp): its kernels, built in parallel over the
// slices' contents (issue #15), equal each content's kernels built alone, slice by slice and to the
// bit, in both formulations; an invalid content's error leaves the parallel build as an exception; the
// planned convolution is physics::convolution_problem's. The far-field amplitudes (tabulated per
// distinct kz and computed in parallel over the orders, issue #15) against the direct sums over the
// slices of docs/formulation.md §8.1 in long double, and equal to the bit with 1 and 4 threads.
#include <omp.h>

#include <algorithm>
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
  // A table that does not reach the wavelength is refused where the kernels evaluate ε (inside the parallel build):
  // the error leaves the OpenMP loop as the exception a serial build throws (not std::terminate). (ε = 0, used
  // here before, is refused since session 36 where the material is made.)
  for (const int step : {3, 6}) std::get<Ellipse>(s.layers[0].steps[std::size_t(step)][0]).material =
                                    Material::tabulated("short", {1.0, 2.0}, {1.5, 1.5}, {0.0, 0.0});
  ProblemSettings settings;
  settings.m1 = settings.m2 = 2;
  settings.backend = conv::Backend::cpu_fftw;
  const Incidence incidence{0.633, 10, 0};
  std::vector<std::string> warnings;
  CHECK_THROWS_WITH((DiscreteProblem<double>(s, {&incidence, 1}, settings, 1, warnings)),
                    Catch::Contains("is outside its data range"));
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

TEST_CASE("problem far field: amplitudes equal the direct sums over the slices, whatever the thread count",
          "[physics][problem]") {
  using LongComplex = std::complex<long double>;
  const int threads = omp_get_max_threads();
  for (const bool crossed : {false, true})
    for (const Formulation formulation : {Formulation::normal_vector, Formulation::laurent}) {
      INFO((crossed ? "crossed" : "1D") << ", " << to_string(formulation));
      // Two layers of different slice thickness (runs of equal Δ_p, and a change); φ = 0 and θ = 0
      // give orders of equal kz, which share their tables.
      Structure s = random_pillars(9, crossed);
      s.layers[0].slices = 54;
      Layer second = s.layers[0];
      second.thickness = 0.17;
      second.slices = 9;
      s.layers.push_back(second);
      const std::vector<Incidence> angles = {{0.633, 0, 0}, {0.633, 35, 0}, {0.633, 50, crossed ? 20.0 : 0.0}};
      ProblemSettings settings;
      settings.m1 = crossed ? 4 : 40;
      settings.m2 = crossed ? 4 : 0;
      settings.backend = conv::Backend::cpu_fftw;
      settings.formulation = formulation;
      std::vector<std::string> warnings;
      DiscreteProblem<double> problem(s, angles, settings, 1, warnings);
      const std::vector<std::complex<double>> x = test::random_complex<double>(problem.layout().size());
      const auto space = problem.make_space(1);
      space->upload(x, 0);
      omp_set_num_threads(1);
      const std::vector<FarField> one = problem.far_field(*space, 0);
      omp_set_num_threads(4);  // several threads even on a one-core runner
      const std::vector<FarField> far = problem.far_field(*space, 0);
      omp_set_num_threads(threads);
      REQUIRE(far.size() == 2 * angles.size());
      for (std::size_t r = 0; r < far.size(); ++r)
        for (const auto member : {&FarField::up_s, &FarField::up_p, &FarField::down_s, &FarField::down_p})
          CHECK(std::memcmp((one[r].*member).data(), (far[r].*member).data(),
                            (far[r].*member).size() * sizeof(Complex)) == 0);

      // The reference: the source from an independent plan (the direct backend), then per rhs and order
      //   down_s = t_s (a_s + i/(2kz) Σ_p w_p e^{ikz z_p} ê·s_p),  down_p = t_p (a_p + i/(2kz) Σ_p w_p e^{ikz z_p} p̂−·s_p),
      //   up_s = a_s r_s + i/(2kz) Σ_p w_p (e^{−ikz z_p} + r_s e^{ikz z_p}) ê·s_p,
      //   up_p = a_p r_p + i/(2kz) Σ_p w_p (e^{−ikz z_p} p̂+·s_p + r_p e^{ikz z_p} p̂−·s_p)  (propagating orders; else 0),
      // s = k1² c, w_p = (e^{ikzΔ/2} − e^{−ikzΔ/2})/(i kz), p̂± = (±kz t̂ − kρ ẑ)/k1, a = 1 for order 0 of its polarisation.
      const conv::Problem& plan = problem.convolution().problem();
      const auto direct = conv::make_convolution<double>(conv::Backend::cpu_direct, plan, problem.kernels());
      std::vector<std::complex<double>> c(plan.output_size());
      direct->execute(x.data(), c.data());
      long double c_max = 0;  // the source's scale: the backends' rounding is relative to it
      for (const auto& v : c) c_max = std::max(c_max, (long double)std::abs(v));
      const ZGrid& grid = problem.discretisation().grid;
      const std::size_t nz = std::size_t(grid.slices()), nr = far.size(), nm = problem.layout().block / 3;
      const std::size_t sc = c.size() / (nz * nr * nm);
      const LongComplex i(0, 1);
      for (std::size_t r = 0; r < nr; ++r) {
        const FloquetOrders& f = problem.orders()[r / 2];
        const long double k1 = f.k1;
        for (std::size_t m = 0; m < nm; ++m) {
          const Order& o = f.orders[m];
          const LongComplex kz(o.kz1), pref = i / (2.0L * kz);
          const long double ex = -o.ty, ey = o.tx;
          const bool up = o.propagates_up();
          LongComplex de = 0, dp = 0, ue = 0, upp = 0;
          long double size = 0;  // Σ_p |w_p| (|e^{ikz z_p}| + |e^{−ikz z_p}|): the sums' scale per unit source
          for (std::size_t p = 0; p < nz; ++p) {
            const long double d = grid.thickness[p], z = grid.z[p];
            const LongComplex w = (std::exp(i * kz * d / 2.0L) - std::exp(-i * kz * d / 2.0L)) / (i * kz);
            const auto source = [&](std::size_t comp) {
              return (long double)(f.k1 * f.k1) * LongComplex(c[(p * nr + r) * sc * nm + comp * nm + m]);
            };
            const LongComplex sx = source(0), sy = source(1), sz = source(2);
            const LongComplex se = ex * sx + ey * sy, st = (long double)o.tx * sx + (long double)o.ty * sy;
            const LongComplex plus = (kz * st - (long double)o.krho * sz) / k1;
            const LongComplex minus = (-kz * st - (long double)o.krho * sz) / k1;
            const LongComplex deep = std::exp(i * kz * z);
            de += w * deep * se;
            dp += w * deep * minus;
            size += std::abs(w) * std::abs(deep);
            if (up) {
              const LongComplex back = std::exp(-i * kz * z);
              ue += w * (back + LongComplex(o.rs) * deep) * se;
              upp += w * (back * plus + LongComplex(o.rp) * deep * minus);
              size += std::abs(w) * std::abs(back);
            }
          }
          const bool zeroth = m == f.zeroth();
          const long double as = zeroth && r % 2 == 0 ? 1 : 0, ap = zeroth && r % 2 == 1 ? 1 : 0;
          const LongComplex ref_down_s = LongComplex(o.ts) * (as + pref * de);
          const LongComplex ref_down_p = LongComplex(o.tp) * (ap + pref * dp);
          const LongComplex ref_up_s = up ? as * LongComplex(o.rs) + pref * ue : 0;
          const LongComplex ref_up_p = up ? ap * LongComplex(o.rp) + pref * upp : 0;
          // Rounding: the sources' (direct vs FFT) ~1e-15 of c_max, times the sums' scale; 1e-12 leaves room.
          const long double scale = 1 + std::abs(pref) * (long double)(f.k1 * f.k1) * c_max * size *
                                            (3 + std::abs(kz) / k1 + (long double)o.krho / k1);
          const long double tol = 1e-12L * scale * std::max<long double>({1, std::abs(LongComplex(o.ts)),
                                                                          std::abs(LongComplex(o.tp))});
          INFO("rhs " << r << ", order " << m << ", kz " << o.kz1 << ", tolerance " << double(tol));
          CHECK(std::abs(LongComplex(far[r].down_s[m]) - ref_down_s) <= tol);
          CHECK(std::abs(LongComplex(far[r].down_p[m]) - ref_down_p) <= tol);
          CHECK(std::abs(LongComplex(far[r].up_s[m]) - ref_up_s) <= tol);
          CHECK(std::abs(LongComplex(far[r].up_p[m]) - ref_up_p) <= tol);
        }
      }
    }
}
