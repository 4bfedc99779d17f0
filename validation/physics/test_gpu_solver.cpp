// The device path of the solver: the device vector space and z-operator equal their host versions on
// random data (3 and 5 source components); a problem's stream is one a finished problem left, never one in use;
// whole solves on every GPU backend equal the CPU solve (cpu-fftw, or cpu-direct where cpu-fftw does not serve
// the formulation; same precision), in both formulations, on a 1D grating and a crossed grating at oblique and conical incidence: efficiencies to 1e-5 (complex64)
// / 1e-10 (complex128) of the largest efficiency, Jones amplitudes to the same fraction of the largest
// |Jones|; a result is bit for bit the same in any batch; GPU GMRES and BiCGStab equal the dense LU
// reference; the device-resident GMRES equals the host-driven one and the dense solve on one device operator
// (several restarts, a rhs leaving early, b = 0, the iteration cap inside a cycle); GMRES with its Arnoldi steps
// replayed as CUDA graphs equals it bit for bit; the device-resident BiCGStab equals the host-driven one and the dense
// solve (b = 0, a rhs claiming early, the iteration cap), and with its iteration replayed as a CUDA graph or one step
// ahead it equals itself bit for bit; a problem larger than the device is refused with the memory it needs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "physics/device.hpp"
#include "physics/problem.hpp"
#include "validation/physics/device_z_operator_check.hpp"
#include "validation/physics/vector_space_checks.hpp"
#include "physics/solver.hpp"
#include "validation/physics/batch_independence.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

