// gratingsim fit end to end (issue #11): measured spectra synthesised by `gratingsim run` at known
// parameters (the case's own values), with and without Gaussian noise, fitted back by `gratingsim
// fit` from other start values; a fit stopped early (exit 3, the file says why); located refusals
// (exit 1, no output file); the example pair configs/si_lines_fit.yaml + _measured.csv.
#include <hdf5.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "validation/app/executable.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using test::contains;
using test::quoted;
using test::run_gratingsim;

namespace {

/// The lines' width and height are the parameters (true values 250 and 150 nm); Ψ/Δ at 3 wavelengths ×
/// 2 angles, 12 measured values. Small numerics (±2 harmonics; one slice, far coarser than the default rule and
/// warned about: the measured values come from the same model, so only the fit is tested) so
/// that a fit takes a fraction of a second (seconds in the sanitizer build), solved by dense LU: the
/// finite differences (relative step 1e-4) see no solver noise.
constexpr const char* lines_case = R"(# lines of width and height to be fitted
parameters: {width: 250, height: 150}
wavelength: [450, 600, 750]
incidence: {theta_deg: [50, 70], polarization: both}
lattice: {period_x: 600}
substrate: SiO2
layers:
  - {name: lines, thickness: "${height}", slices: 1, shapes: [{type: line, material: Si3N4, width: "${width}"}]}
numerics: {harmonics: 2, backend: cpu-fftw, solver: {method: direct}}
fit:
  parameters:
    width: {start: 235, lower: 150, upper: 350}
    height: {start: 162, lower: 100, upper: 200}
  sigma: {psi_deg: 0.05, delta_deg: 0.1}
)";
constexpr double true_width = 250, true_height = 150;

struct Spectrum {
  std::vector<double> wavelength, theta, psi, delta;
  std::vector<std::array<double, 16>> mueller;  ///< row-major, not normalised (as the solver gives it)
};

/// Ψ/Δ of `case_file` computed by `gratingsim run` (at the case's parameter values), `points` of them.
/// (A case with harmonics: auto may miss its target: exit status 3, the results written all the same.)
Spectrum synthesise(const fs::path& case_file, const fs::path& out, std::size_t points = 6) {
  const auto r = run_gratingsim("run " + quoted(case_file) + " -o " + quoted(out) + " --quiet --backend cpu-fftw");
  INFO(r.output);
  REQUIRE((r.status == 0 || r.status == 3));
  const io::ResultReader reader(out.string());
  Spectrum s;
  for (std::size_t point = 0; point < reader.layout().points(); ++point) {
    const io::PointResult p = reader.read(point);
    const io::ResultLayout& l = reader.layout();
    s.wavelength.push_back(l.wavelength_nm[l.wavelength_index_of(point)]);
    s.theta.push_back(l.theta_deg[point / l.phi_deg.size() % l.theta_deg.size()]);
    s.psi.push_back(p.psi_deg);
    s.delta.push_back(p.delta_deg);
    s.mueller.push_back(p.mueller);
  }
  REQUIRE(s.psi.size() == points);
  return s;
}

/// The measured CSV: the spectrum plus N(0, σ) noise (σ_Ψ, σ_Δ in degrees; 0: none), σ columns given.
void write_measured(const fs::path& file, const Spectrum& s, double sigma_psi, double sigma_delta, unsigned seed) {
  std::mt19937_64 random(seed);
  std::normal_distribution<double> normal;
  std::ofstream out(file);
  out << "# synthetic: gratingsim run at width 250, height 150; noise sigma " << sigma_psi << ", " << sigma_delta
      << "\nwavelength, theta_deg, psi_deg, delta_deg, sigma_psi, sigma_delta\n";
  out.precision(17);
  for (std::size_t i = 0; i < s.psi.size(); ++i)
    out << s.wavelength[i] << ", " << s.theta[i] << ", " << s.psi[i] + sigma_psi * normal(random) << ", "
        << s.delta[i] + sigma_delta * normal(random) << ", " << (sigma_psi > 0 ? sigma_psi : 0.05) << ", "
        << (sigma_delta > 0 ? sigma_delta : 0.1) << "\n";
}

