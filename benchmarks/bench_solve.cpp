// gratingsim bench solve: the Krylov iteration of the physics solver on the four problem cases of
// docs/convolution.md §5 built as real structures, per backend, method (GMRES(40), the solver's
// default restart; GMRES(200), as the configs use; BiCGStab; GMRES with its Arnoldi steps replayed as CUDA
// graphs, and the host-driven GMRES, for comparison) and precision: time per iteration from
// the timestamps of one real solve (CUDA events on the problem's stream, or the host clock), its
// split (convolution / z-operator / Krylov vector operations), the ratio to the iteration's memory
// floor, and GPU versus cpu-fftw on the same case. Every row's operator is verified first: one
// product A·x on random x against a complex128 problem of the same structure (cpu-direct where affordable, else cpu-fftw).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/bench_common.hpp"
#include "benchmarks/benchmarks.hpp"
#include "convolution/devices.hpp"
#include "convolution/problem_cases.hpp"
#include "convolution/timing.hpp"
#include "physics/krylov.hpp"
#include "physics/problem.hpp"

namespace gratingsim::app {
namespace {

using conv::Backend;

/// Table 1 of docs/convolution.md §5 (convolution/problem_cases.hpp): harmonics ±M on both axes, the
/// table's layers as the slices of the structure's layer. The paper's 8 angles × 3 components = 24 fields
/// per slice are 8 right-hand sides here: 4 incidence angles × (s, p), the two polarisations the solver
/// always pairs per incidence, so per_slice = 3·8 = 24 as in the table.
struct BenchCase {
  int number, harmonics, slices;
};
constexpr auto bench_cases = [] {
  std::array<BenchCase, std::size(conv::problem_cases)> cases{};
  for (std::size_t i = 0; i < cases.size(); ++i)
    cases[i] = {conv::problem_cases[i].number, conv::problem_cases[i].harmonics, conv::problem_cases[i].layers};
  return cases;
}();

constexpr double wavelength = 0.6328;  // µm (He-Ne)
constexpr double thetas_deg[] = {5, 15, 25, 35};
constexpr double phi_deg = 30;  // conical: every order couples s and p

/// A crossed grating on a square lattice: Λ = 0.5 µm, a layer 0.25 µm thick of circular pillars
/// (radius 0.15 µm, n = 2.0, a silicon-nitride-like index) in air, on a glass-like substrate (n = 1.46).
physics::Structure bench_structure(int slices) {
  using namespace physics;
  Structure s;
  s.lattice = {0.5, 0.5};
  s.superstrate = Material::constant_index(1.0, "air");
  s.substrate = Material::constant_index(1.46, "glass");
  Layer layer;
  layer.thickness = 0.25;
  layer.slices = slices;
  layer.background = Material::constant_index(1.0, "air");
  Ellipse pillar;
  pillar.semi_axis_x = pillar.semi_axis_y = 0.15;
  pillar.material = Material::constant_index(2.0, "nitride");
  layer.shapes.push_back(pillar);
  s.layers = {layer};
  return s;
}

std::vector<physics::Incidence> bench_incidences() {
  std::vector<physics::Incidence> out;
  for (double theta : thetas_deg) out.push_back({wavelength, theta, phi_deg});
  return out;
}

/// A Krylov method as runs use it: GMRES(restart) or BiCGStab. gmres-host(M) and bicgstab-host are the methods
/// with their per-rhs scalars on the host on a device space too (KrylovSettings::device_scalars = false): the
/// iterations the device-resident ones replaced, for comparison (on the CPU both are the same). gmres-graph(M)
/// is GMRES(M) with each Arnoldi step captured in a CUDA graph and replayed, bicgstab-graph BiCGStab with its
/// iteration captured once (KrylovSettings::cuda_graphs; device operators whose products are capturable only:
/// gpu-fused, gpu-direct).
struct MethodSpec {
  physics::Method method = physics::Method::gmres;
  int restart = 40;
  bool device_scalars = true;
  bool graphs = false;
  [[nodiscard]] std::string name() const {
    if (method != physics::Method::gmres) return graphs ? "bicgstab-graph" : device_scalars ? "bicgstab" : "bicgstab-host";
    return (graphs ? "gmres-graph(" : device_scalars ? "gmres(" : "gmres-host(") + std::to_string(restart) + ")";
  }
  /// Operator products per iteration (BiCGStab: two per step).
  [[nodiscard]] int products() const { return method == physics::Method::gmres ? 1 : 2; }
  /// Basis vectors each Arnoldi step projects against, averaged over a cycle: step j (0-based) of
  /// GMRES(m) has j + 1, so (m + 1)/2 (each read twice: CGS2); none for BiCGStab.
  [[nodiscard]] double mean_depth() const { return method == physics::Method::gmres ? (restart + 1) / 2.0 : 0.0; }
  /// Krylov vectors the solve allocates (as solver.cpp counts them).
  [[nodiscard]] int vectors() const { return physics::solve_space_size({.method = method, .restart = restart}); }
};

MethodSpec parse_method(std::string_view text) {
  if (text == "bicgstab") return {physics::Method::bicgstab, 0};
  if (text == "bicgstab-host") return {physics::Method::bicgstab, 0, false, false};
  if (text == "bicgstab-graph") return {physics::Method::bicgstab, 0, true, true};
  struct Variant {
    std::string_view prefix;
    bool device_scalars, graphs;
  };
  constexpr Variant variants[] = {{"gmres(", true, false}, {"gmres-host(", false, false}, {"gmres-graph(", true, true}};
  for (const Variant& v : variants) {
    if (text.starts_with(v.prefix) && text.ends_with(")")) {
      const std::string_view number = text.substr(v.prefix.size(), text.size() - v.prefix.size() - 1);
      return {physics::Method::gmres, parse_int("method", number, 2, 1000), v.device_scalars, v.graphs};
    }
  }
  throw UsageError("--method: expected gmres(M), gmres-host(M), gmres-graph(M) (CUDA graphs), bicgstab, bicgstab-host or "
                   "bicgstab-graph, got '" +
                   std::string(text) + "'");
}

struct Samples {
  std::vector<double> us;
  [[nodiscard]] double median() const { return us.empty() ? NAN : conv::Samples{us}.median(); }
  [[nodiscard]] double min() const { return us.empty() ? NAN : conv::Samples{us}.min(); }
  [[nodiscard]] double max() const { return us.empty() ? NAN : conv::Samples{us}.max(); }
};

struct Settings {
  std::vector<const BenchCase*> cases;
  std::vector<Backend> backends;
  std::vector<Precision> precisions;
  std::vector<MethodSpec> methods;
  int repeats = 5;           ///< timed solves per GPU row
  int cpu_repeats = 3;       ///< timed solves per CPU row (a CPU iteration of case 4 takes about a second)
  int bicgstab_steps = 50;   ///< BiCGStab steps per timed solve
  double warmup_ms = 200;    ///< untimed short solves first, for at least this long
  double bandwidth = 3.0e12;
  std::optional<std::string> csv;
};

struct Row {
  int case_number = 0;
  std::string backend, device, note;
  MethodSpec method;
  Precision precision = Precision::single;
  bool ok = false, ran = false;
  int iterations = 0;  ///< iterations timed per solve (GMRES: M, the second of its two cycles)
  Samples iteration, convolution, z_operator, vector_ops;  ///< per iteration, one sample per timed solve
  double floor_us = 0, floor_bytes = 0, verify_error = 0;
  std::optional<double> speedup_vs_cpu;
};

/// Bytes one iteration must move at least, counting one pass per operation (nothing fused across
/// operations); s = bytes per complex value, F = s·(one batched vector), C = s·(the convolution
/// output: 5/3 F for the 2D normal-vector formulation):
///   convolution  F + C + s·K·L1·L2·slices (read x, write c, read each spectrum once);
///   z-operator   2F + C (read x and c, write y) + 4 complex128 coefficients per (incidence, slice, order);
///   vector ops   GMRES(m), Arnoldi step with b basis vectors (CGS2), host-driven on a device space (gmres-host):
///                two passes of dots (b + 1)F and combine (b + 2)F, norm F, scale 2F: (4b + 9)F; mean
///                b = (m + 1)/2, so (2m + 11)F; device-resident (device.hpp, DeviceArnoldi) and on host spaces
///                (VectorSpace::combine_dots, combine_norm): dots (b + 1)F, combine fused with dots (b + 2)F,
///                combine fused with the norm (b + 2)F, scale 2F: (3b + 7)F, mean (1.5m + 8.5)F; plus the cycle's
///                solution update (m + 2)F spread over its m steps;
///                BiCGStab step, host-driven on a device space (VectorSpace::linear_update's default: separate
///                calls): dots r̂·r and r̂·v (4F), p = βp − βωv + r as scale and two axpys (8F), s = r − αv as copy,
///                axpy and norm (6F), t·s and t·t in one dots pass (4F), x += αp + ωs as two axpys (6F), r = s − ωt
///                as copy, axpy and norm (6F): 34F with every rhs stepping; on host spaces each update one pass
///                (linear_update): 2F + 4F + 2F + 3F + 2F + 4F + 3F = 20F; device-resident (device.hpp,
///                DeviceBiCGStab: five fused kernels) 18F.
/// Per iteration: products() × (convolution + z-operator) + vector ops.
double floor_bytes(const physics::BatchLayout& l, const conv::Problem& g, std::size_t real_bytes,
                   const MethodSpec& m, bool device) {
  const double s = 2.0 * double(real_bytes);
  const double F = double(l.size()) * s, C = double(g.output_size()) * s;
  const double spectra = double(g.slices) * g.kernels * g.l1 * g.l2 * s;
  const double orders = double(l.block) / 3, incidences = double(l.rhs) / 2;
  const double coefficients = incidences * double(l.slices) * orders * 64.0;
  const double product = (F + C + spectra) + (2 * F + C + coefficients);
  const bool fused_passes = !device || m.device_scalars;  // GMRES's CGS2: three basis reads per step, not four
  const double step = fused_passes ? 1.5 * m.restart + 8.5 : 2.0 * m.restart + 11;
  const double vectors = m.method == physics::Method::gmres ? step * F + (m.restart + 2.0) / m.restart * F
                                                            : (device ? (m.device_scalars ? 18 : 34) : 20) * F;
  return m.products() * product + vectors;
}

/// The operator the timed solve sees: the problem's two stages, with timestamps before, between and
/// after them on the problem's stream (device) or the host clock. Capturable (with `graphs`, gmres-graph)
/// where the problem is: a product being captured into a CUDA graph gets no timestamps (an event recorded
/// during a capture holds no time) and is not listed; its replays run inside the graph, unmarked. Without
/// `graphs`, apply() asks nothing more of CUDA than before (no capture query in the timed baseline).
template <class Real>
class StagedProblem final : public physics::LinearOperator<Real> {
 public:
  using Complex = std::complex<Real>;
  struct Product {
    int start, convolved, end;  // marks of the timeline
  };
  StagedProblem(physics::DiscreteProblem<Real>& problem, conv::Timeline& timeline, bool graphs)
      : problem_(problem), timeline_(timeline), graphs_(graphs) {}
  [[nodiscard]] const physics::BatchLayout& layout() const override { return problem_.layout(); }
  [[nodiscard]] std::unique_ptr<physics::VectorSpace<Real>> make_space(int count) const override {
    return problem_.make_space(count);
  }
  [[nodiscard]] bool capturable() const override { return graphs_ && problem_.capturable(); }
  void apply(const Complex* x, Complex* y) override {
#if GRATINGSIM_HAVE_CUDA
    if (capturable() && physics::stream_capturing(problem_.stream())) {
      problem_.apply_convolution(x);
      problem_.apply_z_operator(x, y);
      return;
    }
#endif
    Product p{};
    p.start = timeline_.mark();
    problem_.apply_convolution(x);
    p.convolved = timeline_.mark();
    problem_.apply_z_operator(x, y);
    p.end = timeline_.mark();
    products.push_back(p);
  }
  std::vector<Product> products;

