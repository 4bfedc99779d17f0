// io/fit_results.hpp: a fit file read back through the plain HDF5 C API (independent of io), into
// buffers poisoned with NaN first, equals what was written bit for bit; publication is atomic (an
// existing file is replaced only when asked, no temporary is left behind).
#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.hpp"  // GRATINGSIM_SOURCE_DIR
#include "io/fit_results.hpp"
#include "io/results.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"
#include "validation/support/scratch_directory.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;

namespace {

constexpr double poison = std::numeric_limits<double>::quiet_NaN();  // also the NaN of unset values

double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(test::rng()); }

Eigen::MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols) {
  Eigen::MatrixXd m(rows, cols);
  for (auto& x : m.reshaped()) x = uniform(-2, 2);
  return m;
}

/// A fit result with fresh random values in every member; parameter 1 held at a bound (NaN errors).
struct Fixture {
  fitting::FitResult fit;
  io::MeasuredData measured;
  io::FitInfo info;
};

Fixture random_fixture() {
  Fixture f;
  const Eigen::Index n = 3, rows = Eigen::Index(uniform(3, 9)), q = 2, m = rows * q;
  f.fit.names = {"cd", "height", "swa"};
  f.fit.parameters = random_matrix(n, 1);
  f.fit.standard_errors = random_matrix(n, 1).cwiseAbs();
  f.fit.covariance = random_matrix(n, n);
  f.fit.correlation = random_matrix(n, n);
  f.fit.at_bound = {false, true, false};
  f.fit.standard_errors[1] = poison;
  f.fit.covariance.row(1).setConstant(poison);
  f.fit.correlation.col(1).setConstant(poison);
  f.fit.chi2 = uniform(10, 100);
  f.fit.reduced_chi2 = uniform(0.5, 2);
  f.fit.degrees_of_freedom = std::size_t(m - 2);
  f.fit.error_scaling = fitting::ErrorScaling::reduced_chi2;
  f.fit.model = random_matrix(m, 1);
  f.fit.residuals = random_matrix(m, 1);
  for (int k = 0; k < 4; ++k) f.fit.history.push_back({random_matrix(n, 1), uniform(10, 1000), k == 0 ? poison : uniform(1e-6, 1)});
  f.fit.iterations = 7;
  f.fit.model_calls = 12;
  f.fit.model_points = 61;
  f.fit.converged = false;
  f.fit.reason = "max_iterations (7) reached before convergence";
  f.measured.path = "measured.csv";
  f.measured.kind = io::MeasuredKind::ellipsometry;
  f.measured.quantities = {"psi_deg", "delta_deg"};
  for (Eigen::Index r = 0; r < rows; ++r) f.measured.points.push_back({uniform(300, 900), uniform(0, 80), uniform(-90, 90)});
  for (Eigen::Index i = 0; i < m; ++i) {
    f.measured.values.push_back(uniform(-180, 180));
    f.measured.sigmas.push_back(uniform(0.01, 0.1));
  }
  f.measured.sigma_defaulted = {false, false};
  f.info = {.case_path = "cases/grating.yaml", .case_yaml = "parameters: {cd: 90}  # ünïcode\n",
            .measured_path = "measured.csv", .backend = "cpu-fftw", .precision = "double",
            .formulation = "normal-vector", .device = "CPU (test)", .parameter_units = {"nm", "nm", "deg"}};
  return f;
}

// --- reading back through the C API, into poisoned buffers --------------------------------------