/// A float64 dataset of the fit file.
std::vector<double> read_doubles(const fs::path& file, const char* name) {
  const hid_t f = H5Fopen(file.string().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  REQUIRE(d >= 0);
  const hid_t space = H5Dget_space(d);
  std::vector<double> values(std::size_t(H5Sget_simple_extent_npoints(space)));
  REQUIRE(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  return values;
}

int read_converged(const fs::path& file) {
  const hid_t f = H5Fopen(file.string().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const hid_t a = H5Aopen(f, "converged", H5P_DEFAULT);
  REQUIRE(a >= 0);
  int converged = -1;
  REQUIRE(H5Aread(a, H5T_NATIVE_INT, &converged) >= 0);
  H5Aclose(a);
  H5Fclose(f);
  return converged;
}

/// The case (with `edit` applied: a replacement of one text by another) and its synthetic measured table.
/// OpenMP's workers wait passively between the solver's parallel regions: a fit makes hundreds of small
/// solves, and on a loaded machine (CI, 2 cores shared) spinning workers take the core the main thread
/// needs between regions (measured on a loaded 2-core box, sanitizer build: 16 s spinning, 1.5 s passive,
/// for one fit of lines_case).
void wait_passively() { setenv("OMP_WAIT_POLICY", "passive", 0); }

/// A fit that succeeded and its estimates (width, height) as the fit file holds them.
struct Fitted {
  test::Execution run;
  std::vector<double> value, error;  ///< parameters/value, parameters/standard_error
};

/// Noise-free spectra: the fit recovers the true width and height to 1e-6 relative (measured: < 2e-8).
void check_recovered(const std::vector<double>& value) {
  CHECK(std::abs(value[0] - true_width) <= 1e-6 * true_width);
  CHECK(std::abs(value[1] - true_height) <= 1e-6 * true_height);
}

struct Setup {
  test::ScratchDirectory dir;
  fs::path case_file, measured, fit;
  Setup(const std::string& tag, double sigma_psi, double sigma_delta, unsigned seed, const std::string& from = "",
        const std::string& to = "")
      : dir("fit_" + tag), case_file(dir / "lines.yaml"), measured(dir / "measured.csv"), fit(dir / "fit.h5") {
    wait_passively();
    std::string text = lines_case;
    std::ofstream(case_file) << text;
    write_measured(measured, synthesise(case_file, dir / "synthetic.h5"), sigma_psi, sigma_delta, seed);
    if (!from.empty()) {
      const auto at = text.find(from);
      REQUIRE(at != std::string::npos);
      text.replace(at, from.size(), to);
      std::ofstream(case_file) << text;
    }
  }
  [[nodiscard]] test::Execution fit_it(const std::string& extra = "") const {
    return run_gratingsim("fit " + quoted(case_file) + " " + quoted(measured) + " -o " + quoted(fit) + " " + extra);
  }
  /// fit_it, which must succeed (status 0), and its two parameters' estimates read back.
  [[nodiscard]] Fitted fit_and_read(const std::string& extra = "") const {
    Fitted f{fit_it(extra), {}, {}};
    INFO(f.run.output);
    REQUIRE(f.run.status == 0);
    f.value = read_doubles(fit, "parameters/value");
    f.error = read_doubles(fit, "parameters/standard_error");
    REQUIRE(f.value.size() == 2);
    REQUIRE(f.error.size() == 2);
    return f;
  }
};

}  // namespace

TEST_CASE("fit recovers the parameters of noise-free spectra to 1e-6 relative", "[app][fit]") {
  const Setup s("exact", 0, 0, 1);
  const Fitted f = s.fit_and_read();
  INFO(f.run.output);
  CHECK(contains(f.run.output, "converged"));
  CHECK(contains(f.run.output, "reduced χ²"));
  check_recovered(f.value);
  CHECK(read_converged(s.fit) == 1);
}

TEST_CASE("fit recovers the parameters of noisy spectra within 3 standard errors", "[app][fit]") {
  // Noise at the σ the file states: Ψ 0.05°, Δ 0.1° (fixed seed, so that a failure can be repeated).
  const unsigned seed = 20261126;
  INFO("seed " << seed);
  const Setup s("noisy", 0.05, 0.1, seed);
  const Fitted f = s.fit_and_read();
  INFO(f.run.output);
  const double truth[] = {true_width, true_height};
  for (std::size_t j = 0; j < 2; ++j) {
    INFO("parameter " << j << ": " << f.value[j] << " ± " << f.error[j]);
    CHECK(std::isfinite(f.error[j]));
    CHECK(f.error[j] > 0);
    CHECK(std::abs(f.value[j] - truth[j]) <= 3 * f.error[j]);
    CHECK(f.error[j] < 0.05 * truth[j]);  // the data do determine it
  }
  const auto residual = read_doubles(s.fit, "spectra/residual");
  CHECK(residual.size() == 12);
}

TEST_CASE("a fit stopped by max_iterations exits with 3 and its file says why", "[app][fit]") {
  const Setup s("unconverged", 0, 0, 1, "  sigma:", "  max_iterations: 1\n  sigma:");
  const auto r = s.fit_it();
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(contains(r.output, "NOT converged"));
  REQUIRE(fs::exists(s.fit));
  CHECK(read_converged(s.fit) == 0);
  // A second fit does not replace it without --overwrite.
  const auto again = s.fit_it();
  CHECK(again.status == 1);
  CHECK(contains(again.output, "already exists"));
}

TEST_CASE("a fit the measurement cannot determine says so, on screen and in its file", "[app][fit]") {
  // One measured row (Ψ, Δ at one wavelength and angle) for two parameters: ν = 0 (an audit of session 36 met such
  // a fit reported "converged" with errors of 7e4 and nothing said).
  const Setup s("undetermined", 0, 0, 1);
  std::ifstream in(s.measured);
  std::string comment, header, first;
  std::getline(in, comment);
  std::getline(in, header);
  std::getline(in, first);
  in.close();
  std::ofstream(s.measured) << header << "\n" << first << "\n";
  const auto r = s.fit_it();
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "note: ν = 0: as many parameters as measured values"));
  REQUIRE(fs::exists(s.fit));
  const hid_t f = H5Fopen(s.fit.string().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const hid_t a = H5Aopen(f, "reason", H5P_DEFAULT);
  REQUIRE(a >= 0);
  const hid_t type = H5Aget_type(a);
  char* text = nullptr;
  REQUIRE(H5Aread(a, type, &text) >= 0);
  const std::string reason = text ? text : "";
  H5free_memory(text);
  H5Tclose(type);
  H5Aclose(a);
  H5Fclose(f);
  INFO(reason);
  CHECK(contains(reason, "note: ν = 0"));
}

TEST_CASE("fit refuses bad input located, with status 1 and no output", "[app][fit]") {
  SECTION("an unknown floating parameter") {
    const Setup s("unknown", 0, 0, 1, "    height: {start", "    heigth: {start");
    const auto r = s.fit_it();
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(contains(r.output, "lines.yaml:13:5: error: fit.parameters: 'heigth' is not a parameter of the case"));
    CHECK_FALSE(fs::exists(s.fit));
    // run checks the fit section too
    const auto run = run_gratingsim("run " + quoted(s.case_file) + " -o " + quoted(s.dir / "run.h5"));
    CHECK(run.status == 1);
    CHECK(contains(run.output, "lines.yaml:13:5: error:"));
  }
  SECTION("a measured wavelength outside a material's data") {
    const Setup s("range", 0, 0, 1);
    std::ofstream(s.measured, std::ios::app) << "20000, 50, 30, 100, 0.05, 0.1\n";
    const auto r = s.fit_it();
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(contains(r.output, "measured.csv:9:1: error:"));
    CHECK(contains(r.output, "outside its data range"));
    CHECK_FALSE(fs::exists(s.fit));
  }
  SECTION("a malformed measured table") {
    const Setup s("malformed", 0, 0, 1);
    std::ofstream(s.measured, std::ios::app) << "500, 50, thirty, 100, 0.05, 0.1\n";
    const auto r = s.fit_it();
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(contains(r.output, "measured.csv:9:"));
    CHECK_FALSE(fs::exists(s.fit));
  }
  SECTION("a missing -o is a wrong command line") {
    const Setup s("usage", 0, 0, 1);
    const auto r = run_gratingsim("fit " + quoted(s.case_file) + " " + quoted(s.measured));
    CHECK(r.status == 2);
    CHECK(contains(r.output, "-o FIT.h5"));
    const auto precision = s.fit_it("--precision half");
    CHECK(precision.status == 2);
    CHECK(contains(precision.output, "--precision expects single or double, got 'half'"));
    CHECK_FALSE(fs::exists(s.fit));
  }
  SECTION("the output being the measured table") {
    const Setup s("input", 0, 0, 1);
    const auto r = run_gratingsim("fit " + quoted(s.case_file) + " " + quoted(s.measured) + " -o " + quoted(s.measured) +
                                  " --overwrite");
    CHECK(r.status == 1);
    CHECK(contains(r.output, "an input of the fit"));
  }
}

TEST_CASE("the example configs/si_lines_fit.yaml fits its measured table", "[app][fit]") {
  const test::ScratchDirectory dir("fit_example");
  wait_passively();
  const fs::path configs = test::repository_root() / "configs";
  const auto r = run_gratingsim("fit " + quoted(configs / "si_lines_fit.yaml") + " " +
                                quoted(configs / "si_lines_fit_measured.csv") + " -o " + quoted(dir / "fit.h5"));
  INFO(r.output);
  CHECK(r.status == 0);
  const auto value = read_doubles(dir / "fit.h5", "parameters/value");
  const auto error = read_doubles(dir / "fit.h5", "parameters/standard_error");
  // The table was computed by `gratingsim run` at cd 90, height 120 (the case's values) with noise of
  // the stated σ (configs/si_lines_fit_measured.csv's header).
  REQUIRE(value.size() == 2);
  CHECK(std::abs(value[0] - 90) <= 3 * error[0]);
  CHECK(std::abs(value[1] - 120) <= 3 * error[1]);
}

TEST_CASE("fit.library: the start from a library run, interpolated, and a library that cannot be read", "[app][fit]") {
  // A 3 × 3 library around the truth (250, 150) that does not hold it: the start is interpolated.
  const Setup s("library", 0, 0, 1, "  sigma:", "  library: library.h5\n  sigma:");
  std::string library_case = lines_case;
  const std::string parameters = "parameters: {width: 250, height: 150}";
  library_case.replace(library_case.find(parameters), parameters.size(),
                       "parameters: {width: [230, 260, 290], height: [130, 160, 190]}");
  std::ofstream(s.dir / "library.yaml") << library_case;
  REQUIRE(run_gratingsim("run " + quoted(s.dir / "library.yaml") + " -o " + quoted(s.dir / "library.h5") + " --quiet")
              .status == 0);
  const Fitted f = s.fit_and_read();
  INFO(f.run.output);
  CHECK(contains(f.run.output, "start from the library"));
  CHECK(contains(f.run.output, "(9 points)"));
  check_recovered(f.value);

  fs::remove(s.dir / "library.h5");
  const auto missing = s.fit_it("--overwrite");
  CHECK(missing.status == 1);
  CHECK(contains(missing.output, "lines.yaml:14:12: error: fit.library: cannot read the library"));
}

TEST_CASE("fit recovers the parameters from Mueller elements", "[app][fit]") {
  // Three elements of different rows and columns (m12, m33, m34: row-major indices 1, 10, 11), noise-free,
  // σ 1e-3 stated in the file: a wrong element would not fit.
  const Setup s("mueller", 0, 0, 1);
  const Spectrum spectrum = synthesise(s.case_file, s.dir / "mueller.h5");
  {
    std::ofstream out(s.measured);
    out.precision(17);
    out << "wavelength, theta_deg, m12, m33, m34, sigma_m12, sigma_m33, sigma_m34\n";
    for (std::size_t i = 0; i < spectrum.psi.size(); ++i)
      out << spectrum.wavelength[i] << ", " << spectrum.theta[i] << ", " << spectrum.mueller[i][1] << ", "
          << spectrum.mueller[i][10] << ", " << spectrum.mueller[i][11] << ", 1e-3, 1e-3, 1e-3\n";
  }
  const Fitted f = s.fit_and_read();
  INFO(f.run.output);
  CHECK(contains(f.run.output, "Mueller elements"));
  check_recovered(f.value);
}

TEST_CASE("fit says which solves failed when the model has no spectrum at the start", "[app][fit]") {
  // One unpreconditioned GMRES iteration cannot reach 1e-12: every solve is unconverged, its spectrum NaN.
  const Setup s("unsolvable", 0, 0, 1, "solver: {method: direct}",
                "solver: {method: gmres, preconditioner: none, tolerance: 1e-12, max_iterations: 1}");
  const auto r = s.fit_it();
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "did not reach the solver tolerance"));
  CHECK_FALSE(fs::exists(s.fit));
}