 private:
  physics::DiscreteProblem<Real>& problem_;
  conv::Timeline& timeline_;
  bool graphs_;
};

/// The complex128 problem of one case every row's product is checked against: cpu-direct (the direct sums, independent
/// of every FFT backend) where its products stay below direct_reference_limit multiply-adds, else cpu-fftw, which
/// then checks everything but itself in double (a cpu-fftw row in double then verifies to 0 by construction).
struct Reference {
  std::unique_ptr<physics::DiscreteProblem<double>> problem;
  Backend backend = Backend::cpu_fftw;
};
/// cpu-direct's product costs about (orders)² per convolution; 9 convolutions per slice and right-hand side bound
/// the normal-vector pattern's terms: 5.5e6 and 2.3e8 for cases 1 and 2, 8.5e9 and more for cases 3 and 4.
constexpr double direct_reference_limit = 1e9;

/// One timed solve's figures per iteration.
struct SolveSample {
  int iterations = 0;  ///< iterations in the timed region (GMRES: the second cycle's M)
  double iteration_us = 0, convolution_us = 0, z_operator_us = 0;
};

/// The settings of a solve of `iterations` iterations from the background field (unreachable tolerance).
physics::KrylovSettings krylov_settings(const MethodSpec& m, int iterations) {
  physics::KrylovSettings ks;
  ks.method = m.method;
  ks.restart = m.method == physics::Method::gmres ? m.restart : ks.restart;
  ks.tolerance = 1e-300;
  ks.max_iterations = iterations;
  ks.device_scalars = m.device_scalars;
  ks.cuda_graphs = m.graphs;
  return ks;
}

/// Iterations per timed solve: GMRES(M) two whole cycles (the first captures gmres-graph's graphs, the
/// second is timed); BiCGStab a fixed number of steps.
int timed_iterations(const MethodSpec& m, const Settings& s) {
  return m.method == physics::Method::gmres ? 2 * m.restart : s.bicgstab_steps;
}

/// A solve of `problem` through `op` (the problem, or a wrapper of it) from the background field, as the solver runs
/// it: b and x in a space of the operator (krylov.hpp), x = b to start.
template <class Real>
std::vector<physics::SolveStats> solve_from_background(const physics::DiscreteProblem<Real>& problem,
                                                       physics::LinearOperator<Real>& op,
                                                       const physics::KrylovSettings& settings) {
  const auto space = op.make_space(physics::solve_space_size(settings));
  problem.load_background(*space, 0);
  space->copy(0, 1);
  return physics::solve<Real>(op, *space, settings);
}

/// Runs one solve from the background field with an unreachable tolerance for `iterations` and reads
/// its timeline. GMRES (two cycles): the region from the end of the true-residual product between the
/// cycles to the start of the final one (the second cycle's start, M Arnoldi steps and solution update),
/// over its M iterations; BiCGStab: from the start of the first iteration's product to the start of the
/// final true-residual product, over the iterations done. The stages summed over the region's marked
/// products: none for gmres-graph (its products run inside the graphs), whose split is then NaN.
template <class Real>
SolveSample timed_solve(physics::DiscreteProblem<Real>& problem, const MethodSpec& m, int iterations,
                        conv::Timeline& timeline) {
  timeline.reset();
  StagedProblem<Real> staged(problem, timeline, m.graphs);
  const auto stats = solve_from_background<Real>(problem, staged, krylov_settings(m, iterations));
  int done = 0;  // the solve's iterations (the most of any rhs)
  for (const auto& st : stats) done = std::max(done, st.iterations);
  const auto& p = staged.products;
  const std::string made = "the timed solve made " + std::to_string(p.size()) + " marked products in " +
                           std::to_string(done) + " iterations";
  GS_EXPECTS(p.size() >= 2 && done > 0, made);
  // The region: from mark `from` to the final true residual's start; `inside` its first marked product.
  // bicgstab-graph marks only its two true residuals (its products run inside the graph): the region starts at
  // the end of the first, and holds the capture of its graph.
  int from = m.graphs ? p[0].end : p[1].start;
  std::size_t inside = 1;
  GS_EXPECTS(m.graphs || p.size() >= 3, made);
  SolveSample out;
  out.iterations = done;
  if (m.method == physics::Method::gmres) {
    // Marked: the 3 true residuals and, unless graphs replay them, the M products of each cycle.
    const std::size_t per_cycle = (p.size() - 3) / 2;
    GS_EXPECTS(done == iterations && p.size() == 3 + 2 * per_cycle &&
                   (per_cycle == 0 || per_cycle == std::size_t(m.restart)),
               made);
    const std::size_t between = 1 + per_cycle;  // the true residual between the two cycles
    from = p[between].end;
    inside = between + 1;
    out.iterations = m.restart;
  }
  const double n = out.iterations;
  out.iteration_us = timeline.elapsed_us(from, p.back().start) / n;
  if (inside + 1 >= p.size()) {
    out.convolution_us = out.z_operator_us = NAN;  // no marked product in the region
    return out;
  }
  for (std::size_t i = inside; i + 1 < p.size(); ++i) {
    out.convolution_us += timeline.elapsed_us(p[i].start, p[i].convolved) / n;
    out.z_operator_us += timeline.elapsed_us(p[i].convolved, p[i].end) / n;
  }
  return out;
}

/// Times one method on a built and verified problem: warm-up, then the timed solves, into `row`.
template <class Real>
void time_method(physics::DiscreteProblem<Real>& problem, const BenchCase& c, const MethodSpec& method,
                 const Settings& s, Row& row) {
  const bool device = problem.memory() == Memory::device;
  const physics::BatchLayout& l = problem.layout();
  row.floor_bytes = floor_bytes(l, problem.convolution().problem(), sizeof(Real), method, device);
  row.floor_us = 1e6 * row.floor_bytes / s.bandwidth;
  if (device) {
    const auto gpu = conv::current_cuda_device();
    GS_SUPPORTS(gpu.has_value(), "no CUDA device");
    const std::size_t orders = std::size_t(2 * c.harmonics + 1) * (2 * c.harmonics + 1);
    const std::size_t need = physics::estimate_bytes(l.slices, orders, l.rhs / 2, c.harmonics, c.harmonics,
                                                     sizeof(Real), method.vectors(), false, problem.formulation());
    GS_SUPPORTS(need <= gpu->global_memory_bytes / 10 * 9,
             method.name() + " needs about " + std::to_string(need >> 20) + " MiB, more than 90% of the device's " +
                 std::to_string(gpu->global_memory_bytes >> 20) + " MiB");
  }
  GS_SUPPORTS(!method.graphs || problem.capturable(),
              "this backend's products are not captured in CUDA graphs (convolution.hpp, capturable)");
  const int iterations = timed_iterations(method, s);
  conv::Timeline timeline(problem.memory(), problem.stream(), 3 * (method.products() * iterations + 8));
  // Warm-up: short solves (unmarked) until the clocks settle.
  const auto warmup_start = std::chrono::steady_clock::now();
  do {
    (void)solve_from_background<Real>(problem, problem, krylov_settings(method, std::min(iterations, 4)));
  } while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warmup_start).count() <
           s.warmup_ms);
  const int repeats = device ? s.repeats : s.cpu_repeats;
  for (int r = 0; r < repeats; ++r) {
    const SolveSample sample = timed_solve(problem, method, iterations, timeline);
    row.iterations = sample.iterations;
    row.iteration.us.push_back(sample.iteration_us);
    row.convolution.us.push_back(sample.convolution_us);
    row.z_operator.us.push_back(sample.z_operator_us);
    row.vector_ops.us.push_back(sample.iteration_us - sample.convolution_us - sample.z_operator_us);
  }
  row.ok = row.ran = true;
}

