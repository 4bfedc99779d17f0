// Fit result files (io/SCHEMA.md §3): HDF5 written to a temporary, synced and renamed.
#include "io/fit_results.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/config.hpp"
#include "io/hdf5_handles.hpp"

namespace gratingsim::io {

namespace {

using h5::Handle;

Handle string_type() {
  Handle t = h5::datatype(H5Tcopy(H5T_C_S1), "copy the string type");
  h5::check(H5Tset_size(t, H5T_VARIABLE), "make a variable-length string type");
  h5::check(H5Tset_cset(t, H5T_CSET_UTF8), "set UTF-8 strings");
  return t;
}

void string_attribute(hid_t object, const char* name, const std::string& value) {
  const Handle type = string_type();
  const Handle space = h5::dataspace(H5Screate(H5S_SCALAR), "create a scalar dataspace");
  const Handle a = h5::attribute(H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT),
                                 std::string("create attribute ") + name);
  const char* text = value.c_str();
  h5::check(H5Awrite(a, type, &text), std::string("write attribute ") + name);
}

template <class T>
void scalar_attribute(hid_t object, const char* name, hid_t type, T value) {
  const Handle space = h5::dataspace(H5Screate(H5S_SCALAR), "create a scalar dataspace");
  const Handle a = h5::attribute(H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT),
                                 std::string("create attribute ") + name);
  h5::check(H5Awrite(a, type, &value), std::string("write attribute ") + name);
}

void dataset(hid_t group, const char* name, hid_t type, const std::vector<hsize_t>& dims, const void* data) {
  const Handle space = h5::dataspace(H5Screate_simple(int(dims.size()), dims.data(), nullptr),
                                     std::string("create the dataspace of ") + name);
  const Handle set = h5::dataset(H5Dcreate2(group, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                 std::string("create dataset ") + name);
  h5::check(H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), std::string("write dataset ") + name);
}

void doubles(hid_t group, const char* name, const std::vector<hsize_t>& dims, const std::vector<double>& values) {
  dataset(group, name, H5T_NATIVE_DOUBLE, dims, values.data());
}

void strings(hid_t group, const char* name, const std::vector<std::string>& values) {
  std::vector<const char*> pointers;
  for (const auto& v : values) pointers.push_back(v.c_str());
  dataset(group, name, string_type(), {hsize_t(values.size())}, pointers.data());
}

/// An Eigen matrix in HDF5's row-major order.
std::vector<double> row_major(const Eigen::MatrixXd& matrix) {
  std::vector<double> out;
  for (Eigen::Index i = 0; i < matrix.rows(); ++i)
    for (Eigen::Index j = 0; j < matrix.cols(); ++j) out.push_back(matrix(i, j));
  return out;
}

