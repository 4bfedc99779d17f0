// gratingsim run: solves every sweep point of a case file and writes the result file of io/SCHEMA.md,
// point by point (OUT.h5.partial, renamed to OUT.h5 when complete), then prints a summary. Launched
// by mpirun, the ranks share the sweep (distributed_sweep.hpp) and rank 0 writes the one file.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <complex>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "app/cli.hpp"
#include "app/commands.hpp"
#include "app/distributed_sweep.hpp"
#include "app/phases.hpp"
#include "app/progress.hpp"
#include "app/ranks.hpp"
#include "app/solving.hpp"
#include "app/table.hpp"
#include "convolution/devices.hpp"
#include "io/problem.hpp"
#include "io/results.hpp"

namespace gratingsim::app {
namespace {

namespace fs = std::filesystem;

/// Exit status of a run that wrote every point but where some solve stopped above its tolerance.
constexpr int exit_unconverged = 3;

/// The smallest relative residual the solver accepts in single precision (physics::solve).
constexpr double single_tolerance_floor = 1e-6;

/// Sweeps of more points show every k-th point in the summary (about summary_sample of them) and every
/// unconverged one.
constexpr std::size_t summary_rows = 40, summary_sample = 20;

// The last two options are for the tests only and not shown in the help.
constexpr OptionSpec run_options[] = {
    {"output", "OUT.h5", "the result file (default: the case file's name with .h5, next to it)", 'o'},
    {"backend", "NAME|auto",
     "convolution backend: cpu-direct, cpu-fftw, gpu-cufft, gpu-cufft-callbacks, gpu-fused, gpu-direct or auto "
     "(default: the case's numerics.backend)"},
    {"precision", "single|double",
     "arithmetic precision (default: the case's numerics.precision); in single precision a solver tolerance "
     "below 1e-6 is raised to 1e-6, with a warning"},
    {"resume", "",
     "continue OUT.h5.partial, left by an interrupted run of the same case: its finished points are kept, not "
     "recomputed (without a partial file: a new run)"},
    {"overwrite", "", "replace an existing complete OUT.h5 (without it, an existing OUT.h5 is never replaced)"},
    {"quiet", "", "no progress line, no summary (warnings and errors still go to stderr)"},
    {"help", "", "show this help"},
    {"stop-after", "N", "stop with status 1 after writing N points, leaving OUT.h5.partial (tests)"},
    {"fail-on-rank", "R", "MPI rank R fails its first unit of work (tests)"},
};
constexpr std::size_t shown_options = std::size(run_options) - 2;

struct Settings {
  std::string case_path, output;
  std::optional<std::string_view> backend;  ///< as given: a backend's name or "auto"
  std::optional<conv::Precision> precision;
  bool resume = false, quiet = false, overwrite = false;
  std::optional<std::size_t> stop_after;
  std::optional<int> fail_on_rank;
};

Settings parse_settings(const Options& o) {
  Settings s;
  if (o.positional().empty()) throw UsageError("missing the case file CASE.yaml");
  s.case_path = std::string(o.positional()[0]);
  s.output =
      o.value("output") ? std::string(*o.value("output")) : fs::path(s.case_path).replace_extension(".h5").string();
  if (s.output.empty()) throw UsageError("--output expects a file name");
  s.backend = o.value("backend");
  if (s.backend && *s.backend != "auto") {
    try {
      (void)conv::parse_backend(*s.backend);
    } catch (const InvalidArgument&) {
      throw UsageError("--backend: unknown backend '" + std::string(*s.backend) +
                       "' (expected cpu-direct, cpu-fftw, gpu-cufft, gpu-cufft-callbacks, gpu-fused, gpu-direct or "
                       "auto)");
    }
  }
  if (const auto p = o.value("precision")) {
    if (*p != "single" && *p != "double")
      throw UsageError("--precision expects single or double, got '" + std::string(*p) + "'");
    s.precision = conv::parse_precision(*p);
  }
  s.resume = o.flag("resume");
  s.quiet = o.flag("quiet");
  s.overwrite = o.flag("overwrite");
  if (const auto v = o.value("stop-after")) s.stop_after = std::size_t(parse_int("stop-after", *v, 1, 1 << 30));
  if (const auto v = o.value("fail-on-rank")) s.fail_on_rank = parse_int("fail-on-rank", *v, 0, 1 << 24);
  return s;
}

/// Refuses, before anything is solved or written, an output that would destroy a file: OUT.h5,
/// OUT.h5.partial or OUT.h5.lock being a file the case reads (the case file, a material table;
/// compared by device and inode, so any spelling or link is caught), a directory, or anything not a
/// regular file (device, FIFO, socket); an existing OUT.h5 without --overwrite; a missing output
/// directory.
void check_output_path(const Settings& s, const std::vector<std::string>& inputs) {
  const auto refuse = [&](const std::string& why) { throw Error("refusing output " + s.output + ": " + why); };
  const std::string partial = io::partial_path(s.output);
  for (const std::string& path : {s.output, partial, io::lock_path(s.output)}) {
    struct stat target {};
    if (::stat(path.c_str(), &target) != 0) continue;  // absent: fine
    for (const std::string& input : inputs) {
      struct stat in {};
      if (::stat(input.c_str(), &in) == 0 && in.st_dev == target.st_dev && in.st_ino == target.st_ino)
        refuse(path + " is " + input + ", a file the case reads; choose another -o");
    }
    if (S_ISDIR(target.st_mode)) refuse(path + " is a directory; give a file name, e.g. -o DIR/out.h5");
    if (!S_ISREG(target.st_mode))
      refuse(path + " is not a regular file (a device, FIFO or socket); it is left untouched");
  }
  if (fs::exists(s.output) && !s.overwrite)
    refuse(s.output + " already exists (a finished result is never replaced silently); --overwrite replaces it");
  const fs::path directory = fs::path(s.output).parent_path().empty() ? fs::path(".") : fs::path(s.output).parent_path();
  if (!fs::is_directory(directory)) refuse("the directory " + directory.string() + " does not exist");
}

/// The backend named on the command line, else in the case; for `auto`, the one the partial file
/// being resumed was written with (a resume must not change it), else automatic_backend().
conv::Backend choose_backend(const Settings& s, const io::Problem& problem, bool resuming) {
  std::optional<conv::Backend> backend = problem.source.numerics.backend;
  if (s.backend) backend = *s.backend == "auto" ? std::nullopt : std::optional(conv::parse_backend(*s.backend));
  if (backend) return *backend;
  if (resuming) return conv::parse_backend(io::ResultReader(io::partial_path(s.output)).info().backend);
  return automatic_backend(problem);
}

std::string number(const char* format, double value) {
  if (std::isnan(value)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

std::string describe_axis(const std::vector<double>& values, const char* unit) {
  if (values.size() == 1) return number("%g", values[0]) + unit;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return number("%g", *lo) + "–" + number("%g", *hi) + unit + " (" + std::to_string(values.size()) + ")";
}

/// Whether the substrate absorbs at `wavelength_nm` (ε not real and positive: physics'
/// FloquetOrders::substrate_lossless is false). No order propagates down into it then: transmitted
/// efficiencies are undefined (io/SCHEMA.md: results/T 0, results/transmitted_direction NaN).
bool substrate_absorbs(const io::Case& c, double wavelength_nm) {
  const std::complex<double> epsilon = c.material(c.substrate).permittivity(wavelength_nm);
  return !(epsilon.imag() == 0 && epsilon.real() > 0);
}

/// One note, before the sweep, in place of physics' warning per wavelength that the substrate absorbs
/// (Warnings drops those).
void note_absorbing_substrate(const io::Case& c) {
  std::size_t absorbing = 0;
  for (const double w : c.wavelength_nm) absorbing += substrate_absorbs(c, w) ? 1 : 0;
  if (absorbing == 0) return;
  std::cerr << "gratingsim run: note: the substrate (" << c.substrate << ") absorbs at "
            << (absorbing == c.wavelength_nm.size() ? std::string("every wavelength")
                                                    : std::to_string(absorbing) + " of the " +
                                                          std::to_string(c.wavelength_nm.size()) + " wavelengths")
            << ": transmitted efficiencies are undefined there (shown as n/a; the file has results/T = 0 and "
               "results/transmitted_direction NaN), and the absorption 1 - ΣR includes the substrate\n";
}

/// What the summary needs of a stored point.
struct PointSummary {
  std::size_t point = 0;
  io::PointResult result;
  bool converged = true;
};

/// With accuracy on demand three more: the harmonics (M1, or M1×M2) and slices the point used, and
/// its estimated error ("NO" after it where the target was not reached).
std::vector<Column> summary_columns(bool accuracy) {
  std::vector<Column> columns{{"λ/nm"},     {"θ/°"},       {"φ/°"},  {"pol", 0, true}, {"orders"},
                              {"R0"},       {"ΣR"},        {"ΣT"},   {"absorbed"},     {"|1-ΣR-ΣT|"},
                              {"iter"},     {"residual"},  {"conv", 0, true}, {"time/s"}, {"Ψ/°"}, {"Δ/°"}};
  if (accuracy) columns.insert(columns.end(), {{"M"}, {"slices"}, {"error est", 0, true}});
  return columns;
}

/// The summary rows of a point: one per incident polarisation (Ψ, Δ on the first).
/// ΣT is "n/a" where the substrate absorbs (`absorbing`).
void add_point_rows(const io::ResultLayout& l, const PointSummary& p, bool absorbing,
                    std::vector<std::vector<std::string>>& rows) {
  const std::size_t np = std::size_t(l.polarizations()), no = l.orders_count();
  const std::size_t nphi = l.phi_deg.size(), ntheta = l.theta_deg.size();
  const double wavelength = l.wavelength_nm[p.point / (ntheta * nphi)];
  const double theta = l.theta_deg[(p.point / nphi) % ntheta], phi = l.phi_deg[p.point % nphi];
  const auto zeroth = std::find(l.orders.begin(), l.orders.end(), std::array<int, 2>{0, 0});
  std::size_t propagating = 0;
  for (std::size_t o = 0; o < no; ++o)
    if (!std::isnan(p.result.reflected_direction[3 * o]) || !std::isnan(p.result.transmitted_direction[3 * o]))
      ++propagating;
  const io::PointResult& r = p.result;
  for (std::size_t i = 0; i < np; ++i) {
    const char* pol = l.polarization == io::Polarization::both ? (i == 0 ? "s" : "p")
                      : l.polarization == io::Polarization::s  ? "s"
                                                               : "p";
    double total_r = 0, total_t = 0;
    for (std::size_t o = 0; o < no; ++o) {
      total_r += r.reflectance[i * no + o];
      total_t += r.transmittance[i * no + o];
    }
    const double r0 = zeroth == l.orders.end() ? NAN : r.reflectance[i * no + std::size_t(zeroth - l.orders.begin())];
    rows.push_back({number("%.2f", wavelength), number("%.2f", theta), number("%.2f", phi), pol,
                    std::to_string(propagating), number("%.5f", r0), number("%.5f", total_r),
                    absorbing ? "n/a" : number("%.5f", total_t),
                    number("%.5f", r.absorption[i]), number("%.1e", r.energy_balance_error[i]),
                    std::to_string(r.iterations[i]), number("%.1e", r.residual[i]), r.converged[i] ? "yes" : "NO",
                    number("%.2f", r.solve_seconds), i == 0 ? number("%.3f", r.psi_deg) : "",
                    i == 0 ? number("%.3f", r.delta_deg) : ""});
    if (l.accuracy && i == 0)
      rows.back().insert(rows.back().end(),
                         {std::to_string(r.used_harmonics[0]) +
                              (r.used_harmonics[1] > 0 ? "×" + std::to_string(r.used_harmonics[1]) : ""),
                          std::to_string(r.used_slices),
                          number("%.1e", r.estimated_error) + (r.target_reached ? "" : " NO")});
    else if (l.accuracy)
      rows.back().insert(rows.back().end(), {"", "", ""});
  }
}

/// Efficiencies of every propagating order: for a single-point run (T "n/a" where the substrate absorbs).
void print_orders(const io::ResultLayout& l, const io::PointResult& r, bool absorbing) {
  const std::size_t np = std::size_t(l.polarizations()), no = l.orders_count();
  std::vector<Column> columns{{"m1"}, {"m2"}};
  for (std::size_t i = 0; i < np; ++i) {
    const std::string pol = l.polarization == io::Polarization::p || i == 1 ? "p" : "s";
    columns.push_back({"R " + pol});
    columns.push_back({"T " + pol});
  }
  std::vector<std::vector<std::string>> rows;
  for (std::size_t o = 0; o < no; ++o) {
    if (std::isnan(r.reflected_direction[3 * o]) && std::isnan(r.transmitted_direction[3 * o])) continue;
    std::vector<std::string> row{std::to_string(l.orders[o][0]), std::to_string(l.orders[o][1])};
    for (std::size_t i = 0; i < np; ++i) {
      // "-": the order is evanescent on that side.
      row.push_back(std::isnan(r.reflected_direction[3 * o]) ? "-" : number("%.6f", r.reflectance[i * no + o]));
      row.push_back(absorbing                                   ? "n/a"
                    : std::isnan(r.transmitted_direction[3 * o]) ? "-"
                                                                 : number("%.6f", r.transmittance[i * no + o]));
    }
    rows.push_back(std::move(row));
  }
  widen(columns, rows);
  std::printf("\n  propagating orders (efficiency per unit incident power):\n%s\n", format_header(columns).c_str());
  for (const auto& row : rows) std::printf("%s\n", format_row(columns, row).c_str());
}

/// Timing of a run for the summary: from the start of the command, and of the sweep alone (from the
/// first unit handed out to the last point written), whose points per second is the throughput.
struct RunTimes {
  double total = 0, sweep = 0;
  int ranks = 1;
};

/// What accuracy on demand did over the sweep (io/SCHEMA.md §1.7.1), for the summary: the range of
/// settings used, the largest estimated error and change of Ψ, Δ, and the points short of the target.
struct AccuracySummary {
  int least_m1 = std::numeric_limits<int>::max(), most_m1 = 0, least_m2 = std::numeric_limits<int>::max(), most_m2 = 0;
  int least_slices = std::numeric_limits<int>::max(), most_slices = 0;
  double worst_error = 0, worst_psi = 0, worst_delta = 0;
  std::size_t short_of_target = 0;

  void add(const io::PointResult& r) {
    least_m1 = std::min(least_m1, r.used_harmonics[0]), most_m1 = std::max(most_m1, r.used_harmonics[0]);
    least_m2 = std::min(least_m2, r.used_harmonics[1]), most_m2 = std::max(most_m2, r.used_harmonics[1]);
    least_slices = std::min(least_slices, r.used_slices), most_slices = std::max(most_slices, r.used_slices);
    // NaN (no second rung) counts as the worst: nothing was estimated.
    worst_error = std::isnan(r.estimated_error) || std::isnan(worst_error) ? NAN : std::max(worst_error, r.estimated_error);
    if (!std::isnan(r.psi_change_deg)) worst_psi = std::max(worst_psi, r.psi_change_deg);
    if (!std::isnan(r.delta_change_deg)) worst_delta = std::max(worst_delta, r.delta_change_deg);
    if (!r.target_reached) ++short_of_target;
  }
};

std::string range(int least, int most) {
  return least == most ? std::to_string(least) : std::to_string(least) + "–" + std::to_string(most);
}

/// The summary, from the finished file (so that points of an earlier, resumed run are included).
/// Returns whether every solve converged and, with accuracy on demand, every point reached the target.
bool print_summary(const Settings& s, const io::Problem& problem, std::size_t solved, const RunTimes& times) {
  const io::ResultReader reader(s.output);
  const io::ResultLayout& l = reader.layout();
  const io::RunInfo& info = reader.info();
  std::vector<PointSummary> points;
  std::size_t unconverged_solves = 0;
  double worst_balance = NAN;
  AccuracySummary accuracy;
  for (std::size_t point = 0; point < l.points(); ++point) {
    PointSummary p{point, reader.read(point), true};
    if (l.accuracy) {
      accuracy.add(p.result);
      if (!p.result.target_reached) p.converged = false;  // shown like an unconverged solve
    }
    for (std::size_t i = 0; i < p.result.converged.size(); ++i) {
      if (!p.result.converged[i]) ++unconverged_solves, p.converged = false;
      const double e = p.result.energy_balance_error[i];
      if (!std::isnan(e) && !(e <= worst_balance)) worst_balance = e;
    }
    points.push_back(std::move(p));
  }

  std::printf("gratingsim run: %s → %s\n", s.case_path.c_str(), s.output.c_str());
  if (!problem.source.description.empty()) std::printf("  %s\n", problem.source.description.c_str());
  std::printf("  sweep: λ %s, θ %s, φ %s; %zu point(s), polarisation %s; %zu orders stored\n",
              describe_axis(l.wavelength_nm, " nm").c_str(), describe_axis(l.theta_deg, "°").c_str(),
              describe_axis(l.phi_deg, "°").c_str(), l.points(), std::string(io::to_string(l.polarization)).c_str(),
              l.orders_count());
  if (l.accuracy) {
    std::printf("  harmonics M1 = %s, M2 = %s%s; %s slices%s%s; backend %s, %s precision, on %s\n",
                range(accuracy.least_m1, accuracy.most_m1).c_str(), range(accuracy.least_m2, accuracy.most_m2).c_str(),
                l.accuracy->harmonics ? " (auto)" : "", range(accuracy.least_slices, accuracy.most_slices).c_str(),
                l.accuracy->slices ? " (auto)" : "", problem.solver.richardson ? " (and twice as many: Richardson)" : "",
                info.backend.c_str(), info.precision.c_str(), info.device.c_str());
  } else {
    std::printf("  harmonics M1 = %d, M2 = %d; %d slices%s; backend %s, %s precision, on %s\n", problem.solver.m1,
                problem.solver.m2, problem.source.total_slices(),
                problem.solver.richardson ? " (and twice as many: Richardson)" : "", info.backend.c_str(),
                info.precision.c_str(), info.device.c_str());
  }
  std::printf("  %zu point(s) solved in %s", solved, format_duration(times.total).c_str());
  if (times.ranks > 1) std::printf(" by %d MPI ranks", times.ranks);
  if (solved > 0 && times.sweep > 0)
    std::printf(" (the sweep itself %.2f s: %.3g points/s)", times.sweep, double(solved) / times.sweep);
  if (solved < l.points()) std::printf(", %zu kept from the resumed partial file", l.points() - solved);
  std::printf("\n\n");

  const std::size_t stride = points.size() <= summary_rows ? 1 : (points.size() + summary_sample - 1) / summary_sample;
  std::vector<std::vector<std::string>> rows;
  for (const PointSummary& p : points)
    if (p.point % stride == 0 || p.point + 1 == points.size() || !p.converged)
      add_point_rows(l, p, substrate_absorbs(problem.source, l.wavelength_nm[p.point / (l.theta_deg.size() * l.phi_deg.size())]),
                     rows);
  std::vector<Column> columns = summary_columns(l.accuracy.has_value());
  widen(columns, rows);
  std::printf("%s\n", format_header(columns).c_str());
  for (const auto& row : rows) std::printf("%s\n", format_row(columns, row).c_str());
  if (stride > 1)
    std::printf("  (%zu points: one in %zu shown, the last, and every unconverged one; all are in %s)\n", points.size(),
                stride, s.output.c_str());
  bool any_absorbing = false;
  for (const double w : l.wavelength_nm) any_absorbing = any_absorbing || substrate_absorbs(problem.source, w);
  if (points.size() == 1) print_orders(l, points[0].result, any_absorbing);

  std::printf(
      "\n  orders: propagating at the point; R0: order (0, 0); absorbed: 1 - ΣR - ΣT (1 - ΣR when the substrate\n"
      "  absorbs); |1-ΣR-ΣT|: lossless structures only; time: the wavelength's batch\n");
  if (any_absorbing)
    std::printf("  ΣT, T: n/a where the substrate absorbs (no order propagates in it: transmission is undefined)\n");
  std::printf("\n  time per phase of each wavelength batch, s (solver/phase_seconds; sweep wall time %.3f s):\n%s\n",
              times.sweep, format_phase_table(batch_phases(reader), times.sweep).c_str());
  std::printf("  energy balance: %s\n", std::isnan(worst_balance)
                                            ? "not checked (a material absorbs)"
                                            : ("largest |1-ΣR-ΣT| " + number("%.2e", worst_balance)).c_str());
  if (l.accuracy) {
    const io::AccuracyTarget& a = *l.accuracy;
    std::string ladder;
    if (a.harmonics) ladder = "harmonics raised (M ×1.5 per rung, up to " + std::to_string(a.max_harmonics) + ")";
    if (a.slices)
      ladder += (a.harmonics ? ", then slices" : "slices") + std::string(" raised (doubled per rung, up to ") +
                std::to_string(a.max_slices) + " in all)";
    std::printf("  accuracy: target %g on every efficiency, %s; largest estimated error %s", a.target_error,
                ladder.c_str(), number("%.2e", accuracy.worst_error).c_str());
    if (l.polarizations() == 2)
      std::printf(", Ψ changed by at most %s°, Δ by %s°", number("%.2g", accuracy.worst_psi).c_str(),
                  number("%.2g", accuracy.worst_delta).c_str());
    std::printf(" (the change between the last two rungs: io/SCHEMA.md §1.7.1)\n");
    if (accuracy.short_of_target > 0)
      std::printf("  accuracy: %zu point(s) did NOT reach the target within the ladder's maximum ('NO' after the "
                  "error estimate above, stored with accuracy/reached = 0); exit status %d\n",
                  accuracy.short_of_target, exit_unconverged);
  }
  if (unconverged_solves == 0) {
    std::printf("  solver: every solve converged\n");
    return accuracy.short_of_target == 0;
  }
  std::printf(
      "  solver: %zu solve(s) did NOT converge (conv 'NO' above, stored with solver/converged = 0); "
      "exit status %d\n",
      unconverged_solves, exit_unconverged);
  return false;
}

/// Whether any solve of the finished file stopped above its tolerance, or (accuracy on demand) any
/// point fell short of the target (for --quiet, which prints no summary).
bool any_unconverged(const std::string& output) {
  const io::ResultReader reader(output);
  for (std::size_t point = 0; point < reader.layout().points(); ++point) {
    const io::PointResult r = reader.read(point);
    if (reader.layout().accuracy && !r.target_reached) return true;
    for (std::uint8_t c : r.converged)
      if (!c) return true;
  }
  return false;
}

/// Physics warnings on stderr, each kind once: a warning repeated with other numbers (the same
/// anomaly at the next wavelength) is counted, not printed again.
class Warnings {
 public:
  void report(const std::string& warning) {
    if (warning.starts_with("substrate absorbs at")) return;  // said once before the sweep (note_absorbing_substrate)
    std::string kind;
    for (char c : warning)
      if (!std::isdigit(static_cast<unsigned char>(c)) || kind.empty() || kind.back() != '#')
        kind += std::isdigit(static_cast<unsigned char>(c)) ? '#' : c;
    if (seen_.insert(kind).second)
      std::cerr << "gratingsim run: warning: " << warning << '\n';
    else
      ++repeated_;
  }
  void print_repeated() const {
    if (repeated_) std::cerr << "gratingsim run: " << repeated_ << " more warning(s) of the kinds above not shown\n";
  }

 private:
  std::set<std::string> seen_;
  std::size_t repeated_ = 0;
};

std::string format_wavelength(double nm) { return "λ = " + number("%g", nm) + " nm"; }

/// The device string of the result file for an MPI run: each kind of device with the number of
/// ranks on it, "2 × NVIDIA H100 80GB HBM3".
std::string describe_devices(const std::vector<std::string>& per_rank) {
  std::vector<std::pair<std::string, int>> kinds;
  for (const std::string& d : per_rank) {
    const auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == d; });
    if (it == kinds.end())
      kinds.emplace_back(d, 1);
    else
      ++it->second;
  }
  std::string text;
  for (const auto& [device, count] : kinds) text += (text.empty() ? "" : ", ") + std::to_string(count) + " × " + device;
  return text;
}

/// Every rank takes its own GPU: the local rank's index among this host's devices (modulo their
/// number, with a warning from rank 0 when ranks must share). -1 on a host without CUDA devices.
int bind_device(Ranks& ranks) {
  const conv::CudaReport cuda = conv::cuda_report();
  if (cuda.devices.empty()) return -1;
  const int count = int(cuda.devices.size());
  const int device = ranks.local_rank() % count;
  conv::use_cuda_device(device);
  if (ranks.local_size() > count && ranks.local_rank() == 0)
    std::cerr << "gratingsim run: warning: " << ranks.local_size() << " ranks share " << count << " CUDA device(s) on "
              << ranks.host() << '\n';
  return device;
}

/// The signal (SIGINT, SIGTERM) that asked the run to stop, 0 while none did. The sweep stops after
/// the points being solved are written; a second signal has its default effect (the handler is
/// installed with SA_RESETHAND): the process ends at once, the partial file keeping what it holds.
volatile std::sig_atomic_t stop_signal = 0;
bool erase_progress_line = false;  // stderr is a terminal: the note first erases the progress line

void on_stop_signal(int signal) {
  stop_signal = signal;
  static const char erase[] = "\r\033[K";
  static const char note[] = "gratingsim run: interrupted; stopping once the points being solved are written "
                             "(interrupt again to stop at once)\n";
  if (erase_progress_line) (void)!::write(STDERR_FILENO, erase, sizeof erase - 1);
  (void)!::write(STDERR_FILENO, note, sizeof note - 1);
}

void install_signal_handlers() {
  erase_progress_line = isatty(STDERR_FILENO);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // A file-size limit (ulimit -f) then fails the write with EFBIG, reported, instead of killing the run.
  std::signal(SIGXFSZ, SIG_IGN);
}

/// The sweep in one process: one batched solve per wavelength, each point written as it comes.
SweepOutcome sweep_alone(const io::Problem& problem, io::ResultWriter& writer, Progress& progress, Warnings& warnings,
                         std::optional<std::size_t> stop_after) {
  SweepOutcome outcome;
  std::size_t done = writer.points_done();
  for (const Unit& points : pending_by_wavelength(problem, writer)) {
    if ((outcome.interrupted = stop_signal != 0)) return outcome;
    const double wavelength = io::incidence_of(problem, points[0]).wavelength;
    progress.update(done, "solving " + format_wavelength(wavelength));
    const io::SolvedPoints solved = solve_for_file(problem, points);
    if (!solved.warnings.empty()) progress.clear();
    for (const std::string& warning : solved.warnings) warnings.report(warning);
    physics::PhaseTimer timer;  // the writes of the batch's points: its `writing` phase
    for (std::size_t j = 0; j < points.size(); ++j) {
      writer.write(points[j], solved.results[j]);
      ++done;
      if (++outcome.solved == stop_after || j + 1 == points.size()) {
        timer.lap(physics::Phase::writing);
        writer.record_writing(std::span(points).first(j + 1), timer.times()[physics::Phase::writing]);
      }
      if (outcome.solved == stop_after) {
        outcome.stopped = true;
        return outcome;
      }
    }
    progress.update(done, "solved " + format_wavelength(wavelength));
  }
  return outcome;
}

int run_command(const Options& options, const Launch& launch) {
  const Settings s = [&] {
    try {
      return parse_settings(options);
    } catch (const UsageError& e) {
      throw UsageError(std::string("gratingsim run: ") + e.what() + " (see 'gratingsim run --help')");
    }
  }();
  const auto start = std::chrono::steady_clock::now();
  install_signal_handlers();
  // Several processes: every step below that can fail is settled (every rank agrees, rank 0 tells).
  const std::unique_ptr<Ranks> ranks = launch.size > 1 ? Ranks::join() : nullptr;
  Ranks* const all = ranks.get();
  const bool root = !ranks || ranks->rank() == 0;
  const int rank_count = ranks ? ranks->size() : 1;

  // The case is read and checked completely (by every rank) before any file is touched.
  io::Problem problem;
  settle(all, [&] { problem = io::load_problem(s.case_path); });
  // Rank 0 takes the output's lock before anything is written (the lock file also proves the
  // directory writable), and checks the path again under it: a run that finished meanwhile is seen.
  std::optional<io::OutputLock> lock;
  settle(all, [&] {
    if (!root) return;
    check_output_path(s, problem.source.inputs);
    lock.emplace(s.output);
    check_output_path(s, problem.source.inputs);
  });
  if (root)
    for (const std::string& warning : problem.source.warnings) std::cerr << warning << '\n';
  if (s.precision) problem.solver.precision = *s.precision;
  if (problem.solver.precision == conv::Precision::single && problem.solver.tolerance < single_tolerance_floor) {
    if (root)
      std::cerr << "gratingsim run: warning: single precision: solver tolerance raised from "
                << problem.solver.tolerance << " to " << single_tolerance_floor
                << " (complex64 arithmetic reaches no smaller relative residual)\n";
    problem.solver.tolerance = single_tolerance_floor;
  }
  // Rank 0 decides the backend (an `auto` measurement on its device, the partial file being
  // resumed) for all; then ranks running a GPU backend take their GPUs.
  const std::string partial = io::partial_path(s.output);
  bool resuming = false;
  std::string backend_name;
  settle(all, [&] {
    if (!root) return;
    resuming = s.resume && fs::exists(partial);
    if (s.resume && !resuming) std::cerr << "gratingsim run: no " << partial << " to resume; starting a new run\n";
    if (!s.resume && fs::exists(partial))
      std::cerr << "gratingsim run: replacing " << partial << " left by an earlier run (--resume continues it)\n";
    backend_name = std::string(conv::to_string(choose_backend(s, problem, resuming)));
  });
  if (ranks) backend_name = ranks->broadcast(backend_name);
  problem.solver.backend = conv::parse_backend(backend_name);
  const conv::Backend backend = problem.solver.backend;
  const conv::Precision precision = problem.solver.precision;
  RankOptions rank_options;
  rank_options.fail_on_rank = s.fail_on_rank;
  if (ranks && conv::memory_of(backend) == conv::Memory::device)
    settle(all, [&] { rank_options.cuda_device = bind_device(*ranks); });
  settle(all, [&] {
    const std::string why = physics_unavailable(backend, precision, problem.solver.formulation);
    if (why.empty()) return;
    // A missing device is said as such, with what to use instead, at the case's numerics.backend
    // when the backend comes from there.
    const std::string what = backend_name + (why.starts_with("needs ") ? " " + why + "; use auto or cpu-fftw"
                                                                       : " cannot run the solver here: " + why);
    const auto& at = problem.source.numerics.backend_location;
    if (!s.backend && at) throw io::CaseError(at->file, at->line, at->column, "numerics.backend: backend " + what);
    throw Unsupported((s.backend ? "--backend " : "backend ") + what);
  });
  if (root && !s.quiet) note_absorbing_substrate(problem.source);
  std::string device = device_of(backend);
  std::vector<std::string> rank_names{"rank 0"};  // for messages about a rank (rank 0's list)
  if (ranks) {
    const std::vector<std::string> devices = ranks->gather(device), hosts = ranks->gather(ranks->host());
    device = describe_devices(devices);
    rank_names.clear();
    for (std::size_t r = 0; r < devices.size(); ++r)
      rank_names.push_back("rank " + std::to_string(r) + " (" + hosts[r] + ", " + devices[r] + ")");
  }

  std::optional<io::ResultWriter> writer;
  settle(all, [&] {
    if (!root) return;
    const io::RunInfo info = io::run_info(problem, backend_name, conv::to_string(precision), device);
    writer.emplace(resuming ? io::ResultWriter::resume(s.output, problem.layout, info)
                            : io::ResultWriter::create(s.output, problem.layout, info));
  });

  if (!root) {  // solve what rank 0 sends, then return the status it decides
    serve_sweep(*ranks, problem, rank_options);
    return std::stoi(ranks->broadcast(""));
  }
  const auto conclude = [&]() -> int {
    const io::ResultLayout& layout = problem.layout;
    Progress progress(layout.points(), writer->points_done(), !s.quiet && layout.points() > 1 && isatty(STDERR_FILENO));
    Warnings warnings;
    SweepOutcome outcome;
    const auto sweep_start = std::chrono::steady_clock::now();
    try {
      if (ranks) {
        SweepReport report{progress, [&](const std::string& w) { progress.clear(), warnings.report(w); }, rank_names,
                           [] { return stop_signal != 0; }};
        outcome = coordinate_sweep(*ranks, problem, *writer, plan_units(problem, *writer, ranks->size()),
                                   rank_options, report, s.stop_after);
      } else {
        outcome = sweep_alone(problem, *writer, progress, warnings, s.stop_after);
      }
    } catch (const io::OutputError& e) {  // a failed write (a full disk): what is kept, what to do
      progress.clear();
      throw io::OutputError(std::string(e.what()) + "\n  the " + std::to_string(writer->points_done()) + " of " +
                            std::to_string(layout.points()) + " points finished are kept in " + partial +
                            "; once the cause is removed, 'gratingsim run --resume' solves the rest");
    }
    const auto sweep_end = std::chrono::steady_clock::now();
    progress.clear();
    warnings.print_repeated();
    if (outcome.interrupted) {
      std::cerr << "gratingsim run: interrupted (" << (stop_signal == SIGTERM ? "SIGTERM" : "SIGINT")
                << "): " << writer->points_done() << " of " << layout.points() << " points finished and kept in "
                << partial << "; run again with --resume to solve the rest\n";
      return 128 + int(stop_signal);
    }
    if (outcome.stopped) {
      std::cerr << "gratingsim run: stopped after " << outcome.solved << " points as asked (--stop-after); " << partial
                << " keeps them for --resume\n";
      return 1;
    }
    if (const std::size_t missing = layout.points() - writer->points_done(); missing > 0) {
      std::string why;
      for (const std::string& f : outcome.failures) why += "\n  " + f;
      throw Error(std::to_string(missing) + " point(s) not solved:" + why + "\n  the " +
                  std::to_string(writer->points_done()) + " solved point(s) are kept in " + partial +
                  "; 'gratingsim run --resume' solves the rest");
    }
    writer->finish(s.overwrite);
    const RunTimes times{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                         std::chrono::duration<double>(sweep_end - sweep_start).count(), rank_count};
    const bool converged = s.quiet ? !any_unconverged(s.output) : print_summary(s, problem, outcome.solved, times);
    return converged ? 0 : exit_unconverged;
  };
  int status = 1;
  try {
    status = conclude();
  } catch (...) {
    if (ranks) {
      (void)ranks->broadcast("1");
      ranks->agree_to_stop();
    }
    throw;
  }
  if (ranks) (void)ranks->broadcast(std::to_string(status));
  return status;
}

}  // namespace

int run_run(Args args) {
  const Launch launch = detect_launch();  // before MPI starts: only rank 0 talks to the user
  try {
    const Options options("gratingsim run", run_options, args, 1);
    if (options.flag("help")) {
      if (launch.rank == 0)
        std::cout << format_help(
            "gratingsim run CASE.yaml [-o OUT.h5] [--backend NAME|auto] [--precision single|double] [--resume] "
            "[--overwrite] [--quiet]\n       mpirun -n K gratingsim run CASE.yaml ...",
            "Solves every sweep point of the case (wavelengths × θ × φ; the points of one wavelength in one batched "
            "solve) and writes the result file described in io/SCHEMA.md: OUT.h5.partial while running, each "
            "finished point flushed to disk, renamed to OUT.h5 when every point is done. A sweep shows its "
            "progress on stderr when that is a terminal; at the end a summary table lists per point the "
            "propagating orders, R, T, the energy balance, the solver's iterations and residual, and the time. "
            "Errors in the case file are reported at their line and column before anything is written. Launched "
            "by mpirun (a build with MPI), the K ranks share the sweep: each takes its own GPU on a host with "
            "several, asks rank 0 for the next wavelength's points when it is done with the last, and rank 0 "
            "writes the one result file, the same as a one-process run's; every rank must see the case file. "
            "A rank that fails is reported with its points; the others' results are kept for --resume, which "
            "works with any number of ranks. Exit status: 0 done; 1 an error (nothing written for an invalid "
            "case; a failed sweep leaves OUT.h5.partial for --resume); 2 a wrong command line; 3 done, but "
            "some solve did not reach its tolerance, or (numerics.harmonics: auto, slices: auto) some point did not "
            "reach its target_error within the ladder's maximum: every point is written, those marked in the "
            "summary and stored with solver/converged = 0 or accuracy/reached = 0; 130 (143) interrupted by SIGINT, Ctrl-C (SIGTERM): "
            "the points being solved are written, the finished points kept in OUT.h5.partial for --resume (a "
            "second interrupt ends the run at once). While a run writes OUT.h5 it holds OUT.h5.lock: a second "
            "run on the same output refuses at once, naming it.",
            std::span(run_options).first(shown_options));
      return 0;
    }
    return run_command(options, launch);
  } catch (const Error& e) {
    // Before MPI starts (a wrong command line, a build without MPI) every process fails alike: one says so.
    if (launch.rank != 0 && !dynamic_cast<const ReportedElsewhere*>(&e)) throw ReportedElsewhere(e.what());
    throw;
  }
}

}  // namespace gratingsim::app