/// One row per method for one backend: the problem built and its product verified once.
template <class Real>
std::vector<Row> measure(const BenchCase& c, Backend backend, const Settings& s, Reference& reference) {
  using Complex = std::complex<Real>;
  Row base;
  base.case_number = c.number;
  base.backend = std::string(conv::to_string(backend));
  base.precision = precision_of<Real>();
  std::vector<Row> rows;
  const auto each_method = [&](const std::string& note, bool ran) {
    for (const MethodSpec& m : s.methods) {
      Row row = base;
      row.method = m;
      row.note = note;
      row.ran = ran;
      rows.push_back(row);
    }
    return rows;
  };
  const physics::Structure structure = bench_structure(c.slices);
  const auto incidences = bench_incidences();
  physics::ProblemSettings ps;
  ps.m1 = ps.m2 = c.harmonics;
  ps.backend = backend;
  std::vector<std::string> warnings;
  std::unique_ptr<physics::DiscreteProblem<Real>> problem;
  try {
    problem = std::make_unique<physics::DiscreteProblem<Real>>(structure, incidences, ps, 1, warnings);
    if (problem->memory() == Memory::device) {
      const auto gpu = conv::current_cuda_device();
      base.device = gpu ? gpu->name : "CUDA device";
    } else {
      base.device = conv::describe(conv::host_cpu());
    }
    const physics::BatchLayout& l = problem->layout();
    // Verification: A·x on fresh random x against the complex128 reference on the same (rounded) x.
    if (!reference.problem) {
      physics::ProblemSettings rs = ps;
      const double orders = double(2 * c.harmonics + 1) * double(2 * c.harmonics + 1);
      const double direct = orders * orders * 9.0 * c.slices * double(std::size(thetas_deg) * 2);
      reference.backend = direct <= direct_reference_limit ? Backend::cpu_direct : Backend::cpu_fftw;
      rs.backend = reference.backend;
      std::vector<std::string> ignored;
      reference.problem = std::make_unique<physics::DiscreteProblem<double>>(structure, incidences, rs, 1, ignored);
    }
    std::mt19937_64 rng(std::random_device{}());
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<Complex> x(l.size()), y(l.size(), Complex(NAN, NAN));
    for (Complex& z : x) z = {Real(u(rng)), Real(u(rng))};
    const std::vector<std::complex<double>> x_wide(x.begin(), x.end());
    std::vector<std::complex<double>> y_ref(l.size());
    reference.problem->apply(x_wide.data(), y_ref.data());
    {
      auto space = problem->make_space(2);
      space->upload(x, 0);
      problem->apply(space->data(0), space->data(1));
      space->download(1, y);
    }
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < l.size(); ++i) {
      diff += std::norm(std::complex<double>(y[i]) - y_ref[i]);
      norm += std::norm(y_ref[i]);
    }
    base.verify_error = norm > 0 && std::isfinite(diff) ? std::sqrt(diff / norm) : INFINITY;
  } catch (const Unsupported& e) {
    return each_method(user_message(e), false);
  } catch (const Error& e) {
    return each_method(user_message(e), true);
  }
  const double tolerance = base.precision == Precision::single ? 1e-4 : 1e-10;
  if (!(base.verify_error <= tolerance))
    return each_method("A·x differs from the complex128 " + std::string(conv::to_string(reference.backend)) +
                           " reference beyond " + std::to_string(tolerance), true);

  for (const MethodSpec& m : s.methods) {
    Row row = base;
    row.method = m;
    try {
      time_method(*problem, c, m, s, row);
    } catch (const Unsupported& e) {
      row.note = user_message(e);
    } catch (const Error& e) {
      row.ran = true;
      row.note = user_message(e);
    }
    rows.push_back(row);
  }
  return rows;
}