namespace {

constexpr conv::Backend gpu_backends[] = {conv::Backend::gpu_cufft, conv::Backend::gpu_fused, conv::Backend::gpu_direct};
/// Those and gpu-cufft-callbacks (the cuFFT baseline with callbacks), in the solves against the CPU.
constexpr conv::Backend solve_backends[] = {conv::Backend::gpu_cufft, conv::Backend::gpu_cufft_callbacks,
                                            conv::Backend::gpu_fused, conv::Backend::gpu_direct};

/// Largest |difference| of efficiencies over the largest efficiency, and of Jones amplitudes over
/// the largest |Jones| (reflection and transmission), over every order of every incidence.
struct Difference {
  double efficiency = 0, jones = 0;
};
Difference relative_difference(const SolveResult& a, const SolveResult& ref) {
  REQUIRE(a.incidences.size() == ref.incidences.size());
  double de = 0, emax = 0, dj = 0, jmax = 0;
  const auto jones = [&](const Jones& x, const Jones& y) {
    for (auto [u, v] : {std::pair{x.s_from_s, y.s_from_s}, {x.s_from_p, y.s_from_p}, {x.p_from_s, y.p_from_s},
                        {x.p_from_p, y.p_from_p}}) {
      dj = std::max(dj, std::abs(u - v));
      jmax = std::max(jmax, std::abs(v));
    }
  };
  for (std::size_t i = 0; i < ref.incidences.size(); ++i) {
    const IncidenceResult &x = a.incidences[i], &y = ref.incidences[i];
    REQUIRE(x.orders.size() == y.orders.size());
    for (std::size_t k = 0; k < y.orders.size(); ++k) {
      const DiffractionOrder &u = x.orders[k], &v = y.orders[k];
      REQUIRE((u.m1 == v.m1 && u.m2 == v.m2));
      for (int pol : {s_pol, p_pol}) {
        if (!std::isfinite(u.R[pol]) || !std::isfinite(u.T[pol])) return {INFINITY, INFINITY};
        de = std::max({de, std::abs(u.R[pol] - v.R[pol]), std::abs(u.T[pol] - v.T[pol])});
        emax = std::max({emax, v.R[pol], v.T[pol]});
      }
      jones(u.reflection, v.reflection);
      jones(u.transmission, v.transmission);
    }
  }
  REQUIRE(emax > 0);
  REQUIRE(jmax > 0);
  return {de / emax, dj / jmax};
}

/// The lamellar reference with its ridge a trapezoid line of 82° walls.
Structure sloped_lamellar() {
  Structure s = test::lamellar(12);
  const Rectangle ridge = std::get<Rectangle>(s.layers[0].shapes[0]);
  TrapezoidLine line;
  line.center_x = ridge.center.x;
  line.bottom_width = ridge.width_x;
  line.sidewall_angle_deg = 82;
  line.material = ridge.material;
  s.layers[0].shapes = {line};
  return s;
}

/// A tapered, rotated ellipse alone in its layer over a film: 2D sloped walls, the tilted normal field
/// (the 12-kernel pattern, D with three components).
Structure tapered_ellipse() {
  Structure s = test::crossed(6);
  TaperedEllipse e;
  e.center = {0.1, 0.0};
  e.bottom_semi_axis_x = 0.35;
  e.bottom_semi_axis_y = 0.25;
  e.top_semi_axis_x = 0.28;
  e.top_semi_axis_y = 0.22;
  e.rotation_deg = 20;
  e.material = Material::constant_index(2.0);
  s.layers[0].shapes = {e};
  return s;
}

struct GratingCase {
  const char* name;
  Structure structure;
  int m1, m2;
  std::vector<Incidence> incidences;
};

std::vector<GratingCase> grating_cases() {
  return {
      {"1D lamellar, oblique and conical", test::lamellar(12), 8, 0, {{1.0, 10, 0}, {1.0, 35, 20}}},
      {"1D sloped walls (the tilted normal field), oblique and conical", sloped_lamellar(), 8, 0,
       {{1.0, 10, 0}, {1.0, 35, 20}}},
      {"crossed, oblique and conical", test::crossed(8), 3, 3, {{0.93, 25, 35}, {0.93, 40, 0}}},
      {"2D sloped walls (the tilted normal field), conical", tapered_ellipse(), 3, 3, {{0.93, 25, 35}}},
  };
}

template <class Real>
void check_backends_equal_cpu() {
  constexpr bool single = std::is_same_v<Real, float>;
  const double agreement = single ? 1e-5 : 1e-10;
  for (Formulation formulation : test::formulations)
  for (const GratingCase& c : grating_cases()) {
    SolverOptions o;
    o.m1 = c.m1;
    o.m2 = c.m2;
    o.formulation = formulation;
    o.precision = precision_of<Real>();
    o.tolerance = single ? 1e-6 : 1e-12;
    o.on_unconverged = OnUnconverged::mark;  // checked below, for the CPU reference too
    o.backend = test::serves(conv::Backend::cpu_fftw, o.precision, formulation, c.m2 == 0) ? conv::Backend::cpu_fftw
                                                                                           : conv::Backend::cpu_direct;
    const SolveResult cpu = solve(c.structure, c.incidences, o);
    for (const IncidenceResult& r : cpu.incidences)
      for (const auto& pair : r.solves)
        for (const SolveStats& st : pair) REQUIRE(st.converged);
    for (conv::Backend backend : solve_backends) {
      INFO(to_string(formulation) << ", " << c.name << ", " << conv::to_string(backend) << ", "
                                  << to_string(o.precision));
      o.backend = backend;
      SolveResult gpu;
      const auto start = std::chrono::steady_clock::now();
      try {
        gpu = solve(c.structure, c.incidences, o);
      } catch (const Unsupported& e) {
        WARN(std::string(conv::to_string(backend)) + " declines " + c.name + ": " + e.what());
        continue;
      }
      // Progress on stdout (flushed): which solve a slow or stuck run was in.
      std::printf("  %s, %s, %s: %.3f s\n", c.name, std::string(conv::to_string(backend)).c_str(),
                  std::string(to_string(o.precision)).c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      std::fflush(stdout);
      for (const IncidenceResult& r : gpu.incidences)
        for (const auto& pair : r.solves)
          for (const SolveStats& st : pair) CHECK(st.converged);
      const Difference d = relative_difference(gpu, cpu);
      INFO("efficiency difference " << d.efficiency << ", Jones difference " << d.jones);
      CHECK(d.efficiency <= agreement);
      CHECK(d.jones <= agreement);
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("the device vector space equals the host one on random vectors", "[physics][gpu]", float, double) {
  using Complex = std::complex<TestType>;
  const double tol = std::is_same_v<TestType, float> ? 1e-6 : 1e-13;
  for (const BatchLayout layout : {BatchLayout{7, 3, 33}, BatchLayout{130, 4, 2883}}) {
    DeviceStream stream;
    auto dev = make_device_vector_space<TestType>(layout, 3, stream.get());
    auto host = make_host_vector_space<TestType>(layout, 3);
    const auto a = test::random_complex<TestType>(layout.size()), b = test::random_complex<TestType>(layout.size());
    for (auto* s : {dev.get(), host.get()}) {
      s->upload(a, 0);
      s->upload(b, 1);
    }
    std::vector<std::complex<double>> coef(layout.rhs);
    for (std::size_t r = 0; r < layout.rhs; ++r) coef[r] = {0.3 + 0.1 * double(r), -0.7 + 0.05 * double(r)};
    coef[1] = 0;  // a zero coefficient leaves that rhs alone in axpy
    std::vector<std::complex<double>> dot_dev(layout.rhs), dot_host(layout.rhs);
    std::vector<double> norm_dev(layout.rhs), norm_host(layout.rhs);
    dev->dot(0, 1, dot_dev);
    host->dot(0, 1, dot_host);
    dev->norm(0, norm_dev);
    host->norm(0, norm_host);
    for (std::size_t r = 0; r < layout.rhs; ++r) {
      REQUIRE(norm_host[r] > 0);
      CHECK(std::abs(dot_dev[r] - dot_host[r]) <= 1e-12 * norm_host[r] * norm_host[r] * 4);
      CHECK(std::abs(norm_dev[r] - norm_host[r]) <= 1e-12 * norm_host[r]);
    }
    for (auto* s : {dev.get(), host.get()}) {
      s->axpy(coef, 0, 1);
      s->scale(coef, 0);
      s->copy(1, 2);
      s->axpy(coef, 0, 2);
    }
    // linear_update (the device takes the default: scale, two axpys, norm): y = 2 ← coef·y + a·x0 + b·x1, and ‖y‖.
    std::vector<std::complex<double>> second(layout.rhs), third(layout.rhs);
    for (std::size_t r = 0; r < layout.rhs; ++r) {
      second[r] = {-0.2 + 0.03 * double(r), 0.4};
      third[r] = {0.9, 0.1 * double(r)};
    }
    std::vector<double> update_dev(layout.rhs, std::nan("")), update_host(layout.rhs, std::nan(""));
    dev->linear_update(coef, 2, second, 0, third, 1, update_dev);
    host->linear_update(coef, 2, second, 0, third, 1, update_host);
    for (std::size_t r = 0; r < layout.rhs; ++r) CHECK(std::abs(update_dev[r] - update_host[r]) <= tol * update_host[r]);
    for (int i = 0; i < 3; ++i) {
      std::vector<Complex> out_dev(layout.size(), test::poison<TestType>()), out_host(layout.size());
      dev->download(i, out_dev);
      host->download(i, out_host);
      INFO("vector " << i << ", " << layout.slices << " slices");
      CHECK(test::relative_l2<TestType, TestType>(out_dev, out_host) <= tol);
    }
  }
}

TEMPLATE_TEST_CASE("device vector space: upload_strided sets one element in `stride` over zeros, copy copies it",
                   "[physics][gpu]", float, double) {
  for (const BatchLayout layout : {BatchLayout{7, 3, 33}, BatchLayout{130, 4, 2883}}) {
    DeviceStream stream;
    auto dev = make_device_vector_space<TestType>(layout, 3, stream.get());
    test::check_upload_strided<TestType>(*dev);
  }
}

TEMPLATE_TEST_CASE("the device basis pass (dots, combine) equals the host one, also in launches split by rhs",
                   "[physics][gpu]", float, double) {
  using Complex = std::complex<TestType>;
  const double tol = std::is_same_v<TestType, float> ? 1e-6 : 1e-13;
  // 2 rhs: basis vectors in launches of 64; 130 rhs: rhs groups of 128 and 2, one vector per launch.
  for (const BatchLayout layout : {BatchLayout{9, 2, 75}, BatchLayout{3, 130, 21}}) {
    const int basis = 70, count = basis + 1, y = basis;
    DeviceStream stream;
    auto dev = make_device_vector_space<TestType>(layout, count, stream.get());
    auto host = make_host_vector_space<TestType>(layout, count);
    for (int i = 0; i < count; ++i) {
      const auto v = test::random_complex<TestType>(layout.size());
      dev->upload(v, i);
      host->upload(v, i);
    }
    const std::size_t n = std::size_t(basis) * layout.rhs;
    std::vector<std::complex<double>> d_dev(n, test::poison<double>()), d_host(n), a(n);
    dev->dots(0, basis, y, d_dev);
    host->dots(0, basis, y, d_host);
    double worst = 0;
    for (std::size_t k = 0; k < n; ++k) worst = std::max(worst, std::abs(d_dev[k] - d_host[k]));
    INFO(layout.rhs << " rhs");
    CHECK(worst <= 1e-12 * double(layout.slices * layout.block) * 4);
    for (std::size_t k = 0; k < n; ++k) a[k] = -d_host[k] / double(layout.slices * layout.block);
    for (std::size_t k = 0; k < layout.rhs; ++k) a[k] = 0;  // an all-zero first vector: skipped or not, no change
    dev->combine(a, 0, basis, y);
    host->combine(a, 0, basis, y);
    std::vector<Complex> out_dev(layout.size(), test::poison<TestType>()), out_host(layout.size());
    dev->download(y, out_dev);
    host->download(y, out_host);
    CHECK(test::relative_l2<TestType, TestType>(out_dev, out_host) <= tol);
  }
}

TEST_CASE("a problem's stream is the one a finished problem left, and a stream in use is nobody else's", "[physics][gpu]") {
  Stream first = nullptr;
  {
    const DeviceStream a;
    first = a.get();
    REQUIRE(first != nullptr);
  }
  const DeviceStream b;
  CHECK(b.get() == first);  // the newest idle stream of the device
  const DeviceStream c;
  CHECK(c.get() != nullptr);
  CHECK(c.get() != b.get());
}

TEMPLATE_TEST_CASE("the device z-operator equals the host one on random fields", "[physics][gpu]", float, double) {
  std::vector<std::string> warnings;
  ProblemSettings settings;
  settings.m1 = 3;
  settings.m2 = 2;
  const std::vector<Incidence> inc{{0.93, 25, 35}, {0.93, 60, 10}};  // one strongly evanescent set of orders
  // Slice counts nz around the device sweeps' chunking (device_z_operator.cu: chunks of max(2, ⌈nz/8⌉)
  // slices, one per warp): crossed(n) has n + max(1, n/2) slices, so nz = 2 (one chunk), 3 (a last chunk
  // of one slice), 4, 13 and 25 (7 chunks, the last of one slice), 60 (8 chunks).
  const int pattern_slices = GENERATE(1, 2, 3, 9, 17, 40);
  const DiscreteProblem<double> problem(test::crossed(pattern_slices), inc, settings, 1, warnings);
  const GreenCoefficients g = green_coefficients(problem.discretisation().grid, problem.orders());
  INFO(g.slices << " slices");
  REQUIRE(g.slices == pattern_slices + std::max(1, pattern_slices / 2));
  test::check_device_z_operator<TestType>(g, {0, 0, 1, 1}, problem.layout(), {0b000, 0b001, 0b011, 0b101, 0b111});
}

TEST_CASE("GPU solves equal the CPU solve, complex128", "[physics][gpu]") { check_backends_equal_cpu<double>(); }
TEST_CASE("GPU solves equal the CPU solve, complex64", "[physics][gpu]") { check_backends_equal_cpu<float>(); }

TEST_CASE("Richardson's two device solves, side by side, equal the CPU's in turn and repeat bit for bit",
          "[physics][gpu]") {
  // solve() runs the 2N-slice solve on a second thread beside the N-slice one on device backends
  // (overlap_richardson, solver.cpp): the extrapolated result must be the CPU's (which solves them in turn)
  // to the solvers' tolerance, the same bits on a second run, with both slice counts recorded and the
  // phases within the wall time.
  for (const GratingCase& c : grating_cases()) {
    SolverOptions o;
    o.m1 = c.m1;
    o.m2 = c.m2;
    o.richardson = true;
    o.tolerance = 1e-12;
    o.backend = test::serves(conv::Backend::cpu_fftw, o.precision, o.formulation, c.m2 == 0) ? conv::Backend::cpu_fftw
                                                                                             : conv::Backend::cpu_direct;
    const SolveResult cpu = solve(c.structure, c.incidences, o);
    for (conv::Backend backend : gpu_backends) {
      INFO(c.name << ", " << conv::to_string(backend));
      o.backend = backend;
      const auto start = std::chrono::steady_clock::now();
      SolveResult first;
      try {
        first = solve(c.structure, c.incidences, o);
      } catch (const Unsupported& e) {
        WARN(std::string(conv::to_string(backend)) + " declines " + c.name + ": " + e.what());
        continue;
      }
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const SolveResult second = solve(c.structure, c.incidences, o);
      const Difference d = relative_difference(first, cpu), repeat = relative_difference(second, first);
      INFO("against the CPU: efficiencies " << d.efficiency << ", Jones " << d.jones);
      CHECK(d.efficiency <= 1e-10);
      CHECK(d.jones <= 1e-10);
      CHECK(repeat.efficiency == 0);
      CHECK(repeat.jones == 0);
      for (const IncidenceResult& r : first.incidences) {
        REQUIRE(r.slice_counts.size() == 2);
        CHECK(r.slice_counts[1] == 2 * r.slice_counts[0]);
        for (const auto& pair : r.solves)
          for (const SolveStats& st : pair) CHECK(st.converged);
      }
      CHECK(first.phases.total() > 0);
      CHECK(first.phases.total() <= wall);
    }
  }
}

TEST_CASE("a GPU result does not depend on the batch it was solved in, bit for bit", "[physics][gpu]") {
  test::check_batch_independence_of(gpu_backends);
}

TEST_CASE("GPU GMRES and BiCGStab equal the dense LU reference to the solver tolerance", "[physics][gpu]") {
  const GratingCase c{"crossed", test::crossed(4), 1, 1, {{0.93, 25, 35}, {0.93, 0, 0}}};
  for (Formulation formulation : test::formulations) {
  INFO(to_string(formulation));
  if (!test::serves(conv::Backend::gpu_fused, Precision::double_, formulation)) {
    WARN("gpu-fused does not serve the " + std::string(to_string(formulation)) + " formulation yet: skipped");
    continue;
  }
  SolverOptions o;
  o.formulation = formulation;
  o.m1 = c.m1;
  o.m2 = c.m2;
  o.method = Method::dense_lu;
  o.backend = conv::Backend::cpu_direct;
  const SolveResult dense = solve(c.structure, c.incidences, o);
  o.backend = conv::Backend::gpu_fused;
  const SolveResult gpu_dense = solve(c.structure, c.incidences, o);  // assembled from device products
  CHECK(relative_difference(gpu_dense, dense).efficiency <= 1e-12);
  for (Method method : {Method::gmres, Method::bicgstab}) {
    INFO((method == Method::gmres ? "GMRES(10)" : "BiCGStab"));
    o.method = method;
    o.gmres_restart = 10;  // forces restarts
    o.tolerance = 1e-10;
    const SolveResult it = solve(c.structure, c.incidences, o);
    for (const IncidenceResult& r : it.incidences)
      for (const auto& pair : r.solves)
        for (const SolveStats& st : pair) {
          CHECK(st.converged);
          CHECK(st.residual <= 1e-10);
          CHECK(st.iterations > 0);
        }
    const Difference d = relative_difference(it, dense);
    CHECK(d.efficiency <= 1e-8);
    CHECK(d.jones <= 1e-8);
  }
  }
}

TEST_CASE("a device problem larger than the device's memory is refused, saying how much it needs", "[physics][gpu]") {
  SolverOptions o;
  o.m1 = 60;
  o.m2 = 60;
  o.backend = conv::Backend::gpu_fused;
  Structure s = test::crossed(1000);
  std::vector<Incidence> inc;
  for (int i = 0; i < 16; ++i) inc.push_back({0.93, 2.0 * i, 0});
  try {
    (void)solve(s, inc, o);
    FAIL("expected the memory check to refuse the problem");
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("needs about") != std::string::npos);
    CHECK(what.find("of device memory") != std::string::npos);
  }
}

namespace {

/// A device problem (on the first of `backends` that serves it) as the operator of the GMRES comparisons: a crossed
/// grating (6 pattern slices and the film's 3), 25 orders, 3 incidences = 6 rhs: 675 unknowns per rhs, small
/// enough for the dense reference.
template <class Real>
std::unique_ptr<DiscreteProblem<Real>> small_device_problem(std::span<const conv::Backend> backends = gpu_backends) {
  ProblemSettings settings;
  settings.m1 = settings.m2 = 2;
  const std::vector<Incidence> inc{{0.93, 25, 35}, {0.93, 40, 0}, {0.93, 10, 70}};
  std::vector<std::string> warnings;
  for (conv::Backend backend : backends) {
    settings.backend = backend;
    try {
      auto p = std::make_unique<DiscreteProblem<Real>>(test::crossed(6), inc, settings, 1, warnings);
      if (p->memory() == Memory::device) return p;
    } catch (const Unsupported&) {
    }
  }
  return nullptr;
}

/// Rhs r's values of a batched vector (element (p, r, j) at (p·rhs + r)·block + j).
template <class Real>
std::vector<std::complex<Real>> rhs_part(std::span<const std::complex<Real>> v, const BatchLayout& l, std::size_t r) {
  std::vector<std::complex<Real>> out;
  for (std::size_t p = 0; p < l.slices; ++p)
    for (std::size_t j = 0; j < l.block; ++j) out.push_back(v[(p * l.rhs + r) * l.block + j]);
  return out;
}

/// ‖b_r − A x_r‖/‖b_r‖ per rhs, the product on the device, the rest on the host in complex128 (independent
/// of the solver's own residual).
template <class Real>
std::vector<double> residuals(DiscreteProblem<Real>& problem, std::span<const std::complex<Real>> b,
                              std::span<const std::complex<Real>> x) {
  const BatchLayout& l = problem.layout();
  auto space = problem.make_space(2);
  std::vector<std::complex<Real>> ax(l.size(), test::poison<Real>());
  space->upload(x, 0);
  problem.apply(space->data(0), space->data(1));
  space->download(1, ax);
  std::vector<double> out(l.rhs);
  for (std::size_t r = 0; r < l.rhs; ++r) {
    const auto br = rhs_part<Real>(b, l, r), axr = rhs_part<Real>(ax, l, r);
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < br.size(); ++i) {
      diff += std::norm(std::complex<double>(br[i]) - std::complex<double>(axr[i]));
      norm += std::norm(std::complex<double>(br[i]));
    }
    out[r] = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  }
  return out;
}

/// A system on which the rhs of a batch take different paths: fresh random right-hand sides but b = 0 for rhs 1 (its x
/// must come back 0 from a random guess); random initial guesses but 0 for rhs 0 and, for rhs 2, the dense solution
/// with a relative perturbation of 1e-3 (rhs 2 stops early while the others go on: masking).
template <class Real>
struct MaskedSystem {
  std::vector<std::complex<Real>> b, x_dense, x0;
};
template <class Real>
MaskedSystem<Real> masked_system(DiscreteProblem<Real>& problem) {
  using Complex = std::complex<Real>;
  const BatchLayout l = problem.layout();
  MaskedSystem<Real> m;
  m.b = test::random_complex<Real>(l.size());
  for (std::size_t p = 0; p < l.slices; ++p)
    for (std::size_t j = 0; j < l.block; ++j) m.b[(p * l.rhs + 1) * l.block + j] = 0;
  m.x_dense.resize(l.size());
  (void)solve_dense<Real>(problem, m.b, m.x_dense);
  m.x0 = test::random_complex<Real>(l.size());
  const auto noise = test::random_complex<Real>(l.size());
  const double scale = test::l2_norm<Real>(m.x_dense) / std::sqrt(double(l.size()));
  for (std::size_t p = 0; p < l.slices; ++p)
    for (std::size_t j = 0; j < l.block; ++j) {
      const std::size_t i0 = (p * l.rhs + 0) * l.block + j, i2 = (p * l.rhs + 2) * l.block + j;
      m.x0[i0] = 0;
      m.x0[i2] = m.x_dense[i2] + Complex(Real(1e-3 * scale)) * noise[i2];
    }
  return m;
}

}  // namespace

TEMPLATE_TEST_CASE("device-resident GMRES equals the host-driven GMRES and the dense solve on one device operator",
                   "[physics][gpu]", float, double) {
  using Real = TestType;
  using Complex = std::complex<Real>;
  constexpr bool single = std::is_same_v<Real, float>;
  auto problem = small_device_problem<Real>();
  if (!problem) {
    WARN("no GPU backend serves the crossed test problem: skipped");
    return;
  }
  const BatchLayout l = problem->layout();
  REQUIRE(l.rhs == 6);
  // rhs 1 has b = 0, rhs 2 leaves its cycle early (masked_system).
  const MaskedSystem<Real> system = masked_system<Real>(*problem);
  const std::vector<Complex>& b = system.b;
  const std::vector<Complex>& x_dense = system.x_dense;
  const std::vector<Complex>& x0 = system.x0;

  KrylovSettings ks;
  ks.method = Method::gmres;
  ks.restart = 5;  // far fewer than the iterations needed: several restarts
  ks.tolerance = single ? 1e-5 : 1e-11;
  ks.max_iterations = 3000;
  const auto run = [&](bool device_scalars, const KrylovSettings& settings) {
    KrylovSettings s = settings;
    s.device_scalars = device_scalars;
    std::vector<Complex> x = x0;
    const std::vector<SolveStats> stats = solve<Real>(*problem, b, x, s);
    return std::pair{stats, x};
  };

  SECTION("to the tolerance") {
    const auto [dev_stats, x_dev] = run(true, ks);
    const auto [host_stats, x_host] = run(false, ks);
    const std::vector<double> true_dev = residuals<Real>(*problem, b, x_dev);
    const double rounding = single ? 1e-6 : 1e-14;  // of the independent residual's own product
    int others_min = ks.max_iterations;
    for (std::size_t r = 0; r < l.rhs; ++r) {
      INFO("rhs " << r << ": device " << dev_stats[r].iterations << " iterations, residual " << dev_stats[r].residual
                  << "; host " << host_stats[r].iterations << ", " << host_stats[r].residual);
      CHECK(dev_stats[r].converged);
      CHECK(host_stats[r].converged);
      CHECK(dev_stats[r].residual <= ks.tolerance);
      CHECK(true_dev[r] <= ks.tolerance + rounding);
      CHECK(std::abs(true_dev[r] - dev_stats[r].residual) <= rounding + 1e-3 * ks.tolerance);
      // The same iteration to rounding: the same counts, but for the step at which the estimate crosses the
      // tolerance (rounding may move it by a step, and a step more may cost one more restart's product).
      const int apart = std::abs(dev_stats[r].iterations - host_stats[r].iterations);
      CHECK(apart <= (single ? 2 : 1));
      CHECK(std::abs(dev_stats[r].matvecs - host_stats[r].matvecs) <= apart + (apart > 0 ? 1 : 0));
      const auto xd = rhs_part<Real>(x_dev, l, r), xh = rhs_part<Real>(x_host, l, r), xr = rhs_part<Real>(x_dense, l, r);
      if (r == 1) {
        CHECK(dev_stats[r].iterations == 0);
        CHECK(test::l2_norm<Real>(xd) == 0);
        continue;
      }
      CHECK(dev_stats[r].iterations > 0);
      if (r != 2) others_min = std::min(others_min, dev_stats[r].iterations);
      // Both solutions are within the tolerance times the conditioning of the dense one and of each other.
      CHECK(test::relative_l2<Real, Real>(xd, xr) <= 1e3 * ks.tolerance);
      CHECK(test::relative_l2<Real, Real>(xd, xh) <= 1e3 * ks.tolerance);
    }
    INFO("rhs 2 (started near the solution): " << dev_stats[2].iterations << " iterations, the others at least "
                                                << others_min);
    CHECK(dev_stats[2].iterations < others_min);
    CHECK(others_min > 2 * ks.restart);  // the comparison went through restarts
  }

  SECTION("stopped by max_iterations inside a cycle") {
    KrylovSettings capped = ks;
    capped.restart = 4;
    capped.max_iterations = 9;  // cycles of 4, 4, 1 steps
    capped.tolerance = 1e-300;  // unreachable
    const auto [dev_stats, x_dev] = run(true, capped);
    const auto [host_stats, x_host] = run(false, capped);
    for (std::size_t r = 0; r < l.rhs; ++r) {
      INFO("rhs " << r);
      if (r == 1) {
        CHECK(dev_stats[r].converged);
        CHECK(dev_stats[r].iterations == 0);
        continue;
      }
      CHECK_FALSE(dev_stats[r].converged);
      CHECK(dev_stats[r].iterations == 9);
      // 9 steps, 4 true residuals (start and after each cycle); rhs 0's guess is zero, its start takes no product
      // (krylov.cpp's zero start).
      CHECK(dev_stats[r].matvecs == 9 + (r == 0 ? 3 : 4));
      CHECK(dev_stats[r].matvecs == host_stats[r].matvecs);
      CHECK(std::abs(dev_stats[r].residual - host_stats[r].residual) <= (single ? 1e-5 : 1e-12));
      // The same 9 steps: the same x to rounding.
      const auto xd = rhs_part<Real>(x_dev, l, r), xh = rhs_part<Real>(x_host, l, r);
      CHECK(test::relative_l2<Real, Real>(xd, xh) <= (single ? 1e-4 : 1e-11));
    }
  }
}

namespace {

/// A device problem on a backend whose products can be captured in a CUDA graph (gpu-fused, else gpu-direct;
/// convolution.hpp, capturable), the problem of small_device_problem; null where neither serves it.
template <class Real>
std::unique_ptr<DiscreteProblem<Real>> small_capturable_problem() {
  constexpr conv::Backend capturable[] = {conv::Backend::gpu_fused, conv::Backend::gpu_direct};
  return small_device_problem<Real>(capturable);
}

/// A problem seen through its products: counts the calls of apply() (with graphs, a replayed step calls none)
/// and says it is capturable only when `capturable` (false: the solver must not use graphs).
template <class Real>
class CountingOperator final : public LinearOperator<Real> {
 public:
  using Complex = std::complex<Real>;
  CountingOperator(DiscreteProblem<Real>& problem, bool capturable) : problem_(problem), capturable_(capturable) {}
  [[nodiscard]] const BatchLayout& layout() const override { return problem_.layout(); }
  [[nodiscard]] std::unique_ptr<VectorSpace<Real>> make_space(int count) const override {
    return problem_.make_space(count);
  }
  void apply(const Complex* x, Complex* y) override {
    ++products;
    problem_.apply(x, y);
  }
  [[nodiscard]] bool capturable() const override { return capturable_ && problem_.capturable(); }
  int products = 0;

 private:
  DiscreteProblem<Real>& problem_;
  bool capturable_;
};

/// Whether two vectors hold the same bits.
template <class Real>
bool same_bits(const std::vector<std::complex<Real>>& a, const std::vector<std::complex<Real>>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(std::complex<Real>)) == 0;
}

/// One solve through a CountingOperator (capturable as asked): its statistics, its x and the products it applied.
template <class Real>
struct CountedRun {
  std::vector<SolveStats> stats;
  std::vector<std::complex<Real>> x;
  int products = 0;
};
template <class Real>
CountedRun<Real> counted_solve(DiscreteProblem<Real>& problem, bool capturable, std::span<const std::complex<Real>> b,
                               const std::vector<std::complex<Real>>& x0, const KrylovSettings& settings) {
  CountingOperator<Real> op(problem, capturable);
  CountedRun<Real> out;
  out.x = x0;
  out.stats = solve<Real>(op, b, out.x, settings);
  out.products = op.products;
  return out;
}

/// `other` took the same steps as `plain`: the same statistics and the same bits of x (the same kernels in the
/// same order).
template <class Real>
void check_same_run(const CountedRun<Real>& plain, const CountedRun<Real>& other) {
  for (std::size_t r = 0; r < plain.stats.size(); ++r) {
    INFO("rhs " << r);
    CHECK(other.stats[r].iterations == plain.stats[r].iterations);
    CHECK(other.stats[r].matvecs == plain.stats[r].matvecs);
    CHECK(other.stats[r].converged == plain.stats[r].converged);
    CHECK(other.stats[r].residual == plain.stats[r].residual);
  }
  CHECK(same_bits<Real>(other.x, plain.x));
}

}  // namespace

TEMPLATE_TEST_CASE("GMRES with CUDA graphs equals GMRES without, bit for bit, on one device operator",
                   "[physics][gpu]", float, double) {
  using Real = TestType;
  using Complex = std::complex<Real>;
  constexpr bool single = std::is_same_v<Real, float>;
  auto problem = small_capturable_problem<Real>();
  if (!problem) {
    WARN("neither gpu-fused nor gpu-direct serves the crossed test problem: skipped");
    return;
  }
  REQUIRE(problem->capturable());
  const BatchLayout l = problem->layout();
  REQUIRE(l.rhs == 6);
  // Fresh random right-hand sides and guesses; rhs 1 has b = 0, rhs 2 starts at a scaled copy of its b, the
  // others at random (different iteration counts per rhs: masking inside the cycles).
  std::vector<Complex> b = test::random_complex<Real>(l.size());
  std::vector<Complex> x0 = test::random_complex<Real>(l.size());
  for (std::size_t p = 0; p < l.slices; ++p)
    for (std::size_t j = 0; j < l.block; ++j) {
      b[(p * l.rhs + 1) * l.block + j] = 0;
      x0[(p * l.rhs + 2) * l.block + j] = Real(0.5) * b[(p * l.rhs + 2) * l.block + j];
    }
  using Run = CountedRun<Real>;
  const auto run = [&](bool graphs, bool capturable, KrylovSettings s) {
    s.cuda_graphs = graphs;
    return counted_solve<Real>(*problem, capturable, b, x0, s);
  };
  // The graph run and the run refused graphs (operator not capturable) against the plain run: the same bits.
  const auto check_same = [](const Run& plain, const Run& other) { check_same_run<Real>(plain, other); };

  KrylovSettings ks;
  ks.method = Method::gmres;
  ks.device_scalars = true;

  SECTION("to the tolerance, through restarts") {
    ks.restart = 5;
    ks.tolerance = single ? 1e-5 : 1e-11;
    ks.max_iterations = 3000;
    const Run plain = run(false, true, ks), graph = run(true, true, ks), refused = run(true, false, ks);
    check_same(plain, graph);
    check_same(plain, refused);
    int most_iterations = 0, residual_products = 0;
    for (std::size_t r = 0; r < l.rhs; ++r) {
      INFO("rhs " << r << ": " << graph.stats[r].iterations << " iterations, residual " << graph.stats[r].residual);
      CHECK(graph.stats[r].converged);
      most_iterations = std::max(most_iterations, graph.stats[r].iterations);
      // matvecs = iterations + the true residuals taken while the rhs was active: all of them for the last to finish.
      residual_products = std::max(residual_products, graph.stats[r].matvecs - graph.stats[r].iterations);
    }
    INFO("products: plain " << plain.products << ", graph " << graph.products << ", refused " << refused.products
                            << "; " << residual_products << " true residuals, " << most_iterations << " iterations");
    REQUIRE(most_iterations > 2 * ks.restart);  // several cycles: later ones replay
    // With graphs, apply() runs for the true residuals and once per step j of the first cycle (captured; the
    // first cycle runs all `restart` steps: no rhs converges in it); without, for every step enqueued.
    CHECK(graph.products == residual_products + ks.restart);
    CHECK(refused.products == plain.products);
    CHECK(plain.products >= residual_products + most_iterations);
  }

  SECTION("stopped by max_iterations inside a cycle") {
    ks.restart = 4;
    ks.max_iterations = 9;  // cycles of 4, 4, 1 steps
    ks.tolerance = 1e-300;  // unreachable
    const Run plain = run(false, true, ks), graph = run(true, true, ks), refused = run(true, false, ks);
    check_same(plain, graph);
    check_same(plain, refused);
    for (std::size_t r = 0; r < l.rhs; ++r) CHECK(graph.stats[r].iterations == (r == 1 ? 0 : 9));
    // Products without graphs: 4 true residuals, steps 4 + 4 + 2 (the last cycle enqueues step 1 before it
    // learns, at step 2, that step 0 spent every budget: one masked step). With graphs: the 4 residuals and
    // the 4 steps of the first cycle, captured; the last cycle replays steps 0 and 1.
    CHECK(plain.products == 14);
    CHECK(refused.products == 14);
    CHECK(graph.products == 8);
  }

  SECTION("one step ahead (steps_ahead = 1, the sweep's setting): the same bits, no masked step") {
    ks.restart = 4;
    ks.max_iterations = 9;  // cycles of 4, 4, 1 steps
    ks.tolerance = 1e-300;  // unreachable
    const Run two_ahead = run(false, true, ks);
    ks.steps_ahead = 1;
    const Run plain = run(false, true, ks), graph = run(true, true, ks);
    check_same(two_ahead, plain);
    check_same(two_ahead, graph);
    // 4 true residuals and steps 4 + 4 + 1: the last cycle learns after step 0 that every budget is spent.
    CHECK(plain.products == 13);
    CHECK(graph.products == 8);  // the residuals and the first cycle's captures, as with two ahead
  }
}

TEMPLATE_TEST_CASE("device-resident BiCGStab equals the host-driven BiCGStab and the dense solve on one device operator",
                   "[physics][gpu]", float, double) {
  using Real = TestType;
  using Complex = std::complex<Real>;
  constexpr bool single = std::is_same_v<Real, float>;
  auto problem = small_capturable_problem<Real>();
  if (!problem) {
    WARN("neither gpu-fused nor gpu-direct serves the crossed test problem: skipped");
    return;
  }
  const BatchLayout l = problem->layout();
  REQUIRE(l.rhs == 6);
  // rhs 1 has b = 0, rhs 2 claims early (masked_system).
  const MaskedSystem<Real> system = masked_system<Real>(*problem);
  const std::vector<Complex>& b = system.b;
  const std::vector<Complex>& x_dense = system.x_dense;
  const std::vector<Complex>& x0 = system.x0;
  using Run = CountedRun<Real>;
  const auto run = [&](bool device_scalars, bool graphs, KrylovSettings s) {
    s.device_scalars = device_scalars;
    s.cuda_graphs = graphs;
    return counted_solve<Real>(*problem, true, b, x0, s);
  };
  const auto check_same = [](const Run& plain, const Run& other) { check_same_run<Real>(plain, other); };

  KrylovSettings ks;
  ks.method = Method::bicgstab;
  ks.tolerance = single ? 1e-5 : 1e-11;
  ks.max_iterations = 3000;

  SECTION("to the tolerance; with CUDA graphs and one step ahead the same bits") {
    const Run device = run(true, false, ks), host = run(false, false, ks);
    const std::vector<double> true_dev = residuals<Real>(*problem, b, device.x);
    const double rounding = single ? 1e-6 : 1e-14;  // of the independent residual's own product
    int others_min = ks.max_iterations;
    for (std::size_t r = 0; r < l.rhs; ++r) {
      INFO("rhs " << r << ": device " << device.stats[r].iterations << " iterations, " << device.stats[r].matvecs
                  << " products, residual " << device.stats[r].residual << "; host " << host.stats[r].iterations
                  << ", " << host.stats[r].matvecs << ", " << host.stats[r].residual);
      CHECK(device.stats[r].converged);
      CHECK(host.stats[r].converged);
      CHECK(device.stats[r].residual <= ks.tolerance);
      CHECK(true_dev[r] <= ks.tolerance + rounding);
      CHECK(std::abs(true_dev[r] - device.stats[r].residual) <= rounding + 1e-3 * ks.tolerance);
      // The same iteration to rounding (the reductions add in another order): the same counts but for the
      // iteration at which a recursive residual crosses the tolerance, which rounding may move by a few (BiCGStab's
      // residual is not monotonic; measured on an H200: 2 in 70 in complex128, 5 in 47 in complex64 at seed
      // 2810782962, session 34).
      const int apart = std::abs(device.stats[r].iterations - host.stats[r].iterations);
      CHECK(apart <= std::max(3, host.stats[r].iterations / (single ? 4 : 10)));
      const auto xd = rhs_part<Real>(device.x, l, r), xh = rhs_part<Real>(host.x, l, r),
                 xr = rhs_part<Real>(x_dense, l, r);
      if (r == 1) {
        CHECK(device.stats[r].iterations == 0);
        CHECK(device.stats[r].matvecs == 1);  // the initial residual
        CHECK(test::l2_norm<Real>(xd) == 0);
        continue;
      }
      CHECK(device.stats[r].iterations > 0);
      // Two products per iteration (one for an iteration that ends at ‖s‖) and one per confirmation.
      CHECK(device.stats[r].matvecs >= 2 * device.stats[r].iterations);
      CHECK(device.stats[r].matvecs <= 2 * device.stats[r].iterations + 1 + device.stats[r].iterations / 2);
      if (r != 2) others_min = std::min(others_min, device.stats[r].iterations);
      CHECK(test::relative_l2<Real, Real>(xd, xr) <= 1e3 * ks.tolerance);
      CHECK(test::relative_l2<Real, Real>(xd, xh) <= 1e3 * ks.tolerance);
    }
    INFO("rhs 2 (started near the solution): " << device.stats[2].iterations << " iterations, the others at least "
                                                << others_min);
    CHECK(device.stats[2].iterations < others_min);
    CHECK(others_min > 5);

    // The whole iteration as one CUDA graph: apply() runs for the true residuals and twice for the captured
    // first iteration only; without graphs twice per iteration enqueued: at least the most iterations of a rhs
    // (the host learns of iteration i's claims after enqueuing i + 1, and its confirmation also takes the claims
    // of i + 1).
    const Run graph = run(true, true, ks);
    check_same(device, graph);
    int most_iterations = 0;
    for (std::size_t r = 0; r < l.rhs; ++r) most_iterations = std::max(most_iterations, graph.stats[r].iterations);
    const int confirmations = graph.products - 2, enqueued = (device.products - confirmations) / 2;
    INFO("products: plain " << device.products << ", graph " << graph.products << "; most iterations "
                            << most_iterations);
    CHECK(confirmations >= 2);
    CHECK(device.products == confirmations + 2 * enqueued);
    CHECK(enqueued >= most_iterations);
    CHECK(enqueued <= most_iterations + confirmations);

    // One step ahead: the host waits for each iteration before the next; the same bits (a claimed rhs sits out
    // the iterations until its confirmation, however late).
    KrylovSettings one = ks;
    one.steps_ahead = 1;
    check_same(device, run(true, false, one));
  }

  SECTION("stopped by max_iterations") {
    KrylovSettings capped = ks;
    capped.max_iterations = 9;
    capped.tolerance = 1e-300;  // unreachable
    const Run device = run(true, false, capped), host = run(false, false, capped), graph = run(true, true, capped);
    check_same(device, graph);
    for (std::size_t r = 0; r < l.rhs; ++r) {
      INFO("rhs " << r);
      if (r == 1) {
        CHECK(device.stats[r].converged);
        CHECK(device.stats[r].iterations == 0);
        continue;
      }
      CHECK_FALSE(device.stats[r].converged);
      CHECK(device.stats[r].iterations == 9);
      // 9 iterations of two products, and the true residuals at the start and at the cap.
      CHECK(device.stats[r].matvecs == 2 * 9 + 2);
      CHECK(device.stats[r].matvecs == host.stats[r].matvecs);
      // The same 9 iterations: the same x to rounding, as BiCGStab amplifies it. The two add their reductions in
      // different orders, and in complex64 some random systems amplify that far: seed 3742982161 (1 of 8 runs on
      // an H200, session 34) left rhs 0's residuals 2.1e-3 and its x 1.8e-2 apart after 9 iterations. complex128
      // keeps them within 1e-11.
      const double apart = single ? 1e-1 : 1e-11;
      CHECK(std::abs(device.stats[r].residual - host.stats[r].residual) <= apart * std::max(1.0, host.stats[r].residual));
      const auto xd = rhs_part<Real>(device.x, l, r), xh = rhs_part<Real>(host.x, l, r);
      CHECK(test::relative_l2<Real, Real>(xd, xh) <= apart);
    }
    // Products: 2 true residuals, 9 iterations and the masked one enqueued before the host saw the cap (2 each);
    // one step ahead, no masked iteration.
    CHECK(device.products == 2 + 2 * 10);
    CHECK(graph.products == 2 + 2);  // the residuals and the captured iteration
    capped.steps_ahead = 1;
    const Run one_ahead = run(true, false, capped);
    check_same(device, one_ahead);
    CHECK(one_ahead.products == 2 + 2 * 9);
  }
}