std::vector<hsize_t> dims_of(hid_t file, const std::string& name) {
  const hid_t set = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  REQUIRE(set >= 0);
  const hid_t space = H5Dget_space(set);
  std::vector<hsize_t> dims(std::size_t(H5Sget_simple_extent_ndims(space)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  H5Sclose(space);
  H5Dclose(set);
  return dims;
}

std::vector<double> doubles(hid_t file, const std::string& name, std::size_t count) {
  std::vector<double> out(count, poison);  // poison: a value never written stays NaN and fails below
  const hid_t set = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  REQUIRE(set >= 0);
  REQUIRE(H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0);
  H5Dclose(set);
  return out;
}

std::vector<std::string> strings(hid_t file, const std::string& name) {
  const hid_t set = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  REQUIRE(set >= 0);
  const hid_t type = H5Dget_type(set);
  const std::size_t count = std::size_t(dims_of(file, name).at(0));
  std::vector<char*> raw(count, nullptr);
  REQUIRE(H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()) >= 0);
  std::vector<std::string> out;
  for (char* s : raw) out.emplace_back(s ? s : "<null>");
  const hid_t space = H5Dget_space(set);
  H5Dvlen_reclaim(type, space, H5P_DEFAULT, raw.data());
  H5Sclose(space);
  H5Tclose(type);
  H5Dclose(set);
  return out;
}

std::string string_attribute(hid_t object, const char* name) {
  const hid_t a = H5Aopen(object, name, H5P_DEFAULT);
  REQUIRE(a >= 0);
  const hid_t type = H5Aget_type(a);
  char* raw = nullptr;
  REQUIRE(H5Aread(a, type, &raw) >= 0);
  std::string out = raw ? raw : "<null>";
  H5free_memory(raw);
  H5Tclose(type);
  H5Aclose(a);
  return out;
}

template <class T>
T scalar_attribute(hid_t object, const char* name, hid_t type, T poison) {
  T value = poison;
  const hid_t a = H5Aopen(object, name, H5P_DEFAULT);
  REQUIRE(a >= 0);
  REQUIRE(H5Aread(a, type, &value) >= 0);
  H5Aclose(a);
  return value;
}

/// Bitwise equality (NaN equals NaN; −0 differs from +0).
bool same(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

std::vector<double> row_major(const Eigen::MatrixXd& m) {
  std::vector<double> out;
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) out.push_back(m(i, j));
  return out;
}

std::vector<double> vector_of(const Eigen::VectorXd& v) { return {v.begin(), v.end()}; }

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a fit file read back through the HDF5 C API equals what was written") {
  test::ScratchDirectory dir("fit_file");
  const std::string path = (dir / "fit.h5").string();
  const Fixture f = random_fixture();
  io::write_fit_results(path, f.fit, f.measured, f.info);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  const std::size_t n = 3, rows = f.measured.rows(), m = f.measured.values.size();

  CHECK(string_attribute(file, "schema") == "gratingsim.fit");
  CHECK(scalar_attribute(file, "schema_version", H5T_NATIVE_INT32, std::int32_t(-1)) == io::fit_schema_version);
  CHECK(scalar_attribute(file, "converged", H5T_NATIVE_UINT8, std::uint8_t(7)) == 0);
  CHECK(string_attribute(file, "reason") == f.fit.reason);
  CHECK(scalar_attribute(file, "chi2", H5T_NATIVE_DOUBLE, poison) == f.fit.chi2);
  CHECK(scalar_attribute(file, "reduced_chi2", H5T_NATIVE_DOUBLE, poison) == f.fit.reduced_chi2);
  CHECK(scalar_attribute(file, "degrees_of_freedom", H5T_NATIVE_INT64, std::int64_t(-1)) == std::int64_t(f.fit.degrees_of_freedom));
  CHECK(string_attribute(file, "error_scaling") == "reduced_chi2");
  CHECK(scalar_attribute(file, "iterations", H5T_NATIVE_INT64, std::int64_t(-1)) == 7);
  CHECK(scalar_attribute(file, "model_calls", H5T_NATIVE_INT64, std::int64_t(-1)) == 12);
  CHECK(scalar_attribute(file, "model_points", H5T_NATIVE_INT64, std::int64_t(-1)) == 61);
  CHECK(string_attribute(file, "device") == "CPU (test)");
  CHECK(string_attribute(file, "measured_kind") == "ellipsometry");

  CHECK(strings(file, "parameters/names") == f.fit.names);
  CHECK(strings(file, "parameters/units") == f.info.parameter_units);
  CHECK(same(doubles(file, "parameters/value", n), vector_of(f.fit.parameters)));
  CHECK(same(doubles(file, "parameters/standard_error", n), vector_of(f.fit.standard_errors)));
  CHECK(dims_of(file, "parameters/covariance") == std::vector<hsize_t>{3, 3});
  CHECK(same(doubles(file, "parameters/covariance", n * n), row_major(f.fit.covariance)));
  CHECK(same(doubles(file, "parameters/correlation", n * n), row_major(f.fit.correlation)));
  CHECK(same(doubles(file, "parameters/at_bound", n), {0, 1, 0}));

  std::vector<double> wavelength, theta, phi;
  for (const auto& p : f.measured.points) wavelength.push_back(p.wavelength_nm), theta.push_back(p.theta_deg), phi.push_back(p.phi_deg);
  CHECK(same(doubles(file, "spectra/wavelength", rows), wavelength));
  CHECK(same(doubles(file, "spectra/theta", rows), theta));
  CHECK(same(doubles(file, "spectra/phi", rows), phi));
  CHECK(strings(file, "spectra/quantities") == f.measured.quantities);
  CHECK(dims_of(file, "spectra/measured") == std::vector<hsize_t>{rows, 2});
  CHECK(same(doubles(file, "spectra/measured", m), f.measured.values));
  CHECK(same(doubles(file, "spectra/sigma", m), f.measured.sigmas));
  CHECK(same(doubles(file, "spectra/fitted", m), vector_of(f.fit.model)));
  CHECK(same(doubles(file, "spectra/residual", m), vector_of(f.fit.residuals)));

  std::vector<double> history, chi2, lambda;
  for (const auto& step : f.fit.history) {
    history.insert(history.end(), step.parameters.begin(), step.parameters.end());
    chi2.push_back(step.chi2);
    lambda.push_back(step.lambda);
  }
  CHECK(dims_of(file, "history/parameters") == std::vector<hsize_t>{4, 3});
  CHECK(same(doubles(file, "history/parameters", 12), history));
  CHECK(same(doubles(file, "history/chi2", 4), chi2));
  CHECK(same(doubles(file, "history/lambda", 4), lambda));

  const hid_t input = H5Gopen2(file, "input", H5P_DEFAULT);
  REQUIRE(input >= 0);
  CHECK(string_attribute(input, "case_path") == f.info.case_path);
  H5Gclose(input);
  {
    const hid_t set = H5Dopen2(file, "input/case", H5P_DEFAULT);
    const hid_t type = H5Dget_type(set);
    char* raw = nullptr;
    REQUIRE(H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &raw) >= 0);
    CHECK(std::string(raw) == f.info.case_yaml);
    H5free_memory(raw);
    H5Tclose(type);
    H5Dclose(set);
  }
  H5Fclose(file);
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);  // no temporary left
}