void print_header() {
  std::printf("  %-10s %-16s %-9s %5s %10s %10s %10s %9s %9s %9s %6s %9s %8s %7s %8s  %s\n", "backend", "method",
              "precision", "iters", "iter_us", "min_us", "max_us", "conv_us", "zop_us", "vec_us", "depth", "floor_us",
              "x_floor", "vs_cpu", "verify", "device");
}

void print_row(const Row& r) {
  if (!r.ok) {
    std::printf("  %-10s %-16s %-9s %s: %s\n", r.backend.c_str(), r.method.name().c_str(),
                std::string(to_string(r.precision)).c_str(), r.ran ? "FAILED" : "unavailable", r.note.c_str());
    return;
  }
  char speed[32] = "-", depth[32] = "-";
  if (r.speedup_vs_cpu) std::snprintf(speed, sizeof speed, "%.1f", *r.speedup_vs_cpu);
  if (r.method.mean_depth() > 0) std::snprintf(depth, sizeof depth, "%.1f", r.method.mean_depth());
  const double it = r.iteration.median();
  std::printf("  %-10s %-16s %-9s %5d %10.1f %10.1f %10.1f %9.1f %9.1f %9.1f %6s %9.1f %8.2f %7s %8.1e  %s\n",
              r.backend.c_str(), r.method.name().c_str(), std::string(to_string(r.precision)).c_str(),
              r.iterations, it, r.iteration.min(), r.iteration.max(), r.convolution.median(), r.z_operator.median(),
              r.vector_ops.median(), depth, r.floor_us, it / r.floor_us, speed, r.verify_error, r.device.c_str());
}

