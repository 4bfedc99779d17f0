#include "app/summary.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdio>
#include <iostream>
#include <limits>
#include <vector>

#include "app/phases.hpp"
#include "app/progress.hpp"
#include "app/table.hpp"
#include "io/results.hpp"

namespace gratingsim::app {
namespace {

/// Sweeps of more points show every k-th point in the summary (about summary_sample of them) and every
/// unconverged one.
constexpr std::size_t summary_rows = 40, summary_sample = 20;

/// Sweeps of more wavelength batches show, besides the total, only the few batches that took longest.
constexpr std::size_t phase_rows = 8, phase_largest = 3;

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
  const std::complex<double> epsilon = c.structure.substrate.permittivity(wavelength_nm);
  return !(epsilon.imag() == 0 && epsilon.real() > 0);
}

/// What the summary needs of a stored point.
struct PointSummary {
  std::size_t point = 0;
  io::PointResult result;
  bool reliable = true;  ///< every solve converged, the target reached, the energy balanced: else always shown
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
  const double wavelength = l.wavelength_nm[l.wavelength_index_of(p.point)];
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

}  // namespace

void note_absorbing_substrate(const io::Case& c) {
  std::size_t absorbing = 0;
  for (const double w : c.wavelength_nm) absorbing += substrate_absorbs(c, w) ? 1 : 0;
  if (absorbing == 0) return;
  std::cerr << "gratingsim run: note: the substrate (" << c.structure.substrate.name() << ") absorbs at "
            << (absorbing == c.wavelength_nm.size() ? std::string("every wavelength")
                                                    : std::to_string(absorbing) + " of the " +
                                                          std::to_string(c.wavelength_nm.size()) + " wavelengths")
            << ": transmitted efficiencies are undefined there (shown as n/a; the file has results/T = 0 and "
               "results/transmitted_direction NaN), and the absorption 1 - ΣR includes the substrate\n";
}


bool print_summary(const std::string& case_path, const std::string& output, const io::Problem& problem,
                   std::size_t solved, const RunTimes& times) {
  const io::ResultReader reader(output);
  const io::ResultLayout& l = reader.layout();
  const io::RunInfo& info = reader.info();
  std::vector<PointSummary> points;
  std::size_t unconverged_solves = 0, unbalanced_points = 0;
  std::array<std::size_t, io::method_names.size()> method_points{};  // points per solver/method value
  double worst_balance = NAN, least_absorption = INFINITY;
  AccuracySummary accuracy;
  for (std::size_t point = 0; point < l.points(); ++point) {
    PointSummary p{point, reader.read(point), true};
    if (l.accuracy) {
      accuracy.add(p.result);
      if (!p.result.target_reached) p.reliable = false;
    }
    if (p.result.method < method_points.size()) ++method_points[p.result.method];
    for (std::size_t i = 0; i < p.result.converged.size(); ++i) {
      if (!p.result.converged[i]) ++unconverged_solves, p.reliable = false;
      const double e = p.result.energy_balance_error[i];
      if (!std::isnan(e) && !(e <= worst_balance)) worst_balance = e;
    }
    for (const double a : p.result.absorption)
      if (!(a >= least_absorption)) least_absorption = a;
    if (energy_balance_fails(p.result)) ++unbalanced_points, p.reliable = false;
    points.push_back(std::move(p));
  }

  std::printf("gratingsim run: %s → %s\n", case_path.c_str(), output.c_str());
  if (!problem.source.description.empty()) std::printf("  %s\n", problem.source.description.c_str());
  if (!l.parameters.empty()) {  // the first axes of the sweep (the table's rows give λ, θ, φ only)
    std::string axes;
    for (const auto& p : l.parameters) axes += (axes.empty() ? "" : ", ") + p.name + " " + describe_axis(p.values, "");
    std::printf("  parameters: %s; %zu parameter point(s), rows in their order (the first slowest)\n", axes.c_str(),
                l.parameter_points());
  }
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
    if (p.point % stride == 0 || p.point + 1 == points.size() || !p.reliable)
      add_point_rows(l, p, substrate_absorbs(problem.source, l.wavelength_nm[l.wavelength_index_of(p.point)]),
                     rows);
  std::vector<Column> columns = summary_columns(l.accuracy.has_value());
  widen(columns, rows);
  std::printf("%s\n", format_header(columns).c_str());
  for (const auto& row : rows) std::printf("%s\n", format_row(columns, row).c_str());
  if (stride > 1)
    std::printf("  (%zu points: one in %zu shown, the last, and every unreliable one (unconverged, short of its target or off its energy balance); all are in %s)\n", points.size(),
                stride, output.c_str());
  bool any_absorbing = false;
  for (const double w : l.wavelength_nm) any_absorbing = any_absorbing || substrate_absorbs(problem.source, w);
  if (points.size() == 1) print_orders(l, points[0].result, any_absorbing);

  std::printf(
      "\n  orders: propagating at the point; R0: order (0, 0); absorbed: 1 - ΣR - ΣT (1 - ΣR when the substrate\n"
      "  absorbs); |1-ΣR-ΣT|: lossless structures only; time: the wavelength's batch\n");
  if (any_absorbing)
    std::printf("  ΣT, T: n/a where the substrate absorbs (no order propagates in it: transmission is undefined)\n");
  std::printf("\n  time per phase of each wavelength batch, s (solver/phase_seconds; sweep wall time %.3f s):\n%s\n",
              times.sweep, format_phase_table(batch_phases(reader), times.sweep, phase_rows, phase_largest).c_str());
  std::printf("  energy balance: %s\n",
              std::isnan(worst_balance)
                  ? ("a material absorbs: smallest absorption 1-ΣR-ΣT " + number("%.3f", least_absorption) +
                     " (power made where negative)")
                        .c_str()
                  : ("largest |1-ΣR-ΣT| " + number("%.2e", worst_balance)).c_str());
  if (unbalanced_points > 0)
    std::printf("  energy balance: %zu point(s) off by more than %g (|1-ΣR-ΣT| where lossless, an absorption below "
                "-%g where not): their efficiencies are off by about as much (too few slices or harmonics; a "
                "converged solve does not show it); exit status %d\n",
                unbalanced_points, energy_balance_limit, energy_balance_limit, exit_unreliable);
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
                  accuracy.short_of_target, exit_unreliable);
  }
  // The method(s) that ran (solver/method): "bicgstab", or "gmres on 12 points, bicgstab on 20" where batches differ.
  std::string methods;
  std::size_t kinds = 0;
  for (const std::size_t n : method_points) kinds += n > 0 ? 1 : 0;
  for (std::size_t k = 0; k < method_points.size(); ++k)
    if (method_points[k] > 0)
      methods += (methods.empty() ? "" : ", ") + std::string(io::method_names[k]) +
                 (kinds > 1 ? " on " + std::to_string(method_points[k]) + " points" : "");
  std::printf("  method: %s (solver/method)\n", methods.c_str());
  if (unconverged_solves == 0) {
    std::printf("  solver: every solve converged\n");
    return accuracy.short_of_target == 0 && unbalanced_points == 0;
  }
  std::printf(
      "  solver: %zu solve(s) did NOT converge (conv 'NO' above, stored with solver/converged = 0); "
      "exit status %d\n",
      unconverged_solves, exit_unreliable);
  return false;
}

bool energy_balance_fails(const io::PointResult& r) {
  for (const double e : r.energy_balance_error)
    if (!std::isnan(e) && !(e <= energy_balance_limit)) return true;
  for (const double a : r.absorption)
    if (!std::isnan(a) && a < -energy_balance_limit) return true;
  return false;
}

bool any_unreliable(const std::string& output) {
  const io::ResultReader reader(output);
  for (std::size_t point = 0; point < reader.layout().points(); ++point) {
    const io::PointResult r = reader.read(point);
    if (reader.layout().accuracy && !r.target_reached) return true;
    for (std::uint8_t c : r.converged)
      if (!c) return true;
    if (energy_balance_fails(r)) return true;
  }
  return false;
}

}  // namespace gratingsim::app