TEST_CASE("harmonics: auto is resolved once at the start, recorded, and fits as the same harmonics written out", "[app][fit][accuracy]") {
  // One wavelength (600 nm, θ 50° and 70°), so that its frozen harmonics can be written as a case's fixed
  // ones. The measured Ψ/Δ: `run` of the auto case at the true parameters, noise-free. The ladder starts
  // at M0 = 4 (the highest propagating order at 600 nm is 2) and climbs at least 4, 6, 9.
  const test::ScratchDirectory dir("fit_auto");
  wait_passively();
  std::string auto_case = lines_case;
  auto_case.replace(auto_case.find("[450, 600, 750]"), 15, "[600]");
  const std::string fixed = "harmonics: 2,";
  auto_case.replace(auto_case.find(fixed), fixed.size(), "harmonics: auto, target_error: 1e-2,");
  std::ofstream(dir / "auto.yaml") << auto_case;
  const Spectrum spectrum = synthesise(dir / "auto.yaml", dir / "synthetic.h5", 2);
  write_measured(dir / "measured.csv", spectrum, 0, 0, 1);
  const auto fit = [&](const std::string& name) {
    return run_gratingsim("fit " + quoted(dir / (name + ".yaml")) + " " + quoted(dir / "measured.csv") + " -o " +
                          quoted(dir / (name + ".h5")));
  };
  const auto r = fit("auto");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "harmonics: auto resolved once at the start parameters (target_error 0.01)"));
  const auto wavelength = read_doubles(dir / "auto.h5", "accuracy/wavelength");
  const auto harmonics = read_doubles(dir / "auto.h5", "accuracy/harmonics");
  REQUIRE(wavelength == std::vector<double>{600});
  REQUIRE(harmonics.size() == 2);
  CHECK(harmonics[0] >= 9);   // at least three rungs
  CHECK(harmonics[0] <= 100);  // max_harmonics' default
  CHECK(harmonics[1] == 0);   // a 1D lattice
  CHECK(read_doubles(dir / "auto.h5", "accuracy/slice_factor") == std::vector<double>{1});
  const int m = int(harmonics[0]);
  CHECK(contains(r.output, "600 nm: harmonics [" + std::to_string(m) + ", 0], slices 1 (×1)"));
  // The truth, recovered with the model the data came from (run chose the same M at the truth).
  const auto value = read_doubles(dir / "auto.h5", "parameters/value");
  REQUIRE(value.size() == 2);
  CHECK(std::abs(value[0] - true_width) <= 1e-6 * true_width);
  CHECK(std::abs(value[1] - true_height) <= 1e-6 * true_height);

  // The same case with those harmonics written: the same solves, so the same fit bit for bit.
  std::string explicit_case = auto_case;
  const std::string automatic = "harmonics: auto, target_error: 1e-2,";
  explicit_case.replace(explicit_case.find(automatic), automatic.size(), "harmonics: " + std::to_string(m) + ",");
  std::ofstream(dir / "explicit.yaml") << explicit_case;
  const auto e = fit("explicit");
  INFO(e.output);
  REQUIRE(e.status == 0);
  CHECK_FALSE(contains(e.output, "auto resolved"));
  for (const char* name : {"parameters/value", "parameters/standard_error", "parameters/covariance", "spectra/fitted",
                           "history/parameters", "history/chi2"}) {
    INFO(name);
    CHECK(read_doubles(dir / "auto.h5", name) == read_doubles(dir / "explicit.h5", name));
  }
  std::printf("harmonics: auto frozen at M = %d: width %.12g, height %.12g (explicit M: the same bits)\n", m, value[0],
              value[1]);
}