void write_csv(const std::string& file, const std::vector<Row>& rows) {
  std::ofstream out(file, std::ios::trunc);
  out << "case,backend,method,precision,device,status,iterations_per_solve,solves,iteration_median_us,"
         "iteration_min_us,iteration_max_us,convolution_us,z_operator_us,vector_ops_us,vector_ops_min_us,"
         "vector_ops_max_us,products_per_iteration,mean_arnoldi_depth,floor_bytes,floor_us,ratio_to_floor,"
         "speedup_vs_cpu_fftw,verify_rel_error,note\n";
  char buf[512];
  for (const Row& r : rows) {
    out << r.case_number << ',' << r.backend << ',' << csv_field(r.method.name()) << ','
        << to_string(r.precision) << ',' << csv_field(r.device) << ','
        << (r.ok ? "ok" : r.ran ? "failed" : "unavailable") << ',';
    if (r.ok) {
      const double it = r.iteration.median();
      std::snprintf(buf, sizeof buf, "%d,%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%.1f,%.6g,%.3f,%.4g,", r.iterations,
                    r.iteration.us.size(), it, r.iteration.min(), r.iteration.max(), r.convolution.median(),
                    r.z_operator.median(), r.vector_ops.median(), r.vector_ops.min(), r.vector_ops.max(),
                    r.method.products(), r.method.mean_depth(), r.floor_bytes, r.floor_us, it / r.floor_us);
      out << buf;
      if (r.speedup_vs_cpu) out << *r.speedup_vs_cpu;
      std::snprintf(buf, sizeof buf, ",%.3e,", r.verify_error);
      out << buf;
    } else {
      out << ",,,,,,,,,,,,,,,,,";
    }
    out << csv_field(r.note) << '\n';
  }
  out.close();
  if (!out) throw Error("cannot write " + file);
}