void write_contents(hid_t file, const fitting::FitResult& fit, const MeasuredData& measured, const FitInfo& info) {
  string_attribute(file, "schema", "gratingsim.fit");
  scalar_attribute(file, "schema_version", H5T_NATIVE_INT32, std::int32_t(fit_schema_version));
  string_attribute(file, "gratingsim_version", GRATINGSIM_VERSION);
  scalar_attribute(file, "converged", H5T_NATIVE_UINT8, std::uint8_t(fit.converged));
  string_attribute(file, "reason", fit.reason);
  scalar_attribute(file, "chi2", H5T_NATIVE_DOUBLE, fit.chi2);
  scalar_attribute(file, "reduced_chi2", H5T_NATIVE_DOUBLE, fit.reduced_chi2);
  scalar_attribute(file, "degrees_of_freedom", H5T_NATIVE_INT64, std::int64_t(fit.degrees_of_freedom));
  string_attribute(file, "error_scaling", fit.error_scaling == fitting::ErrorScaling::none ? "none" : "reduced_chi2");
  scalar_attribute(file, "iterations", H5T_NATIVE_INT64, std::int64_t(fit.iterations));
  scalar_attribute(file, "model_calls", H5T_NATIVE_INT64, std::int64_t(fit.model_calls));
  scalar_attribute(file, "model_points", H5T_NATIVE_INT64, std::int64_t(fit.model_points));
  string_attribute(file, "backend", info.backend);
  string_attribute(file, "precision", info.precision);
  string_attribute(file, "formulation", info.formulation);
  string_attribute(file, "device", info.device);
  string_attribute(file, "measured_path", info.measured_path);
  string_attribute(file, "measured_kind", measured.kind == MeasuredKind::ellipsometry ? "ellipsometry" : "mueller");

  const auto n = hsize_t(fit.names.size());
  const Handle parameters = h5::group(H5Gcreate2(file, "parameters", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create /parameters");
  strings(parameters, "names", fit.names);
  strings(parameters, "units", info.parameter_units.empty() ? std::vector<std::string>(n) : info.parameter_units);
  doubles(parameters, "value", {n}, std::vector<double>(fit.parameters.begin(), fit.parameters.end()));
  doubles(parameters, "standard_error", {n}, std::vector<double>(fit.standard_errors.begin(), fit.standard_errors.end()));
  std::vector<std::uint8_t> at_bound(fit.at_bound.begin(), fit.at_bound.end());
  dataset(parameters, "at_bound", H5T_NATIVE_UINT8, {n}, at_bound.data());
  doubles(parameters, "covariance", {n, n}, row_major(fit.covariance));
  doubles(parameters, "correlation", {n, n}, row_major(fit.correlation));

  const auto rows = hsize_t(measured.rows()), q = hsize_t(measured.quantities.size());
  const Handle spectra = h5::group(H5Gcreate2(file, "spectra", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create /spectra");
  std::vector<double> wavelength, theta, phi;
  for (const MeasuredPoint& p : measured.points) {
    wavelength.push_back(p.wavelength_nm);
    theta.push_back(p.theta_deg);
    phi.push_back(p.phi_deg);
  }
  doubles(spectra, "wavelength", {rows}, wavelength);
  doubles(spectra, "theta", {rows}, theta);
  doubles(spectra, "phi", {rows}, phi);
  strings(spectra, "quantities", measured.quantities);
  doubles(spectra, "measured", {rows, q}, measured.values);
  doubles(spectra, "sigma", {rows, q}, measured.sigmas);
  doubles(spectra, "fitted", {rows, q}, std::vector<double>(fit.model.begin(), fit.model.end()));
  doubles(spectra, "residual", {rows, q}, std::vector<double>(fit.residuals.begin(), fit.residuals.end()));

  const auto k = hsize_t(fit.history.size());
  const Handle history = h5::group(H5Gcreate2(file, "history", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create /history");
  std::vector<double> values, chi2, lambda;
  for (const fitting::Iteration& step : fit.history) {
    values.insert(values.end(), step.parameters.begin(), step.parameters.end());
    chi2.push_back(step.chi2);
    lambda.push_back(step.lambda);
  }
  doubles(history, "parameters", {k, n}, values);
  doubles(history, "chi2", {k}, chi2);
  doubles(history, "lambda", {k}, lambda);

  if (!info.frozen.empty()) {  // harmonics: auto / slices: auto, resolved at the start and frozen
    const Handle accuracy = h5::group(H5Gcreate2(file, "accuracy", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create /accuracy");
    scalar_attribute(accuracy, "target_error", H5T_NATIVE_DOUBLE, info.target_error);
    string_attribute(accuracy, "resolved_at", "start parameters (history/parameters[0]), frozen for the whole fit");
    const auto w = hsize_t(info.frozen.size());
    std::vector<double> wavelength_nm, estimated_error;
    std::vector<std::int32_t> harmonics, slices, slice_factor;
    std::vector<std::uint8_t> reached;
    for (const FrozenAccuracy& f : info.frozen) {
      wavelength_nm.push_back(f.wavelength_nm);
      harmonics.insert(harmonics.end(), {std::int32_t(f.harmonics_x), std::int32_t(f.harmonics_y)});
      slices.push_back(std::int32_t(f.slices));
      slice_factor.push_back(std::int32_t(f.slice_factor));
      estimated_error.push_back(f.estimated_error);
      reached.push_back(f.target_reached ? 1 : 0);
    }
    doubles(accuracy, "wavelength", {w}, wavelength_nm);
    dataset(accuracy, "harmonics", H5T_NATIVE_INT32, {w, 2}, harmonics.data());
    dataset(accuracy, "slices", H5T_NATIVE_INT32, {w}, slices.data());
    dataset(accuracy, "slice_factor", H5T_NATIVE_INT32, {w}, slice_factor.data());
    doubles(accuracy, "estimated_error", {w}, estimated_error);
    dataset(accuracy, "target_reached", H5T_NATIVE_UINT8, {w}, reached.data());
  }

  const Handle input = h5::group(H5Gcreate2(file, "input", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create /input");
  string_attribute(input, "case_path", info.case_path);
  const Handle type = string_type();
  const Handle scalar = h5::dataspace(H5Screate(H5S_SCALAR), "create a scalar dataspace");
  const Handle text = h5::dataset(H5Dcreate2(input, "case", type, scalar, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create /input/case");
  const char* yaml = info.case_yaml.c_str();
  h5::check(H5Dwrite(text, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &yaml), "write /input/case");
}

/// Refuses a target that is not a regular file, or that exists without `replace`.
void check_target(const std::string& path, bool replace) {
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0) return;
  if (!S_ISREG(target.st_mode)) throw OutputError(path + " is not a regular file and is left untouched");
  if (!replace) throw OutputError(path + " exists and is not replaced without --overwrite");
}

}  // namespace

void write_fit_results(const std::string& path, const fitting::FitResult& fit, const MeasuredData& measured,
                       const FitInfo& info, bool replace) {
  const std::size_t n = fit.names.size(), m = measured.values.size();
  GS_EXPECTS(std::size_t(fit.parameters.size()) == n && std::size_t(fit.standard_errors.size()) == n &&
                 fit.at_bound.size() == n && std::size_t(fit.covariance.size()) == n * n &&
                 std::size_t(fit.correlation.size()) == n * n,
             "the fit result's parameter arrays disagree with its " + std::to_string(n) + " names");
  GS_EXPECTS(std::size_t(fit.model.size()) == m && std::size_t(fit.residuals.size()) == m && measured.sigmas.size() == m &&
                 m == measured.rows() * measured.quantities.size(),
             "the fitted spectra (" + std::to_string(fit.model.size()) + " values) must match the measured table (" +
                 std::to_string(measured.rows()) + " rows x " + std::to_string(measured.quantities.size()) + " quantities)");
  GS_EXPECTS(info.parameter_units.empty() || info.parameter_units.size() == n, "one unit per parameter, or none");
  h5::silence_errors();
  check_target(path, replace);
  std::filesystem::create_directories(std::filesystem::absolute(path).parent_path());
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  try {
    Handle file = h5::file(H5Fcreate(temporary.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create " + temporary);
    write_contents(file, fit, measured, info);
    file.close("close " + temporary);
    sync_file(temporary);  // durable before visible
    check_target(path, replace);  // again: the path may have appeared meanwhile
    std::error_code error;
    std::filesystem::rename(temporary, path, error);
    if (error) throw OutputError("cannot rename " + temporary + " to " + path + ": " + error.message());
  } catch (const Error& e) {
    ::unlink(temporary.c_str());
    throw OutputError("cannot write the fit file " + path + ": " + e.what());
  }
  try {
    sync_parent_directory(path);
  } catch (const FileError& e) {
    throw OutputError(path + " is complete, but its directory cannot be synced (" + e.what() + ")");
  }
}

}  // namespace gratingsim::io
