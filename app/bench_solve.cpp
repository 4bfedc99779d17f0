// gratingsim bench solve: the Krylov iteration of the physics solver on the four problem cases of
// ../shared/design/convolution.md built as real structures, per backend and precision: time per
// iteration and its split (convolution / z-operator / vector ops), ratio to the iteration's memory
// floor, and GPU versus cpu-fftw on the same case. Every row's operator is verified first: one
// product A·x on random x against a complex128 cpu-fftw problem of the same structure.
#include <algorithm>
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

#include "app/commands.hpp"
#include "convolution/devices.hpp"
#include "physics/problem.hpp"

namespace gratingsim::app {
namespace {

using conv::Backend;
using conv::Precision;

/// Table 1 of convolution.md: harmonics ±M on both axes, layers = slices. The paper's 8 angles ×
/// 3 components = 24 fields per slice are 8 right-hand sides here: 4 incidence angles × (s, p), the
/// two polarisations the solver always pairs per incidence, so per_slice = 3·8 = 24 as in the table.
struct BenchCase {
  int number, harmonics, slices;
};
constexpr BenchCase bench_cases[] = {{1, 3, 32}, {2, 7, 64}, {3, 15, 128}, {4, 31, 256}};

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

struct Samples {
  std::vector<double> us;
  [[nodiscard]] double median() const {
    std::vector<double> v = us;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }
  [[nodiscard]] double min() const { return us.empty() ? NAN : *std::min_element(us.begin(), us.end()); }
  [[nodiscard]] double max() const { return us.empty() ? NAN : *std::max_element(us.begin(), us.end()); }
};

struct Settings {
  std::vector<const BenchCase*> cases;
  std::vector<Backend> backends;
  std::vector<Precision> precisions;
  int repeats = 5;      ///< samples per GPU row
  int cpu_repeats = 3;  ///< samples per CPU row (a CPU iteration of case 4 takes about a second)
  int window = 8;       ///< Arnoldi steps of the timed GMRES cycle
  double bandwidth = 3.0e12;
  std::optional<std::string> csv;
};

struct Row {
  int case_number = 0;
  std::string backend, device, note;
  Precision precision = Precision::single;
  bool ok = false, ran = false;
  Samples iteration, convolution, z_operator;
  double floor_us = 0, floor_bytes = 0, verify_error = 0;
  std::optional<double> speedup_vs_cpu;
};

double now_us() {
  return 1e-3 * double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count());
}

/// Bytes one iteration must move at least, counting one pass per operation (nothing fused across
/// operations); F = one batched vector (slices·rhs·3·orders complex values):
///   convolution  2F + slices·L1·L2 complex (read x, write c, read each spectrum once);
///   z-operator   3F (read x and c, write y) + 4 complex128 coefficients per (incidence, slice, order);
///   vector ops   Arnoldi step j of modified Gram–Schmidt: (j+1) dots (2F each) + (j+1) axpys (3F)
///                + norm (F) + scale (2F), plus its axpy of the solution update (3F); averaged over the
///                timed steps j = 1..W−1, i.e. 5F·(W+2)/2 + 6F.
double floor_bytes(const physics::BatchLayout& l, const conv::Problem& g, std::size_t real_bytes, int window) {
  const double F = double(l.size()) * 2.0 * double(real_bytes);
  const double spectra = double(g.slices) * g.l1 * g.l2 * 2.0 * double(real_bytes);
  const double orders = double(l.block) / 3, incidences = double(l.rhs) / 2;
  const double coefficients = incidences * double(l.slices) * orders * 64.0;
  return (2 * F + spectra) + (3 * F + coefficients) + (5 * F * (window + 2) / 2 + 6 * F);
}

/// The complex128 cpu-fftw problem of one case: the reference every row's product is checked against.
struct Reference {
  std::unique_ptr<physics::DiscreteProblem<double>> problem;
};

template <class Real>
Row measure(const BenchCase& c, Backend backend, const Settings& s, Reference& reference) {
  using Complex = std::complex<Real>;
  Row row;
  row.case_number = c.number;
  row.backend = std::string(conv::to_string(backend));
  row.precision = conv::precision_of<Real>();
  const physics::Structure structure = bench_structure(c.slices);
  const auto incidences = bench_incidences();
  physics::ProblemSettings ps;
  ps.m1 = ps.m2 = c.harmonics;
  ps.backend = backend;
  std::vector<std::string> warnings;
  try {
    physics::DiscreteProblem<Real> problem(structure, incidences, ps, 1, warnings);
    const bool device = problem.memory() == conv::Memory::device;
    if (device) {
      const auto gpu = conv::current_cuda_device();
      row.device = gpu ? gpu->name : "CUDA device";
    } else {
      row.device = conv::describe(conv::host_cpu());
    }
    const physics::BatchLayout& l = problem.layout();
    row.floor_bytes = floor_bytes(l, problem.convolution().problem(), sizeof(Real), s.window);
    row.floor_us = 1e6 * row.floor_bytes / s.bandwidth;

    // Verification: A·x on fresh random x against the complex128 reference on the same (rounded) x.
    if (!reference.problem) {
      physics::ProblemSettings rs = ps;
      rs.backend = Backend::cpu_fftw;
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
    auto space = problem.make_space(2);
    space->upload(x, 0);
    problem.apply(space->data(0), space->data(1));
    space->download(1, y);
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < l.size(); ++i) {
      diff += std::norm(std::complex<double>(y[i]) - y_ref[i]);
      norm += std::norm(y_ref[i]);
    }
    row.verify_error = norm > 0 && std::isfinite(diff) ? std::sqrt(diff / norm) : INFINITY;
    const double tolerance = row.precision == Precision::single ? 1e-4 : 1e-10;
    if (!(row.verify_error <= tolerance)) {
      row.note = "A·x differs from the complex128 cpu-fftw reference beyond " + std::to_string(tolerance);
      return row;
    }

    const int repeats = device ? s.repeats : s.cpu_repeats;
    // Stages alone: back-to-back products (GPU: enqueued, one wait at the end), per product.
    const int burst = device ? 20 : 1;
    const auto time_stage = [&](Samples& out, auto&& stage) {
      stage();
      problem.synchronize();  // warm-up
      for (int r = 0; r < repeats; ++r) {
        const double t0 = now_us();
        for (int i = 0; i < burst; ++i) stage();
        problem.synchronize();
        out.us.push_back((now_us() - t0) / burst);
      }
    };
    time_stage(row.convolution, [&] { problem.apply_convolution(space->data(0)); });
    time_stage(row.z_operator, [&] { problem.apply_z_operator(space->data(0), space->data(1)); });
    space.reset();

    // Iterations: GMRES(W) stopped after 1 and after W Arnoldi steps (tolerance out of reach); the
    // difference removes the set-up both share (uploads, true residuals, download, allocation).
    const std::vector<Complex>& b = problem.background_field();
    physics::KrylovSettings ks;
    ks.method = physics::Method::gmres;
    ks.restart = s.window;
    ks.tolerance = 1e-300;
    const auto solve_us = [&](int steps) {
      ks.max_iterations = steps;
      std::vector<Complex> guess = b;
      const double t0 = now_us();
      (void)physics::solve<Real>(problem, b, guess, ks);
      return now_us() - t0;
    };
    (void)solve_us(1);  // warm-up
    for (int r = 0; r < repeats; ++r) {
      const double one = solve_us(1), many = solve_us(s.window);
      row.iteration.us.push_back((many - one) / (s.window - 1));
    }
    row.ok = row.ran = true;
  } catch (const Unsupported& e) {
    row.note = user_message(e);
  } catch (const Error& e) {
    row.ran = true;
    row.note = user_message(e);
  }
  return row;
}

void print_header() {
  std::printf("  %-10s %-9s %11s %11s %11s %10s %10s %10s %9s %8s %9s  %s\n", "backend", "precision", "iter_us",
              "min_us", "max_us", "conv_us", "zop_us", "vec_us", "x_floor", "vs_cpu", "verify", "device");
}

void print_row(const Row& r) {
  if (!r.ok) {
    std::printf("  %-10s %-9s %s: %s\n", r.backend.c_str(), std::string(conv::to_string(r.precision)).c_str(),
                r.ran ? "FAILED" : "unavailable", r.note.c_str());
    return;
  }
  const double it = r.iteration.median(), cv = r.convolution.median(), zo = r.z_operator.median();
  char speed[32] = "-";
  if (r.speedup_vs_cpu) std::snprintf(speed, sizeof speed, "%.1f", *r.speedup_vs_cpu);
  std::printf("  %-10s %-9s %11.1f %11.1f %11.1f %10.1f %10.1f %10.1f %9.2f %8s %9.1e  %s\n", r.backend.c_str(),
              std::string(conv::to_string(r.precision)).c_str(), it, r.iteration.min(), r.iteration.max(), cv, zo,
              it - cv - zo, it / r.floor_us, speed, r.verify_error, r.device.c_str());
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + '"';
}

void write_csv(const std::string& file, const std::vector<Row>& rows) {
  std::ofstream out(file, std::ios::trunc);
  out << "case,backend,precision,device,status,iteration_median_us,iteration_min_us,iteration_max_us,"
         "convolution_us,z_operator_us,vector_ops_us,floor_bytes,floor_us,ratio_to_floor,speedup_vs_cpu_fftw,"
         "verify_rel_error,note\n";
  char buf[512];
  for (const Row& r : rows) {
    out << r.case_number << ',' << r.backend << ',' << conv::to_string(r.precision) << ',' << csv_field(r.device)
        << ',' << (r.ok ? "ok" : r.ran ? "failed" : "unavailable") << ',';
    if (r.ok) {
      const double it = r.iteration.median(), cv = r.convolution.median(), zo = r.z_operator.median();
      std::snprintf(buf, sizeof buf, "%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.6g,%.3f,%.4g,", it, r.iteration.min(),
                    r.iteration.max(), cv, zo, it - cv - zo, r.floor_bytes, r.floor_us, it / r.floor_us);
      out << buf;
      if (r.speedup_vs_cpu) out << *r.speedup_vs_cpu;
      std::snprintf(buf, sizeof buf, ",%.3e,", r.verify_error);
      out << buf;
    } else {
      out << ",,,,,,,,,,,";
    }
    out << csv_field(r.note) << '\n';
  }
  out.close();
  if (!out) throw Error("cannot write " + file);
}

template <class Real>
std::vector<Row> bench_case(const BenchCase& c, const Settings& s, Reference& reference) {
  const int n = 2 * c.harmonics + 1;
  std::printf("\ncase %d, %s: harmonics ±%d (%dx%d orders), %d slices, 8 rhs (4 angles x s,p), GMRES(%d) "
              "steps 1..%d\n",
              c.number, std::string(conv::to_string(conv::precision_of<Real>())).c_str(), c.harmonics, n, n,
              c.slices, s.window, s.window - 1);
  print_header();
  std::vector<Row> rows;
  std::fflush(stdout);
  for (Backend b : s.backends) rows.push_back(measure<Real>(c, b, s, reference));
  std::optional<double> cpu;
  for (const Row& r : rows)
    if (r.ok && r.backend == "cpu-fftw") cpu = r.iteration.median();
  for (Row& r : rows) {
    if (cpu && r.ok && r.backend != "cpu-fftw") r.speedup_vs_cpu = *cpu / r.iteration.median();
    print_row(r);
  }
  std::fflush(stdout);
  return rows;
}

constexpr OptionSpec options_spec[] = {
    {"case", "LIST|all", "problem cases 1-4 of convolution.md, e.g. 3 or 3,4 (default all)"},
    {"backend", "LIST", "comma-separated backends (default gpu-cufft,gpu-fused,gpu-direct,cpu-fftw)"},
    {"precision", "single|double|both", "complex64, complex128 or both (default both)"},
    {"repeats", "N", "samples per GPU row (default 5)"},
    {"cpu-repeats", "N", "samples per CPU row (default 3)"},
    {"window", "W", "Arnoldi steps of the timed GMRES(W) cycle, >= 2 (default 8)"},
    {"bandwidth", "GB/s", "memory bandwidth of the floor (default 3000, the H100 copy bandwidth)"},
    {"csv", "FILE", "also write the rows to FILE as CSV"},
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
  s.precisions = parse_precisions(o.value("precision").value_or("both"));
  if (const auto v = o.value("repeats")) s.repeats = parse_int("repeats", *v, 1, 100000);
  if (const auto v = o.value("cpu-repeats")) s.cpu_repeats = parse_int("cpu-repeats", *v, 1, 100000);
  if (const auto v = o.value("window")) s.window = parse_int("window", *v, 2, 1000);
  if (const auto v = o.value("bandwidth")) s.bandwidth = 1e9 * parse_positive("bandwidth", *v);
  if (const auto v = o.value("csv")) s.csv = std::string(*v);
  return s;
}

int run_bench_solve(const Options& options) {
  const Settings s = [&] {
    try {
      return parse_settings(options);
    } catch (const UsageError& e) {
      throw UsageError(std::string("gratingsim bench solve: ") + e.what() + " (see 'gratingsim bench solve --help')");
    }
  }();
  const auto gpu = conv::current_cuda_device();
  std::printf("gratingsim bench solve: floor at %.0f GB/s; GPU rows %d samples, CPU rows %d\n", s.bandwidth / 1e9,
              s.repeats, s.cpu_repeats);
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
  if (s.csv) {
    write_csv(*s.csv, rows);
    std::printf("\nwrote %s\n", s.csv->c_str());
  }
  const auto failed = std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.ran && !r.ok; });
  if (failed) {
    std::printf("\n%td row(s) FAILED\n", failed);
    return 1;
  }
  return 0;
}

}  // namespace

