// gratingsim validate: every case solved with every backend and precision the solver can run here,
// compared with a complex128 reference solve: the largest differences in R, T and Jones per case.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "app/progress.hpp"
#include "app/solving.hpp"
#include "app/table.hpp"
#include "convolution/devices.hpp"
#include "io/problem.hpp"

namespace gratingsim::app {
namespace {

using conv::Backend;

/// The built-in set: small enough for a few seconds on a laptop CPU, covering the solver's paths.
struct BuiltinCase {
  const char* name;
  const char* yaml;
};
constexpr BuiltinCase builtin_cases[] = {
    {"1d-lamellar", R"(description: 1D lamellar grating, Si3N4 lines on SiO2, normal and oblique incidence
wavelength: [500, 650]
incidence: {theta_deg: [0, 25]}
lattice: {period_x: 600}
substrate: SiO2
layers:
  - {name: lines, thickness: 150, slices: 4, shapes: [{type: line, material: Si3N4, width: 250}]}
numerics: {harmonics: 6}
)"},
    {"crossed",
     R"(description: crossed grating, rotated elliptical Si3N4 pillars and a square post on a rectangular lattice, over a SiO2 film on glass
wavelength: 600
incidence: {theta_deg: 20, phi_deg: 35}
lattice: {period_x: 500, period_y: 420}
materials: {glass: {n: 1.5}}
substrate: glass
layers:
  - {name: pillars, thickness: 120, slices: 3,
     shapes: [{type: ellipse, material: Si3N4, diameter_x: 260, diameter_y: 150, rotation_deg: 30, center: [-60, 20]},
              {type: rectangle, material: SiO2, width_x: 80, width_y: 80, center: [150, -120]}]}
  - {name: film, thickness: 40, slices: 1, material: SiO2}
numerics: {harmonics: [2, 2]}
)"},
    {"conical", R"(description: conical incidence on a 1D grating of sloped resist lines over a nitride film (phi not 0)
wavelength: 550
incidence: {theta_deg: 40, phi_deg: [30, 70]}
lattice: {period_x: 450}
materials: {resist: {n: 1.62, k: 0}}
substrate: SiO2
layers:
  - {name: lines, thickness: 180, slices: 4,
     shapes: [{type: trapezoid, material: resist, bottom_width: 220, sidewall_angle_deg: 84}]}
  - {name: nitride, thickness: 60, slices: 2, material: Si3N4}
numerics: {harmonics: 5}
)"},
    {"lossy", R"(description: lossy materials, Al lines on an absorbing Si substrate (metal and absorbing substrate)
wavelength: 633
incidence: {theta_deg: 30}
lattice: {period_x: 300}
substrate: Si
layers:
  - {name: wires, thickness: 60, slices: 3, shapes: [{type: line, material: Al, width: 100}]}
numerics: {harmonics: 5}
)"},
};

/// Comparison tolerances and the solver tolerances that keep solver error well below them.
constexpr double comparison_tolerance(Precision p) { return p == Precision::single ? 1e-5 : 1e-10; }
constexpr double solver_tolerance(Precision p) { return p == Precision::single ? 1e-6 : 1e-12; }
constexpr int minimum_iterations_allowed = 2000;

/// cpu-direct is the reference where its products are affordable: batch · (N1·N2)² complex
/// multiply-adds per product (about a second on a few cores at the limit).
constexpr double direct_limit = 1e9;
double direct_multiply_adds(const conv::Problem& g) {
  return double(g.input_blocks()) * double(g.field_size()) * double(g.field_size());
}

struct Subject {
  std::string name;
  io::Problem problem;
};

/// One backend × precision solve of every point of a case.
struct Solve {
  Backend backend{};
  Precision precision{};
  std::vector<physics::IncidenceResult> points;  ///< in point order
  double seconds = 0;
  int iterations = 0;  ///< the most of any solve
  bool converged = true;
};

Solve solve_case(io::Problem problem, Backend backend, Precision precision) {
  problem.solver.backend = backend;
  problem.solver.precision = precision;
  problem.solver.tolerance = solver_tolerance(precision);
  problem.solver.max_iterations = std::max(problem.solver.max_iterations, minimum_iterations_allowed);
  problem.solver.keep_fields = false;
  Solve s{backend, precision, {}, 0, 0, true};
  for (std::size_t b = 0; b < problem.layout.batches(); ++b) {
    const std::vector<std::size_t> points = io::points_of_batch(problem, b);
    BatchSolve batch = solve_points(problem, points);
    s.seconds += batch.seconds;
    for (auto& incidence : batch.result.incidences) {
      for (const auto& solve : incidence.solves)
        for (const auto& stats : solve) {
          s.iterations = std::max(s.iterations, stats.iterations);
          s.converged = s.converged && stats.converged;
        }
      s.points.push_back(std::move(incidence));
    }
  }
  return s;
}

struct Differences {
  double r = 0, t = 0, jones = 0;  ///< relative to the reference's largest efficiency / |Jones|
  bool transmits = false;          ///< some order is transmitted (not when every point's substrate absorbs)
  std::string problem;             ///< an order missing from one of the solves
};

Differences compare(const Solve& reference, const Solve& other) {
  double efficiency_scale = 0, jones_scale = 0;
  const auto entries = [](const physics::Jones& j) {
    return std::array<physics::Complex, 4>{j.s_from_s, j.s_from_p, j.p_from_s, j.p_from_p};
  };
  for (const auto& point : reference.points)
    for (const auto& o : point.orders) {
      for (int pol = 0; pol < 2; ++pol) efficiency_scale = std::max({efficiency_scale, o.R[pol], o.T[pol]});
      for (const auto& j : {o.reflection, o.transmission})
        for (const auto& e : entries(j)) jones_scale = std::max(jones_scale, std::abs(e));
    }
  Differences d;
  const auto worse = [](double& worst, double v) { worst = std::isnan(v) ? INFINITY : std::max(worst, v); };
  for (std::size_t p = 0; p < reference.points.size(); ++p) {
    const auto& a = reference.points[p].orders;
    const auto& b = other.points[p].orders;
    if (a.size() != b.size()) d.problem = "point " + std::to_string(p) + ": propagating orders differ";
    for (const auto& oa : a) {
      const auto ob = std::find_if(b.begin(), b.end(), [&](const auto& o) { return o.m1 == oa.m1 && o.m2 == oa.m2; });
      if (ob == b.end()) {
        d.problem = "point " + std::to_string(p) + ": order (" + std::to_string(oa.m1) + ", " + std::to_string(oa.m2) +
                    ") missing";
        continue;
      }
      d.transmits = d.transmits || oa.transmitted;
      for (int pol = 0; pol < 2; ++pol) {
        worse(d.r, std::abs(oa.R[pol] - ob->R[pol]) / efficiency_scale);
        worse(d.t, std::abs(oa.T[pol] - ob->T[pol]) / efficiency_scale);
      }
      for (int k = 0; k < 2; ++k) {
        const auto ea = entries(k == 0 ? oa.reflection : oa.transmission);
        const auto eb = entries(k == 0 ? ob->reflection : ob->transmission);
        for (std::size_t i = 0; i < 4; ++i) worse(d.jones, std::abs(ea[i] - eb[i]) / jones_scale);
      }
    }
  }
  return d;
}

std::string scientific(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2e", v);
  return buffer;
}

/// The table of a case: one row per backend × precision; numbers right-aligned, the result last.
const std::vector<Column> table = [] {
  std::vector<Column> columns{{"backend", 10, true}, {"precision", 9, true}, {"max ΔR", 9},
                              {"max ΔT", 9},         {"max ΔJones", 9},      {"tolerance", 9},
                              {"iter", 5},           {"time/s", 7},          {"result", 0, true}};
  widen(columns);
  return columns;
}();

void print_row(Backend backend, Precision precision, const Solve* s, const Differences* d, const std::string& result) {
  std::vector<std::string> cells{std::string(conv::to_string(backend)), std::string(to_string(precision))};
  if (d) {
    cells.insert(cells.end(), {scientific(d->r), d->transmits ? scientific(d->t) : "n/a", scientific(d->jones),
                               scientific(comparison_tolerance(precision))});
  } else {
    cells.insert(cells.end(), {s ? "reference" : "", "", "", ""});
  }
  if (s) {
    char time[32];
    std::snprintf(time, sizeof time, "%.2f", s->seconds);
    cells.insert(cells.end(), {std::to_string(s->iterations), time});
  } else {
    cells.insert(cells.end(), {"", ""});
  }
  cells.push_back(result);
  std::printf("%s\n", format_row(table, cells).c_str());
  std::fflush(stdout);
}

/// Validates one case; returns the number of failed comparisons.
int validate_case(const Subject& subject, const std::vector<std::pair<Backend, Precision>>& runnable) {
  const io::Problem& problem = subject.problem;
  const conv::Problem g = convolution_geometry(problem);
  const bool direct_affordable = direct_multiply_adds(g) <= direct_limit;
  const Backend reference_backend = direct_affordable ? Backend::cpu_direct : Backend::cpu_fftw;
  std::printf("\n%s: %zu point(s), harmonics M1 = %d, M2 = %d, %d slices, %d convolutions per product%s\n",
              subject.name.c_str(), problem.layout.points(), problem.solver.m1, problem.solver.m2, g.slices,
              int(g.input_blocks()), problem.source.description.empty() ? "" : ("\n  " + problem.source.description).c_str());
  if (!direct_affordable)
    std::printf("  reference: cpu-fftw in double (cpu-direct's products would exceed %.0e multiply-adds): the backends "
                "are compared with it, but nothing independent checks cpu-fftw itself here\n",
                double(direct_limit));
  if (problem.source.numerics.accuracy)
    std::printf("  accuracy on demand: compared at the ladder's first rung (M1 = %d, M2 = %d), not the settings run "
                "would reach\n",
                problem.solver.m1, problem.solver.m2);
  std::printf("%s\n", format_header(table).c_str());

  const auto has = [&](Backend b, Precision p) {
    return std::find(runnable.begin(), runnable.end(), std::pair{b, p}) != runnable.end();
  };
  if (!has(reference_backend, Precision::double_)) {
    print_row(reference_backend, Precision::double_, nullptr, nullptr, "FAILED: reference unavailable");
    return 1;
  }
  Solve reference;
  try {
    reference = solve_case(problem, reference_backend, Precision::double_);
  } catch (const Error& e) {
    print_row(reference_backend, Precision::double_, nullptr, nullptr, "FAILED: " + user_message(e));
    return 1;
  }
  int failures = reference.converged ? 0 : 1;
  print_row(reference_backend, Precision::double_, &reference, nullptr,
            reference.converged ? "ok" : "FAILED: did not converge");

  for (const auto& [backend, precision] : runnable) {
    if (backend == reference_backend && precision == Precision::double_) continue;
    if (backend == Backend::cpu_direct && !direct_affordable) {
      print_row(backend, precision, nullptr, nullptr,
                "skipped: " + scientific(direct_multiply_adds(g)) +
                    " multiply-adds per product (cpu-direct is O(N1²N2²) per block)");
      continue;
    }
    try {
      const Solve s = solve_case(problem, backend, precision);
      const Differences d = compare(reference, s);
      const double tolerance = comparison_tolerance(precision);
      std::string result = "ok";
      if (!s.converged)
        result = "FAILED: did not converge";
      else if (!d.problem.empty())
        result = "FAILED: " + d.problem;
      else if (!(std::max({d.r, d.t, d.jones}) <= tolerance))
        result = "FAILED: beyond tolerance";
      failures += result == "ok" ? 0 : 1;
      print_row(backend, precision, &s, &d, result);
    } catch (const Unsupported& e) {
      print_row(backend, precision, nullptr, nullptr, "declined: " + user_message(e));
    } catch (const Error& e) {
      ++failures;
      print_row(backend, precision, nullptr, nullptr, "FAILED: " + user_message(e));
    }
  }
  return failures;
}

int run_validate(const Options& options) {
  // Every case is read and checked before the first solve.
  std::vector<Subject> subjects;
  if (options.positional().empty()) {
    for (const auto& c : builtin_cases)
      subjects.push_back({std::string("built-in ") + c.name, io::make_problem(io::parse_case(c.yaml, c.name))});
  } else {
    for (std::string_view path : options.positional())
      subjects.push_back({std::string(path), io::load_problem(std::string(path))});
  }

  std::printf("gratingsim validate: %zu case(s)%s\n", subjects.size(),
              options.positional().empty() ? " (the built-in set)" : "");
  const auto gpu = conv::current_cuda_device();
  if (gpu)
    std::printf("GPU: %s\n", gpu->name.c_str());
  else
    std::printf("GPU: none (%s): checking the CPU backends against each other\n", conv::cuda_report().problem.c_str());
  std::printf("CPU: %s\n", conv::describe(conv::host_cpu()).c_str());

  std::vector<std::pair<Backend, Precision>> runnable;
  std::vector<std::string> unavailable;
  int failures = 0;
  for (Backend b : conv::all_backends) {
    std::string why;
    for (Precision p : {Precision::double_, Precision::single}) {
      std::string reason;
      try {
        reason = physics_unavailable(b, p);
      } catch (const Error& e) {  // the backend is there but fails on a one-slice slab
        std::printf("FAILED: %s (%s) on a one-slice slab: %s\n", std::string(conv::to_string(b)).c_str(),
                    std::string(to_string(p)).c_str(), user_message(e).c_str());
        ++failures;
        continue;
      }
      if (reason.empty())
        runnable.emplace_back(b, p);
      else
        why = reason;
    }
    if (!why.empty()) unavailable.push_back(std::string(conv::to_string(b)) + ": " + why);
  }
  for (const std::string& u : unavailable) std::printf("not compared: %s\n", u.c_str());
  std::printf(
      "differences: largest |ΔR|, |ΔT| over every point, order and polarisation / the case's largest "
      "efficiency; largest |ΔJones| / its largest |Jones|; tolerance 1e-10 (double), 1e-5 (single)\n");

  for (const Subject& subject : subjects) failures += validate_case(subject, runnable);
  if (failures) {
    std::printf("\nvalidate: %d comparison(s) FAILED\n", failures);
    return 1;
  }
  std::printf("\nvalidate: every comparison within tolerance\n");
  return 0;
}

}  // namespace

const Command gratingsim_validate{
    .name = "validate",
    .summary = "compare every backend and precision with a reference on a built-in set or given cases",
    .usage = "gratingsim validate [CASE.yaml ...]",
    .description =
        "Solves each case with every convolution backend the solver can run here (cpu-direct, cpu-fftw, and the "
        "GPU backends where a device exists and the solver supports them) in double and single precision, and "
        "compares each solve with a double-precision reference (cpu-direct where its O(N1²N2²) products are "
        "affordable, else cpu-fftw): the largest differences in R and T over every point, order and polarisation "
        "relative to the case's largest efficiency, and in the Jones amplitudes relative to its largest |Jones|, "
        "must stay within 1e-10 (double) and 1e-5 (single). Solves run to a relative residual of 1e-12 (double) "
        "or 1e-6 (single), without fields. Without a GPU it says so and checks the CPU backends against each "
        "other. Without arguments it runs a built-in set: a 1D grating, a crossed grating, conical incidence and "
        "lossy materials. Exit status: 0 every comparison within tolerance; 1 a disagreement, an unconverged "
        "solve or an error; 2 a wrong command line.",
    .max_positional = std::size_t(-1),
    .positional = "CASE.yaml",
    .run = run_validate};

}  // namespace gratingsim::app