TEST_CASE("a fit file replaces an existing file only when asked, and leaves nothing behind on failure") {
  test::ScratchDirectory dir("fit_file_publish");
  const std::string path = (dir / "fit.h5").string();
  const Fixture f = random_fixture();
  const std::string old = "an older file " + std::to_string(uniform(0, 1));
  std::ofstream(path) << old;
  CHECK_THROWS_AS(io::write_fit_results(path, f.fit, f.measured, f.info), io::OutputError);
  CHECK(read(path) == old);
  io::write_fit_results(path, f.fit, f.measured, f.info, true);
  CHECK(read(path).starts_with("\x89HDF"));
  // A directory in the way is never replaced.
  fs::create_directories((dir / "taken.h5").string());
  CHECK_THROWS_AS(io::write_fit_results((dir / "taken.h5").string(), f.fit, f.measured, f.info, true), io::OutputError);
  // Fitted spectra that do not match the measured table are refused before anything is written.
  fitting::FitResult short_fit = f.fit;
  short_fit.model.conservativeResize(short_fit.model.size() - 1);
  CHECK_THROWS_AS(io::write_fit_results((dir / "short.h5").string(), short_fit, f.measured, f.info), InvalidArgument);
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 2);  // fit.h5, taken.h5
}

namespace {

/// A Python 3 with h5py and matplotlib (GRATINGSIM_TEST_PYTHON first), or "".
std::string python_for_plots() {
  const char* chosen = std::getenv("GRATINGSIM_TEST_PYTHON");
  for (const char* python : {chosen ? chosen : "/usr/bin/python3", "python3"})
    if (std::system((std::string(python) + " -c 'import h5py, matplotlib' >/dev/null 2>&1").c_str()) == 0) return python;
  return "";
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

TEST_CASE("plot_results.py draws a fit file: measured and fitted spectra, residuals, parameters in the title") {
  const std::string python = python_for_plots();
  if (python.empty()) {
    WARN("not run: no Python 3 with h5py and matplotlib");
    return;
  }
  test::ScratchDirectory dir("fit_plot");
  // Ψ/Δ at 2 angles × 15 wavelengths, Δ passing through ±180° (the plot keeps it in range), fitted = measured
  // plus a little noise.
  Fixture f = random_fixture();
  f.measured.points.clear();
  f.measured.values.clear();
  f.measured.sigmas.clear();
  const double wrap_at = uniform(150, 170);
  for (const double theta : {65.0, 70.0})
    for (int i = 0; i < 15; ++i) {
      f.measured.points.push_back({400 + 20.0 * i, theta, 0});
      const double delta = wrap_at + 4.0 * i + theta - 65;
      f.measured.values.insert(f.measured.values.end(), {uniform(10, 40), delta > 180 ? delta - 360 : delta});
      f.measured.sigmas.insert(f.measured.sigmas.end(), {0.05, 0.1});
    }
  const auto m = Eigen::Index(f.measured.values.size());
  f.fit.model.resize(m);
  f.fit.residuals.resize(m);
  for (Eigen::Index i = 0; i < m; ++i) {
    double fitted = f.measured.values[std::size_t(i)] + uniform(-0.2, 0.2);
    if (fitted > 180) fitted -= 360;
    f.fit.model[i] = fitted;
    f.fit.residuals[i] = (fitted - f.measured.values[std::size_t(i)]) / f.measured.sigmas[std::size_t(i)];
  }
  f.fit.converged = uniform(0, 1) < 0.5;
  const std::string path = (dir / "fit.h5").string();
  io::write_fit_results(path, f.fit, f.measured, f.info);
  const std::string command = python + " " + quoted(std::string(GRATINGSIM_SOURCE_DIR) + "/validation/app/check_plot_results.py") +
                              " --fit " + quoted(path) + " " + quoted(dir.path().string()) + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string report;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) report.append(buffer, n);
  INFO(report);
  CHECK(pclose(pipe) == 0);
  // And the script's command line writes NAME_fit.png.
  CHECK(std::system((python + " " + quoted(std::string(GRATINGSIM_SOURCE_DIR) + "/app/plot_results.py") + " " + quoted(path) +
                     " -o " + quoted(dir.path().string()) + " >/dev/null 2>&1").c_str()) == 0);
  CHECK(fs::exists(dir.path() / "fit_fit.png"));
}
