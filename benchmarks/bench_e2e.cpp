// gratingsim bench e2e: a case's whole sweep, end to end, as `run` solves it on one worker (one batched
// solve per unit of work: one wavelength, or several on a GPU, app/work_units.hpp; every point written
// to a result file), with the time of each phase per wavelength batch
// (physics/phase_times.hpp): where the time around the Krylov iterations goes (issue #15). The result
// file goes to the temporary directory and is removed. With --repeat N the sweep runs N times in this
// process: calls 2..N are what an in-process caller pays (validation/peers sets them against fmmax's
// steady call).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "benchmarks/benchmarks.hpp"
#include "app/work_units.hpp"
#include "app/phases.hpp"
#include "app/solving.hpp"
#include "convolution/problem_cases.hpp"
#include "io/problem.hpp"
#include "physics/normal_field.hpp"

namespace gratingsim::app {
namespace {

namespace fs = std::filesystem;

constexpr OptionSpec options_spec[] = {
    {"case", "LIST|all", "the problem cases DIR/problem_case_N.yaml, N in 1-4, e.g. 3 or 3,4 or all"},
    {"configs", "DIR", "where --case finds its files (default configs)"},
    {"backend", "LIST", "comma-separated backends (default: the case's numerics.backend; auto: as run)"},
    {"precision", "single|double", "arithmetic precision (default: the case's)"},
    {"repeat", "N", "runs each sweep N times in this process (default 1); calls 2..N are the steady state"},
};

struct Settings {
  std::vector<std::string> cases;
  std::vector<std::string> backends;  // empty: the case's own
  std::optional<Precision> precision;
  int repeat = 1;
};

Settings parse_settings(const Options& o) {
  Settings s;
  for (const std::string_view p : o.positional()) s.cases.emplace_back(p);
  if (const auto v = o.value("case")) {
    const std::string dir(o.value("configs").value_or("configs"));
    std::vector<std::string> numbers;  // of the cases of convolution/problem_cases.hpp, in the order given
    const auto known = [](std::string_view n) {
      return std::any_of(std::begin(conv::problem_cases), std::end(conv::problem_cases),
                         [&](const conv::ProblemCase& c) { return n == std::to_string(c.number); });
    };
    if (*v == "all")
      for (const conv::ProblemCase& c : conv::problem_cases) numbers.push_back(std::to_string(c.number));
    else
      for (const std::string_view n : split_list("case", *v)) {
        if (!known(n)) {
          std::string valid;
          for (const conv::ProblemCase& c : conv::problem_cases) valid += std::to_string(c.number) + ", ";
          throw UsageError("--case expects " + valid + "a list of them or all, got '" + std::string(n) + "'");
        }
        numbers.emplace_back(n);
      }
    for (const std::string& n : numbers) s.cases.push_back(dir + "/problem_case_" + n + ".yaml");
  }
  if (s.cases.empty()) throw UsageError("give case files CASE.yaml or --case LIST|all");
  if (const auto v = o.value("repeat")) s.repeat = parse_int("repeat", *v, 1, 1000);
  if (const auto v = o.value("backend"))
    for (const std::string_view name : split_list("backend", *v)) {
      if (name != "auto") try {
          (void)conv::parse_backend(name);
        } catch (const InvalidArgument& e) {
          throw UsageError(std::string("--backend: ") + user_message(e));
        }
      s.backends.emplace_back(name);
    }
  if (const auto p = o.value("precision")) {
    if (*p != "single" && *p != "double")
      throw UsageError("--precision expects single or double, got '" + std::string(*p) + "'");
    s.precision = parse_precision(*p);
  }
  return s;
}

/// The sweep of `problem` (its solver settings as given), written to `output`; returns its wall time.
double sweep(const io::Problem& problem, const std::string& output) {
  const std::string backend(conv::to_string(problem.solver.backend));
  io::ResultWriter writer = io::ResultWriter::create(
      output, problem.layout,
      io::run_info(problem, backend, to_string(problem.solver.precision), device_of(problem.solver.backend)));
  const auto start = std::chrono::steady_clock::now();
  // The units `run` makes for one worker (work_units.hpp: one wavelength each on the CPU, several on a GPU).
  for (const Unit& points : plan_units(problem, [](std::size_t) { return false; }, 1)) {
    const BatchSolve batch = solve_points(problem, points);
    physics::PhaseTimer timer;
    for (std::size_t j = 0; j < points.size(); ++j) writer.write(points[j], point_result(problem, batch, j));
    timer.lap(physics::Phase::writing);
    const double seconds = timer.times()[physics::Phase::writing];
    for (const std::span<const std::size_t> wavelength : split_by_batch(problem.layout, points))
      writer.record_writing(wavelength, seconds * double(wavelength.size()) / double(points.size()));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  writer.finish(true);
  return wall;
}

int run_bench_e2e(const Options& options) {
  const Settings s = parse_settings(options);
  const std::string output =
      (fs::temp_directory_path() / ("gratingsim-bench-e2e-" + std::to_string(::getpid()) + ".h5")).string();
  for (const std::string& path : s.cases) {
    io::Problem problem = io::load_problem(path);
    // As `run --precision`: complex64 raises a tolerance below its reach, with the warning run gives.
    if (const std::string warning = apply_precision(problem.solver, s.precision); !warning.empty())
      std::printf("%s: warning: %s\n", path.c_str(), warning.c_str());
    std::vector<conv::Backend> backends;
    for (const std::string& name : s.backends)
      backends.push_back(name == "auto" ? automatic_backend(problem) : conv::parse_backend(name));
    if (backends.empty())
      backends.push_back(problem.source.numerics.backend ? *problem.source.numerics.backend : automatic_backend(problem));
    for (const conv::Backend backend : backends) {
      problem.solver.backend = backend;
      std::printf("%s: backend %s, %s precision, on %s; %zu point(s), %zu wavelength batch(es)\n", path.c_str(),
                  std::string(conv::to_string(backend)).c_str(), std::string(to_string(problem.solver.precision)).c_str(),
                  device_of(backend).c_str(), problem.layout.points(), problem.layout.wavelength_nm.size());
      if (const std::string why = physics_unavailable(backend, problem.solver.precision, problem.solver.formulation);
          !why.empty()) {
        std::printf("  skipped: %s\n\n", why.c_str());
        continue;
      }
      // Call 1 pays the process's first uses (CUDA context, lazy module loading, first allocations, cuBLAS
      // and cuFFT handles and plans); later calls pay what an in-process caller (a fit's step, the Python
      // module) pays per call. The normal-field cache is emptied before each call, so every call builds its
      // geometry as a new one would.
      std::vector<double> walls;
      for (int call = 1; call <= s.repeat; ++call) {
        physics::clear_normal_field_cache();
        try {
          walls.push_back(sweep(problem, output));
        } catch (...) {  // the temporary file goes on every exit path, as --help says
          std::error_code ignored;
          fs::remove(io::partial_path(output), ignored);
          fs::remove(output, ignored);
          throw;
        }
        if (call == 1 || call == s.repeat) {
          if (s.repeat > 1) std::printf("call %d of %d:\n", call, s.repeat);
          std::printf("%s\n", format_phase_table(batch_phases(io::ResultReader(output)), walls.back()).c_str());
        }
        fs::remove(output);
        std::fflush(stdout);
      }
      if (s.repeat > 1) {
        std::vector<double> later(walls.begin() + 1, walls.end());
        std::sort(later.begin(), later.end());
        const std::size_t n = later.size();
        const double median = n % 2 ? later[n / 2] : 0.5 * (later[n / 2 - 1] + later[n / 2]);
        std::printf("walls (s):");
        for (const double w : walls) std::printf(" %.4f", w);
        std::printf("\nsteady state (calls 2-%d): median %.4f s, min %.4f s, max %.4f s\n\n", s.repeat, median,
                    later.front(), later.back());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

const Command gratingsim_bench_e2e{
    .name = "e2e",
    .summary = "a case's whole sweep end to end: time per phase (set-up, iterations, output) per wavelength batch",
    .usage =
        "gratingsim bench e2e [CASE.yaml ...] [--case LIST|all] [--configs DIR] [--backend LIST] "
        "[--precision single|double] [--repeat N]",
    .description =
        "Runs each case's whole sweep as 'gratingsim run' does (one batched solve per wavelength, every point "
        "written to a result file in the temporary directory, then removed) and prints the wall time of each "
        "phase per wavelength batch: structure (slicing, orders, shape functions and kernels), spectra+plans "
        "(memory check, convolution plan and kernel spectra, device: their upload), z-operator (Green "
        "coefficients, right-hand sides), uploads (device: the z-operator's), preconditioner, krylov (the "
        "iterations), far-field (one more convolution, efficiencies), writing (the result file). Device work "
        "is included where it is started: every set-up step waits for the device before it returns. Phases "
        "never overlap; their sum is at most the sweep's wall time, printed with it. With --repeat N each sweep runs N "
        "times in this process and its walls are printed, with the median, min and max of calls 2..N: call 1 pays the "
        "process's first uses (CUDA context, module loading, handles, plans), later calls what an in-process caller "
        "(a fit, the Python module) pays; the normal-field cache is emptied before every call.",
    .options = options_spec,
    .max_positional = 64,
    .positional = "CASE.yaml",
    .run = run_bench_e2e};

}  // namespace gratingsim::app
