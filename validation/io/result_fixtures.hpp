#pragma once
// Shared by the io result tests: random layouts and point results, and a dump of a whole HDF5 file
// read through the plain C API (independent of io's reader) for comparing files.
#include <hdf5.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "validation/support/random.hpp"

namespace gratingsim::test {

inline double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng()); }

inline std::vector<double> random_reals(std::size_t n, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  for (auto& x : v) x = uniform(lo, hi);
  return v;
}

/// A layout with every feature: 3 × 2 × 2 sweep points, both polarisations, 5 orders, fields with two maps.
inline io::ResultLayout full_layout() {
  io::ResultLayout l;
  l.wavelength_nm = {400, 550.5, 700};
  l.theta_deg = {0, 35};
  l.phi_deg = {0, 45};
  l.polarization = io::Polarization::both;
  l.orders = {{-2, 0}, {-1, 0}, {0, 0}, {1, 0}, {2, 0}};
  l.fields = true;
  l.harmonics_x = 2;
  l.harmonics_y = 1;
  l.slice_center_nm = {75, 45, 15};
  l.maps = {{io::PlaneKind::xz, 0.0, {-100, 0, 100, 200}, {0, 50, 100}},
            {io::PlaneKind::xy, 60.0, {-100, 100}, {-50, 0, 50, 100, 150}}};
  l.accuracy = io::AccuracyTarget{true, true, 1e-3, 40, 96};
  return l;
}

inline io::RunInfo run_info() {
  io::RunInfo info;
  info.backend = "cpu-fftw";
  info.precision = "double";
  info.formulation = "normal-vector";
  info.device = "CPU (test)";
  info.input_units = "nm";
  info.case_path = "cases/example.yaml";
  info.case_yaml = "# a case\nwavelength: [400, 550.5, 700]\nunits: nm  # ünïcode ok\n";
  return info;
}

/// Fresh random values everywhere (never zeros), NaN directions for some "evanescent" orders.
inline io::PointResult random_point(const io::ResultLayout& l) {
  const std::size_t p = std::size_t(l.polarizations()), no = l.orders_count();
  io::PointResult r;
  r.reflectance = random_reals(p * no, 0.01, 1);
  r.transmittance = random_reals(p * no, 0.01, 1);
  r.jones_r = random_complex<double>(no * 2 * p);
  r.jones_t = random_complex<double>(no * 2 * p);
  r.reflected_direction = random_reals(no * 3);
  r.transmitted_direction = random_reals(no * 3);
  for (int c = 0; c < 3; ++c) r.reflected_direction[c] = std::numeric_limits<double>::quiet_NaN();
  r.psi_deg = uniform(0, 90);
  r.delta_deg = uniform(-180, 180);
  for (auto& m : r.mueller) m = uniform(-1, 1);
  r.absorption = random_reals(p, 0.01, 0.5);
  r.energy_balance_error = random_reals(p, 1e-9, 1e-6);
  for (std::size_t i = 0; i < p; ++i) r.iterations.push_back(std::int32_t(uniform(1, 400)));
  for (std::size_t i = 0; i < p; ++i) r.matvecs.push_back(std::int32_t(uniform(1, 4000)));
  r.residual = random_reals(p, 1e-12, 1e-8);
  for (std::size_t i = 0; i < p; ++i) r.converged.push_back(i % 2 ? 0 : 1);
  r.method = std::uint8_t(uniform(1, 4));  // 1, 2 or 3 (io::method_names)
  r.solve_seconds = uniform(0.1, 10);
  for (auto& s : r.phase_seconds) s = uniform(0, 2);
  if (l.accuracy) {
    r.used_harmonics = {std::int32_t(uniform(4, 40)), std::int32_t(uniform(4, 40))};
    r.used_slices = std::int32_t(uniform(3, 96));
    r.estimated_error = uniform(1e-6, 1e-2);
    if (p == 2) r.psi_change_deg = uniform(0, 1), r.delta_change_deg = uniform(0, 5);
    r.target_reached = r.estimated_error <= l.accuracy->target_error ? 1 : 0;
  }
  if (l.fields) {
    r.field_harmonics = random_complex<double>(p * l.slice_center_nm.size() * 3 * l.harmonics_count());
    for (const auto& m : l.maps)
      r.field_maps.push_back(random_complex<double>(p * 3 * m.first_nm.size() * m.second_nm.size()));
  }
  return r;
}