// Hidden (not a CTest test: 20 fits take ~3 s here, too long for the sanitizer build); run with
// `validation/app.fit "[.draws]"`. The issue's proof at reduced size: over 20 noise draws every
// parameter lies within 3 reported standard errors in at least 19, and the reported errors agree with
// the scatter of the estimates over the draws within a factor 1.5.
TEST_CASE("over 20 noise draws the fit's standard errors match the scatter of its estimates", "[.draws]") {
  const Setup s("draws", 0, 0, 1);
  const Spectrum spectrum = synthesise(s.case_file, s.dir / "truth.h5");
  const int draws = 20;
  const double truth[] = {true_width, true_height};
  std::vector<std::vector<double>> estimates(2), errors(2);
  int within[2] = {0, 0};
  for (int k = 0; k < draws; ++k) {
    write_measured(s.measured, spectrum, 0.05, 0.1, 1000u + unsigned(k));
    const Fitted f = s.fit_and_read("--overwrite");
    for (std::size_t j = 0; j < 2; ++j) {
      estimates[j].push_back(f.value[j]);
      errors[j].push_back(f.error[j]);
      within[j] += std::abs(f.value[j] - truth[j]) <= 3 * f.error[j];
    }
  }
  for (std::size_t j = 0; j < 2; ++j) {
    double mean = 0, error = 0;
    for (int k = 0; k < draws; ++k) mean += estimates[j][std::size_t(k)] / draws, error += errors[j][std::size_t(k)] / draws;
    double variance = 0;
    for (int k = 0; k < draws; ++k) variance += std::pow(estimates[j][std::size_t(k)] - mean, 2) / (draws - 1);
    const double ratio = error / std::sqrt(variance);
    INFO("parameter " << j << ": within 3σ in " << within[j] << " of " << draws << "; mean reported error " << error
                      << ", scatter " << std::sqrt(variance) << ", ratio " << ratio);
    CHECK(within[j] >= 19);
    CHECK(ratio >= 1 / 1.5);
    CHECK(ratio <= 1.5);
    WARN("parameter " << j << ": within 3σ in " << within[j] << "/" << draws << ", reported/scatter " << ratio);
  }
}