template <class Real>
std::vector<Row> bench_case(const BenchCase& c, const Settings& s, Reference& reference) {
  const int n = 2 * c.harmonics + 1;
  std::printf("\ncase %d, %s: harmonics ±%d (%dx%d orders), %d slices, 8 rhs (4 angles x s,p)\n", c.number,
              std::string(to_string(precision_of<Real>())).c_str(), c.harmonics, n, n, c.slices);
  print_header();
  std::vector<Row> rows;
  std::fflush(stdout);
  for (Backend b : s.backends) {
    const auto part = measure<Real>(c, b, s, reference);
    rows.insert(rows.end(), part.begin(), part.end());
  }
  // Printed per method, backends side by side, each against cpu-fftw with the same method.
  for (const MethodSpec& m : s.methods) {
    std::optional<double> cpu;
    for (const Row& r : rows)
      if (r.ok && r.backend == "cpu-fftw" && r.method.name() == m.name()) cpu = r.iteration.median();
    for (Row& r : rows) {
      if (r.method.name() != m.name()) continue;
      if (cpu && r.ok && r.backend != "cpu-fftw") r.speedup_vs_cpu = *cpu / r.iteration.median();
      print_row(r);
    }
  }
  std::fflush(stdout);
  return rows;
}

constexpr OptionSpec options_spec[] = {
    {"case", "LIST|all", "problem cases 1-4 of docs/convolution.md §5, e.g. 3 or 3,4 (default all)"},
    {"backend", "LIST", "comma-separated backends (default gpu-cufft,gpu-fused,gpu-direct,cpu-fftw)"},
    {"method", "LIST",
     "comma-separated gmres(M), gmres-graph(M) (Arnoldi steps replayed as CUDA graphs), gmres-host(M) (per-rhs "
     "scalars on the host), bicgstab, bicgstab-graph (its iteration replayed as a CUDA graph) and bicgstab-host "
     "(default gmres(40),gmres-graph(40),gmres(200),bicgstab,bicgstab-graph,bicgstab-host)"},
    bench_option::precision,
    bench_option::repeats("timed solves per GPU row (default 5)"),
    {"cpu-repeats", "N", "timed solves per CPU row (default 3)"},
    {"bicgstab-steps", "N", "BiCGStab steps per timed solve (default 50)"},
    bench_option::warmup_ms("untimed short solves first, per row, for at least this long (default 200)"),
    bench_option::bandwidth,
    bench_option::csv,
};