const Command gratingsim_bench_solve{
    .name = "solve",
    .summary = "time the solver's Krylov iteration (split, floor, GPU vs cpu-fftw) on the four cases",
    .usage =
        "gratingsim bench solve [--case LIST|all] [--backend LIST] [--precision single|double|both] [--repeats N] "
        "[--cpu-repeats N] [--window W] [--bandwidth GB/s] [--csv FILE]",
    .description =
        "Times one Krylov iteration of the physics solver on the problem cases of convolution.md built as "
        "crossed gratings (square lattice, circular pillars, harmonics ±3/±7/±15/±31 on both axes, 32/64/128/256 "
        "slices, 4 incidence angles x s,p = 8 right-hand sides). An iteration is the average Arnoldi step of "
        "GMRES(W): (time of W steps - time of 1 step)/(W-1) of real solves, host clock, median/min/max over "
        "the samples. Split: the convolution and the z-operator timed alone (back-to-back products), vector "
        "ops = iteration - both (includes the host's waits for the per-rhs scalars). The floor counts one "
        "pass per operation (convolution 2F + spectra, z-operator 3F + coefficients, Gram-Schmidt "
        "5F(W+2)/2 + 6F, F = one batched vector) at the given bandwidth. Each row's product A*x is first "
        "checked against a complex128 cpu-fftw problem (relative l2 <= 1e-4 single, 1e-10 double); a row "
        "that fails makes the exit status 1.",
    .options = options_spec,
    .run = run_bench_solve};

}  // namespace gratingsim::app
