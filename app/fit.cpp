// gratingsim fit: fits the case's floating parameters (its `fit` section, io/SCHEMA.md §3.3) to a
// measured table of Ψ/Δ or Mueller spectra (§4) by bounded Levenberg–Marquardt (fitting/,
// docs/fitting.md), the model being the grating solved as `run` solves it (GratingModel), prints a
// summary and writes the fit file (§3). Steps: the command line, the case and its fit section, the
// measured table and its wavelengths, the output's checks, the backend, then the fit.
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli.hpp"
#include "app/commands.hpp"
#include "app/grating_model.hpp"
#include "app/output_safety.hpp"
#include "app/solving.hpp"
#include "app/summary.hpp"
#include "io/fit_results.hpp"
#include "io/fit_settings.hpp"
#include "io/measured.hpp"
#include "io/problem.hpp"
#include "io/results.hpp"
#include "fitting/library_start.hpp"

namespace gratingsim::app {
namespace {

constexpr OptionSpec fit_options[] = {
    {"output", "FIT.h5", "the fit file (io/SCHEMA.md §3); required", 'o'},
    {"backend", "NAME|auto",
     "convolution backend: cpu-direct, cpu-fftw, gpu-cufft, gpu-cufft-callbacks, gpu-fused, gpu-direct or auto "
     "(default: the case's numerics.backend)"},
    {"precision", "single|double", "arithmetic precision (default: the case's numerics.precision)"},
    {"overwrite", "", "replace an existing FIT.h5 (without it, an existing FIT.h5 is never replaced)"},
};

struct Settings {
  std::string case_path, measured_path, output;
  std::optional<std::string_view> backend;  ///< as given: a backend's name or "auto"
  std::optional<Precision> precision;
  bool overwrite = false;
};

Settings parse_settings(const Options& o) {
  Settings s;
  if (o.positional().size() < 2) throw UsageError("expected the case file CASE.yaml and the measured table MEASURED");
  s.case_path = o.positional()[0];
  s.measured_path = o.positional()[1];
  if (!o.value("output") || o.value("output")->empty()) throw UsageError("missing the fit file: -o FIT.h5");
  s.output = std::string(*o.value("output"));
  s.backend = o.value("backend");
  if (s.backend) check_backend_option(*s.backend);
  if (const auto p = o.value("precision")) s.precision = parse_precision_option(*p);
  s.overwrite = o.flag("overwrite");
  return s;
}

/// The backend of the command line, else the case's, else (auto) automatic_backend(), as `run` chooses;
/// refused, located at numerics.backend when it comes from there, where the solver cannot run it.
void take_backend(const Settings& s, io::Problem& problem) {
  std::optional<conv::Backend> backend = problem.source.numerics.backend;
  if (s.backend) backend = *s.backend == "auto" ? std::nullopt : std::optional(conv::parse_backend(*s.backend));
  problem.solver.backend = backend ? *backend : automatic_backend(problem);
  const std::string name(conv::to_string(problem.solver.backend));
  const std::string why = physics_unavailable(problem.solver.backend, problem.solver.precision, problem.solver.formulation);
  if (why.empty()) return;
  const std::string what =
      name + (why.starts_with("needs ") ? " " + why + "; use auto or cpu-fftw" : " cannot run the solver here: " + why);
  const auto& at = problem.source.numerics.backend_location;
  if (!s.backend && at) throw io::CaseError(at->file, at->line, at->column, "numerics.backend: backend " + what);
  throw Unsupported((s.backend ? "--backend " : "backend ") + what);
}

/// The fit's parameters in the order of the case's `fit.parameters`, a start not given there being the
/// case's value; `floating[j]`: the case axis of parameter j.
std::vector<fitting::Parameter> fit_parameters(const io::Case& c, const io::FitSettings& settings,
                                               std::vector<std::size_t>& floating) {
  std::vector<fitting::Parameter> parameters;
  for (const io::FitParameterSetting& setting : settings.parameters) {
    fitting::Parameter p = setting.parameter;
    const auto axis = std::find_if(c.parameters.begin(), c.parameters.end(),
                                   [&](const io::ParameterAxis& a) { return a.name == p.name; });
    GS_EXPECTS(axis != c.parameters.end(), "the case reader checked the floating parameters' names");
    floating.push_back(std::size_t(axis - c.parameters.begin()));
    if (!setting.start_given) p.start = c.parameter_values.at(p.name);
    parameters.push_back(p);
  }
  return parameters;
}

/// The index of `x` in `axis` (equal within 1e-9 relative), or axis.size().
std::size_t find_value(const std::vector<double>& axis, double x) {
  for (std::size_t i = 0; i < axis.size(); ++i)
    if (std::abs(axis[i] - x) <= 1e-9 * std::max(std::abs(x), 1.0)) return i;
  return axis.size();
}

/// The path of fit.library: relative to the case's directory, as its material tables.
std::string library_path(const io::FitSettings& settings, const io::Case& c) {
  const std::filesystem::path path = *settings.library;
  return (path.is_relative() ? std::filesystem::path(c.base_directory) / path : path).string();
}

/// fit.library (io/SCHEMA.md §3.3): the start values from a result file of a parameter sweep (§2.6;
/// its path relative to the case's directory), by fitting::library_start (the library point of lowest
/// χ², interpolated between its neighbours, docs/fitting.md §3). The library's parameter axes must be
/// the floating parameters (any order; an axis that does not float must hold one value), and it must
/// hold every measured (λ, θ, φ). Sets the parameters' start values; returns what was done, in words.
std::string start_from_library(const io::FitSettings& settings, const io::Case& c, const io::MeasuredData& measured,
                               std::vector<fitting::Parameter>& parameters) {
  const io::SourceLocation& at = settings.library_at;
  const auto refuse = [&](const std::string& why) {
    throw io::CaseError(at.file, at.line, at.column, "fit.library: " + why);
  };
  const std::filesystem::path path = library_path(settings, c);
  std::optional<io::ResultReader> reader;
  try {
    reader.emplace(path.string());
  } catch (const Error& e) {
    refuse("cannot read the library " + path.string() + ": " + user_message(e));
  }
  const io::ResultLayout& l = reader->layout();
  // Per fitted parameter, its library axis; the other axes must hold one value.
  std::vector<std::size_t> axis_of(parameters.size(), l.parameters.size());
  for (std::size_t a = 0; a < l.parameters.size(); ++a) {
    const auto it = std::find_if(parameters.begin(), parameters.end(),
                                 [&](const fitting::Parameter& p) { return p.name == l.parameters[a].name; });
    if (it != parameters.end())
      axis_of[std::size_t(it - parameters.begin())] = a;
    else if (l.parameters[a].values.size() != 1)
      refuse("the library sweeps '" + l.parameters[a].name + "', which does not float in this fit");
  }
  for (std::size_t j = 0; j < parameters.size(); ++j)
    if (axis_of[j] == l.parameters.size()) refuse(path.string() + " has no parameter axis '" + parameters[j].name + "'");
  // Per measured row, its (λ, θ, φ) in the library.
  std::vector<std::array<std::size_t, 3>> index(measured.rows());
  for (std::size_t row = 0; row < measured.rows(); ++row) {
    const io::MeasuredPoint& m = measured.points[row];
    index[row] = {find_value(l.wavelength_nm, m.wavelength_nm), find_value(l.theta_deg, m.theta_deg),
                  find_value(l.phi_deg, m.phi_deg)};
    if (index[row][0] == l.wavelength_nm.size() || index[row][1] == l.theta_deg.size() ||
        index[row][2] == l.phi_deg.size())
      io::refuse_value(measured, row, "wavelength",
                       "the library " + path.string() + " (fit.library) has no point at this wavelength, θ and φ");
  }
  const std::size_t n = parameters.size(), q = measured.quantities.size(), points = l.parameter_points();
  fitting::Library library{Eigen::MatrixXd(Eigen::Index(n), Eigen::Index(points)),
                           Eigen::MatrixXd(Eigen::Index(measured.rows() * q), Eigen::Index(points))};
  for (std::size_t ip = 0; ip < points; ++ip) {
    // ip is row-major over the axes, the first slowest.
    std::vector<std::size_t> axis_index(l.parameters.size());
    for (std::size_t a = l.parameters.size(), rest = ip; a-- > 0;) {
      axis_index[a] = rest % l.parameters[a].values.size();
      rest /= l.parameters[a].values.size();
    }
    for (std::size_t j = 0; j < n; ++j)
      library.points(Eigen::Index(j), Eigen::Index(ip)) = l.parameters[axis_of[j]].values[axis_index[axis_of[j]]];
    for (std::size_t row = 0; row < measured.rows(); ++row) {
      const std::size_t point = l.point_index(index[row][0], index[row][1], index[row][2], ip);
      const io::PointResult r = reader->done(point) ? reader->read(point) : io::PointResult{};
      for (std::size_t k = 0; k < q; ++k) {
        const std::string& name = measured.quantities[k];
        const double value = name == "psi_deg"     ? r.psi_deg
                             : name == "delta_deg" ? r.delta_deg
                                                   : r.mueller[std::size_t((name[1] - '1') * 4 + (name[2] - '1'))];
        library.outputs(Eigen::Index(row * q + k), Eigen::Index(ip)) = value;
      }
    }
  }
  fitting::LibraryStart start;
  try {
    start = fitting::library_start(library, parameters, io::to_measurement(measured));
  } catch (const InvalidArgument& e) {
    refuse(user_message(e));
  }
  std::ostringstream os;
  os << "start from the library " << path.string() << " (" << points << " points): nearest point "
     << start.nearest << " (χ² = " << start.nearest_chi2 << ")"
     << (start.interpolated ? ", interpolated" : ", not interpolated: " + start.note) << "; start";
  for (std::size_t j = 0; j < n; ++j) {
    parameters[j].start = start.start[Eigen::Index(j)];
    os << ' ' << parameters[j].name << " = " << parameters[j].start;
  }
  return os.str();
}

/// The frozen auto settings in words: one line per measured wavelength.
std::string frozen_summary(const std::vector<io::FrozenAccuracy>& frozen, const io::AccuracyTarget& target) {
  std::ostringstream os;
  os << "  " << (target.harmonics ? "harmonics" : "") << (target.harmonics && target.slices ? " and " : "")
     << (target.slices ? "slices" : "") << ": auto resolved once at the start parameters (target_error "
     << target.target_error << ") and frozen for the whole fit:\n";
  for (const io::FrozenAccuracy& f : frozen) {
    os << "    " << f.wavelength_nm << " nm: harmonics [" << f.harmonics_x << ", " << f.harmonics_y << "], slices "
       << f.slices << " (×" << f.slice_factor << "), estimated error " << f.estimated_error
       << (f.target_reached ? "" : " (target NOT reached: the ladder ended)") << "\n";
  }
  return os.str();
}

/// What the measurement leaves undetermined, in words (empty when nothing): no degrees of freedom left (χ² then
/// cannot test the model), or two parameters so correlated (|ρ| ≥ 0.999) that the data fix only a combination of
/// them, and their standard errors say little about either (an audit in session 36 met a "converged" fit with
/// ν = 0, ρ = −1.000 and errors of 7e4).
std::string identifiability_note(const fitting::FitResult& fit) {
  std::ostringstream os;
  if (fit.degrees_of_freedom == 0)
    os << "ν = 0: as many parameters as measured values, so χ² cannot test the model (the reduced χ² is undefined)";
  const auto n = fit.correlation.rows();
  for (Eigen::Index a = 0; a < n; ++a)
    for (Eigen::Index b = a + 1; b < n; ++b)
      if (std::abs(fit.correlation(a, b)) >= 0.999)
        os << (os.tellp() > 0 ? "; " : "") << fit.names[std::size_t(a)] << " and " << fit.names[std::size_t(b)]
           << " are correlated by " << std::fixed << std::setprecision(4) << fit.correlation(a, b) << std::defaultfloat
           << ": the measurement determines a combination of them, not each (their standard errors mean little)";
  return os.str();
}

void print_summary(const fitting::FitResult& fit, const std::vector<fitting::Parameter>& parameters,
                   const io::MeasuredData& measured, const GratingModel& model, const std::string& backend,
                   const std::string& frozen) {
  std::ostringstream os;
  os << "gratingsim fit: " << parameters.size() << " parameter(s) fitted to " << measured.rows() << " measured row(s) × "
     << measured.quantities.size() << " quantities ("
     << (measured.kind == io::MeasuredKind::ellipsometry ? "Ψ, Δ" : "Mueller elements") << "), backend " << backend
     << "\n\n";
  std::size_t width = 9;
  for (const auto& name : fit.names) width = std::max(width, name.size());
  os << "  " << std::left << std::setw(int(width)) << "parameter" << std::right << std::setw(16) << "value"
     << std::setw(16) << "std. error" << std::setw(14) << "start" << "\n";
  for (std::size_t j = 0; j < parameters.size(); ++j) {
    const auto i = Eigen::Index(j);
    os << "  " << std::left << std::setw(int(width)) << fit.names[j] << std::right << std::setprecision(8)
       << std::setw(16) << fit.parameters[i] << "  ± " << std::setprecision(3) << std::setw(12)
       << fit.standard_errors[i] << std::setprecision(6) << std::setw(14) << parameters[j].start
       << (fit.at_bound[j] ? "  at a bound" : "") << "\n";
  }
  if (parameters.size() > 1) {
    os << "\n  correlation\n  " << std::setw(int(width)) << "";
    for (const auto& name : fit.names) os << std::setw(int(std::max<std::size_t>(name.size(), 7) + 2)) << name;
    os << "\n";
    for (std::size_t a = 0; a < parameters.size(); ++a) {
      os << "  " << std::left << std::setw(int(width)) << fit.names[a] << std::right << std::fixed;
      for (std::size_t b = 0; b < parameters.size(); ++b)
        os << std::setw(int(std::max<std::size_t>(fit.names[b].size(), 7) + 2)) << std::setprecision(3)
           << fit.correlation(Eigen::Index(a), Eigen::Index(b));
      os << std::defaultfloat << "\n";
    }
  }
  os << "\n  χ² = " << std::setprecision(6) << fit.chi2 << ", reduced χ² = " << fit.reduced_chi2 << " (ν = "
     << fit.degrees_of_freedom << ", errors "
     << (fit.error_scaling == fitting::ErrorScaling::none ? "from the measured σ" : "scaled by the reduced χ²") << ")\n"
     << "  " << fit.iterations << " iteration(s), " << fit.model_calls << " model call(s), " << fit.model_points
     << " parameter vector(s) solved in " << model.batches() << " batched solve(s)\n";
  if (model.failed_solves() > 0 || !model.notes().empty()) {
    os << "  " << model.failed_solves() << " solve(s) failed or did not converge (their spectra NaN); first:\n";
    for (const std::string& n : model.notes()) os << "    " << n << "\n";
  }
  os << (fit.converged ? "  converged: " : "  NOT converged: ") << fit.reason << "\n";
  if (const std::string note = identifiability_note(fit); !note.empty()) os << "  note: " << note << "\n";
  if (!frozen.empty()) os << "\n" << frozen;
  std::cout << os.str();
}

int run_fit(const Options& options) {
  const Settings s = parse_settings(options);
  io::Problem problem = io::load_problem(s.case_path);
  const io::Case& c = problem.source;
  const io::FitSettings settings = io::read_fit_settings(c.yaml, c.path);
  if (!settings.present)
    throw io::CaseError(c.path, 1, 1, "no 'fit' section: name the parameters to fit (io/SCHEMA.md §3.3)");
  std::vector<std::size_t> floating;
  std::vector<fitting::Parameter> parameters = fit_parameters(c, settings, floating);

  const io::MeasuredData measured = io::read_measured(s.measured_path, settings.sigma);
  check_measured_wavelengths(c, measured);
  const std::string library_note = settings.library ? start_from_library(settings, c, measured, parameters) : "";
  std::vector<std::string> inputs = c.inputs;
  inputs.push_back(s.measured_path);
  if (settings.library) inputs.push_back(library_path(settings, c));
  check_output_path(s.output, {}, inputs, s.overwrite,
                    "an input of the fit (the case, a table it reads, the measured data, the library)");

  for (const std::string& warning : c.warnings) std::cerr << warning << '\n';
  const std::string warning = apply_precision(problem.solver, s.precision);
  if (!warning.empty()) std::cerr << "gratingsim fit: warning: " << warning << '\n';
  take_backend(s, problem);
  const std::string backend(conv::to_string(problem.solver.backend));

  if (!library_note.empty()) std::cout << "gratingsim fit: " << library_note << "\n";
  // harmonics: auto / slices: auto: resolved once, at the start, and frozen (io::FrozenAccuracy).
  std::vector<io::FrozenAccuracy> frozen;
  if (c.numerics.accuracy) {
    std::vector<double> start;
    for (const fitting::Parameter& p : parameters) start.push_back(p.start);
    frozen = freeze_accuracy(problem, floating, start, measured);
  }
  GratingModel model(problem, floating, measured, frozen);
  fitting::FitResult fit = [&] {
    try {
      return fitting::fit(model, parameters, io::to_measurement(measured), settings.options);
    } catch (const InvalidArgument& e) {  // e.g. no spectrum at the start: say which solves failed
      std::string why;
      for (const std::string& n : model.notes()) why += "\n  " + n;
      throw Error(user_message(e) + (why.empty() ? "" : "; the model's failures:" + why));
    }
  }();
  print_summary(fit, parameters, measured, model, backend,
                frozen.empty() ? "" : frozen_summary(frozen, *c.numerics.accuracy));
  if (const std::string note = identifiability_note(fit); !note.empty()) fit.reason += "; note: " + note;  // in the file
  io::FitInfo info;
  info.case_path = s.case_path;
  info.case_yaml = c.yaml;
  info.measured_path = s.measured_path;
  info.backend = backend;
  info.precision = std::string(to_string(problem.solver.precision));
  info.formulation = std::string(physics::to_string(problem.solver.formulation));
  info.device = device_of(problem.solver.backend);
  if (c.numerics.accuracy) info.target_error = c.numerics.accuracy->target_error;
  info.frozen = frozen;
  io::write_fit_results(s.output, fit, measured, info, s.overwrite);
  std::cout << "wrote " << s.output << "\n";
  return fit.converged ? 0 : exit_unreliable;
}

}  // namespace

const Command gratingsim_fit{
    .name = "fit",
    .summary = "fit a case's parameters to measured Ψ/Δ or Mueller spectra (exit 3: the fit did not converge)",
    .usage = "gratingsim fit CASE.yaml MEASURED -o FIT.h5 [--backend NAME|auto] [--precision single|double] "
             "[--overwrite]",
    .description =
        "Fits the parameters the case's 'fit' section names (io/SCHEMA.md §3.3) to a measured table (CSV or HDF5: "
        "wavelength, θ, φ, Ψ and Δ or Mueller elements, with σ per value or the section's stated default; §4) by "
        "bounded Levenberg–Marquardt with finite-difference Jacobians (docs/fitting.md). The grating is solved "
        "as 'run' solves it; the perturbed points of a Jacobian and the trial steps of an iteration are solved "
        "together, in one batched solve of every parameter vector and measured wavelength (docs/solver.md §1.2; "
        "with frozen auto numerics, one per distinct harmonics and slices). With fit.library (a result file of "
        "the case's parameters swept) the start is the library's best point, interpolated. Prints the "
        "parameters with their "
        "standard errors, their correlations, χ² and the reduced χ², the iterations and whether the fit "
        "converged, and writes FIT.h5 (§3) atomically. Errors in the case or the measured table (an unknown "
        "parameter, a measured wavelength outside a material's data) are reported at their line and column "
        "before anything is solved, and nothing is written. Exit status: 0 converged; 1 an error (nothing "
        "written); 2 a wrong command line; 3 the fit did not converge (FIT.h5 written, saying why).",
    .options = fit_options,
    .max_positional = 2,
    .positional = "INPUTS",  // CASE.yaml MEASURED (a CLI11 name: no blanks)
    .run = run_fit};

}  // namespace gratingsim::app