Settings parse_settings(const Options& o) {
  Settings s;
  s.cases = select_cases(o.value("case"), std::span<const BenchCase>(bench_cases));
  const auto backends = o.value("backend").value_or("gpu-cufft,gpu-fused,gpu-direct,cpu-fftw");
  try {
    for (std::string_view name : split_list("backend", backends)) s.backends.push_back(conv::parse_backend(name));
  } catch (const InvalidArgument& e) {
    throw UsageError(std::string("--backend: ") + user_message(e));
  }
  for (std::string_view name : split_list("method", o.value("method").value_or("gmres(40),gmres-graph(40),gmres(200),bicgstab,bicgstab-graph,bicgstab-host")))
    s.methods.push_back(parse_method(name));
  s.precisions = parse_precisions(o.value("precision").value_or("both"));
  if (const auto v = o.value("repeats")) s.repeats = parse_int("repeats", *v, 1, 100000);
  if (const auto v = o.value("cpu-repeats")) s.cpu_repeats = parse_int("cpu-repeats", *v, 1, 100000);
  if (const auto v = o.value("bicgstab-steps")) s.bicgstab_steps = parse_int("bicgstab-steps", *v, 2, 100000);
  if (const auto v = o.value("warmup-ms")) s.warmup_ms = parse_int("warmup-ms", *v, 0, 1000000);
  if (const auto v = o.value("bandwidth")) s.bandwidth = 1e9 * parse_positive("bandwidth", *v);
  if (const auto v = o.value("csv")) s.csv = std::string(*v);
  return s;
}

int run_bench_solve(const Options& options) {
  const Settings s = parse_settings(options);
  const auto gpu = conv::current_cuda_device();
  std::printf("gratingsim bench solve: GPU rows %d timed solves, CPU rows %d, after at least %.0f ms of warm-up; "
              "BiCGStab %d steps per solve, GMRES(M) two cycles (the second timed)\n",
              s.repeats, s.cpu_repeats, s.warmup_ms, s.bicgstab_steps);
  std::printf("iteration: device timeline (CUDA events; CPU: steady clock), GMRES(M) from the end of the true-residual "
              "product between its two cycles to the start of the final one, over M; BiCGStab from the first "
              "iteration's product (bicgstab-graph: the end of the first true residual, its capture included; "
              "device-resident BiCGStab: the masked iteration enqueued before the host saw the last claim included) "
              "to the final true-residual product, over the iterations; conv/zop summed over "
              "the products marked in that region (none for gmres-graph: nan, and so vec); vec = the rest (vector and per-rhs "
              "scalar kernels, host waits)\n");
  std::printf("floor: products x [(F + C + spectra) + (2F + C + coefficients)] + vector ops (GMRES(M): (2M + 11)F + "
              "(M + 2)F/M host-driven on a device (gmres-host), (1.5M + 8.5)F + (M + 2)F/M device-resident (GPU "
              "gmres(M)) and on the CPU (fused passes), CGS2 at mean depth "
              "(M + 1)/2; BiCGStab: 34F host-driven on a GPU, 20F on the CPU, 18F device-resident (GPU bicgstab)) at %.0f GB/s; F one batched "
              "vector, C the convolution output\n",
              s.bandwidth / 1e9);
  if (gpu)
    std::printf("GPU: %s, %d SMs, peak SM clock %d MHz\n", gpu->name.c_str(), gpu->multiprocessors, gpu->sm_clock_mhz);
  else
    std::printf("GPU: none (%s)\n", conv::cuda_report().problem.c_str());
  std::printf("CPU: %s\n", conv::describe(conv::host_cpu()).c_str());

  std::vector<Row> rows;
  for (const BenchCase* c : s.cases) {
    Reference reference;  // shared by both precisions of a case
    for (Precision p : s.precisions) {
      auto part = p == Precision::single ? bench_case<float>(*c, s, reference) : bench_case<double>(*c, s, reference);
      rows.insert(rows.end(), part.begin(), part.end());
    }
  }
  return finish_bench(s.csv, rows, write_csv, [](const Row& r) { return r.ran && !r.ok; });
}

}  // namespace