/// Every dataset and attribute of a file: path → bytes (variable-length strings as their text).
using FileDump = std::map<std::string, std::string>;

namespace detail {

inline std::string read_values(hid_t object, bool attribute) {
  const hid_t type = attribute ? H5Aget_type(object) : H5Dget_type(object);
  const hid_t space = attribute ? H5Aget_space(object) : H5Dget_space(object);
  const hssize_t count = H5Sget_simple_extent_npoints(space);
  std::string out;
  if (H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0) {
    std::vector<char*> strings(std::size_t(count), nullptr);
    const herr_t status = attribute ? H5Aread(object, type, strings.data())
                                    : H5Dread(object, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, strings.data());
    if (status < 0) throw std::runtime_error("reading strings failed");
    for (char* s : strings) {
      out += std::string("str:") + (s ? s : "") + '\n';
      H5free_memory(s);
    }
  } else if (H5Tget_class(type) == H5T_VLEN) {  // (DIMENSION_LIST: a list of scale references per dimension)
    std::vector<hvl_t> lists(static_cast<std::size_t>(count));
    const herr_t status = attribute ? H5Aread(object, type, lists.data())
                                    : H5Dread(object, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, lists.data());
    if (status < 0) throw std::runtime_error("reading variable-length values failed");
    const hid_t base = H5Tget_super(type);
    for (const hvl_t& list : lists)
      out += "vlen:" + std::string(static_cast<const char*>(list.p), list.len * H5Tget_size(base)) + '\n';
    H5Tclose(base);
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, lists.data());
  } else {
    out.resize(std::size_t(count) * H5Tget_size(type));
    const herr_t status = attribute ? H5Aread(object, type, out.data())
                                    : H5Dread(object, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
    if (status < 0) throw std::runtime_error("reading values failed");
    int rank = H5Sget_simple_extent_ndims(space);
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    std::string shape = "shape:";
    for (auto d : dims) shape += std::to_string(d) + ",";
    out = shape + "|" + out;
  }
  H5Sclose(space);
  H5Tclose(type);
  return out;
}

inline herr_t dump_attribute(hid_t object, const char* name, const H5A_info_t*, void* data) {
  auto& [dump, prefix] = *static_cast<std::pair<FileDump*, std::string>*>(data);
  const hid_t attribute = H5Aopen(object, name, H5P_DEFAULT);
  (*dump)[prefix + "@" + name] = read_values(attribute, true);
  H5Aclose(attribute);
  return 0;
}

inline void dump_attributes(hid_t object, const std::string& path, FileDump& dump) {
  std::pair<FileDump*, std::string> data{&dump, path};
  H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, nullptr, dump_attribute, &data);
}

inline herr_t dump_object(hid_t root, const char* name, const H5O_info_t* info, void* data) {
  auto& dump = *static_cast<FileDump*>(data);
  const hid_t object = H5Oopen(root, name, H5P_DEFAULT);
  dump_attributes(object, name, dump);
  if (info->type == H5O_TYPE_DATASET) dump[name] = read_values(object, false);
  H5Oclose(object);
  return 0;
}

}  // namespace detail

/// Reads a whole file through the HDF5 C API.
inline FileDump dump_file(const std::string& path) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw std::runtime_error("cannot open " + path);
  FileDump dump;
  H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, detail::dump_object, &dump);
  H5Fclose(file);
  return dump;
}

}  // namespace gratingsim::test