const Command gratingsim_bench_solve{
    .name = "solve",
    .summary = "time the solver's Krylov iteration (split, floor, GPU vs cpu-fftw) on the four cases",
    .usage =
        "gratingsim bench solve [--case LIST|all] [--backend LIST] [--method LIST] [--precision single|double|both] "
        "[--repeats N] [--cpu-repeats N] [--bicgstab-steps N] [--warmup-ms MS] [--bandwidth GB/s] [--csv FILE]",
    .description =
        "Times the Krylov iteration of the physics solver on the problem cases of docs/convolution.md §5 built as "
        "crossed gratings (square lattice, circular pillars, harmonics ±3/±7/±15/±31 on both axes, 32/64/128/256 "
        "slices, 4 incidence angles x s,p = 8 right-hand sides; normal-vector formulation, no preconditioner, as "
        "the solver runs 2D gratings), with the methods runs use: GMRES(40) (the solver's default restart), "
        "GMRES(200) (as the configs set it) and BiCGStab (the problem-case configs). On a GPU, gmres(M) keeps its "
        "per-rhs scalars on the device (no host wait inside an Arnoldi step, three basis reads per step); "
        "gmres-host(M) is the host-driven iteration it replaced (scalars on the host, four basis reads and three "
        "host synchronisations per step), for comparison; gmres-graph(M) is gmres(M) with each Arnoldi step (its "
        "product and its kernels) captured in a CUDA graph in the first cycle and replayed in the later ones "
        "(one graph launch per step instead of about ten kernel launches; gpu-fused and gpu-direct only, the "
        "backends whose products are capturable; the same results bit for bit). bicgstab keeps its per-rhs scalars on "
        "the device (five fused vector kernels, 18 vectors moved per iteration, the host waiting once per iteration, one "
        "behind), bicgstab-host is the host-driven iteration (34 vectors, five host synchronisations per iteration), "
        "bicgstab-graph is bicgstab with its whole iteration captured once as a CUDA graph and replayed. Each timed solve starts from "
        "the background field with an unreachable tolerance: GMRES(M) two whole cycles of M Arnoldi steps, "
        "BiCGStab --bicgstab-steps steps. Timestamps on the problem's stream (CUDA events; CPU: steady clock) "
        "before each product, between its convolution and z-operator, and after it (not in a graph: gmres-graph's "
        "products are not marked): a GMRES iteration is the time from the end of the true-residual product "
        "between the two cycles to the start of the final one, over M (the second cycle: its start, M steps and "
        "solution update; the first, where gmres-graph captures its graphs, excluded), a BiCGStab iteration the "
        "time from the first iteration's product (bicgstab-graph: the end of the first true residual, so its one "
        "capture counts) to the final true-residual product over the iterations (device-resident: with the masked "
        "iteration that runs before the host sees the last claim; set-up, "
        "uploads and download excluded), on the device's timeline (so host waits for the per-rhs scalars "
        "count); conv_us and zop_us are the stages summed over the marked products of the same region per "
        "iteration, vec_us the rest (all three nan for gmres-graph); iters: the iterations timed per solve. Median, min and max over the timed solves, after "
        "--warmup-ms of short solves. depth: mean Arnoldi depth (M + 1)/2 basis vectors per step (classical "
        "Gram-Schmidt twice). Floor, one pass per operation, F = bytes of one batched vector, C of the "
        "convolution output: per product (F + C + spectra) + (2F + C + coefficients), times products per "
        "iteration (GMRES 1, BiCGStab 2), plus vector ops GMRES(M) (2M + 11)F + (M + 2)F/M host-driven on a device "
        "(gmres-host), (1.5M + 8.5)F + (M + 2)F/M device-resident (GPU gmres(M)) and on the CPU (its passes fused "
        "likewise), BiCGStab 34F host-driven on a GPU, 20F on the CPU (its updates fused) and 18F "
        "device-resident, at --bandwidth. Each row's product A*x is first checked against a complex128 problem (cpu-direct "
        "where its products stay below 1e9 multiply-adds, cases 1-2; else cpu-fftw) (relative l2 "
        "<= 1e-4 single, 1e-10 double); a row that fails makes the exit status 1. A method whose Krylov vectors "
        "do not fit in 90% of the device's memory is reported unavailable.",
    .options = options_spec,
    .run = run_bench_solve};

}  // namespace gratingsim::app
