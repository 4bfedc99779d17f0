// The HDF5 result schema (io/SCHEMA.md): writing, resuming and reading.
#include "io/results.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <utility>

#include "core/atomic_file.hpp"
#include "core/config.hpp"
#include "io/dimension_scales.hpp"
#include "io/hdf5_handles.hpp"
#include "io/result_fields.hpp"

namespace gratingsim::io {

// --- HDF5 plumbing ---------------------------------------------------------------------------
namespace h5 {

std::string last_error() {
  std::string message;
  const auto walk = [](unsigned n, const H5E_error2_t* error, void* data) -> herr_t {
    auto* out = static_cast<std::string*>(data);
    if (n == 0 && error->desc) *out = error->desc;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk, &message);
  H5Eclear2(H5E_DEFAULT);
  // A failed system call: HDF5's text ("file write failed: time = ..., errno = 27, error message =
  // 'File too large', buf = ...") shortened to the system's message, the cause a user can act on.
  const std::string marker = "error message = '";
  if (const auto at = message.find(marker); at != std::string::npos)
    if (const auto end = message.find('\'', at + marker.size()); end != std::string::npos)
      return message.substr(at + marker.size(), end - at - marker.size());
  return message;
}

void silence_errors() {
  (void)H5dont_atexit();  // fails, harmlessly, once the library is initialised: the first call decides
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

}  // namespace h5

namespace {

using h5::Handle;

const char* const schema_name = "gratingsim.result";

// Conventions written as root attributes: the physics of docs/formulation.md §1, §2, §8, §11 in words.
const std::pair<const char*, const char*> conventions[] = {
    {"time_dependence", "exp(-i*omega*t)"},
    {"plane_wave", "exp(i*(kx*x + ky*y + kz*z)); incidence from the superstrate (z > H), going down"},
    {"length_unit", "nm"},
    {"angle_unit", "deg"},
    {"jones_basis",
     "per order m: t = (kx, ky, 0)/k_rho (at k_rho = 0: (cos phi, sin phi, 0)); s = z x t (TE); "
     "p = (+kz t - k_rho z)/k for up-going (reflected), p = (-kz t - k_rho z)/k for down-going "
     "(transmitted, substrate kz and k); jones[..., o, out, in, :] = (s, p) amplitude of order o for unit "
     "incident amplitude in polarisation in (docs/formulation.md sections 2 and 8.3 of the gratingsim repository)"},
    {"phase_reference",
     "z = 0, the top of the substrate: reflected order m is a_m exp(i kz1 z), transmitted t_m exp(-i kz2 z)"},
    {"efficiency",
     "R_m = Re(kz1_m)/kz1_0 |a_m|^2, T_m = Re(kz2_m)/kz1_0 |t_m|^2 per unit incident power; 0 for evanescent "
     "orders; absorption = 1 - sum R - sum T"},
    {"ellipsometry",
     "order-0 reflection: tan(psi) exp(i delta) = r_pp / r_ss in the s/p basis above (the 'Nebraska' "
     "convention: r_pp = -r_ss at normal incidence, so delta = 180 deg there); psi in [0, 90] deg, "
     "delta in (-180, 180] deg"},
    {"mueller",
     "order-0 reflection, not normalised: M = A (J kron conj(J)) A^-1 in the (p, s) basis, "
     "J = [[r_pp, r_ps], [r_sp, r_ss]], A = [[1,0,0,1], [1,0,0,-1], [0,1,1,0], [0,i,-i,0]]: Stokes "
     "S = (|Ep|^2 + |Es|^2, |Ep|^2 - |Es|^2, 2 Re(Ep conj(Es)), -2 Im(Ep conj(Es))); M[0][0] = (R_s + R_p)/2"},
    {"complex_layout", "complex numbers as a trailing dimension of 2: [..., 0] real part, [..., 1] imaginary part"},
    {"point_order", "result datasets start with the sweep dimensions [wavelength, theta, phi]"},
};

using h5::string_type;

// -- attributes --
void write_string_attribute(hid_t object, const char* name, const std::string& value) {
  const Handle type = string_type();
  const Handle space = h5::dataspace(H5Screate(H5S_SCALAR), "create a scalar dataspace");
  const Handle attribute = h5::attribute(H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT),
                                         std::string("create attribute ") + name);
  const char* text = value.c_str();
  h5::check(H5Awrite(attribute, type, &text), std::string("write attribute ") + name);
}

template <class T>
hid_t native_type() {
  if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  if constexpr (std::is_same_v<T, std::int32_t>) return H5T_NATIVE_INT32;
  if constexpr (std::is_same_v<T, std::uint8_t>) return H5T_NATIVE_UINT8;
}

template <class T>
void write_scalar_attribute(hid_t object, const char* name, T value) {
  const Handle space = h5::dataspace(H5Screate(H5S_SCALAR), "create a scalar dataspace");
  const Handle attribute = h5::attribute(H5Acreate2(object, name, native_type<T>(), space, H5P_DEFAULT, H5P_DEFAULT),
                                         std::string("create attribute ") + name);
  h5::check(H5Awrite(attribute, native_type<T>(), &value), std::string("write attribute ") + name);
}

std::string read_string_attribute(hid_t object, const char* name) {
  const Handle attribute = h5::attribute(H5Aopen(object, name, H5P_DEFAULT), std::string("open attribute ") + name);
  const Handle type = string_type();
  char* text = nullptr;
  h5::check(H5Aread(attribute, type, &text), std::string("read attribute ") + name);
  std::string value = text ? text : "";
  H5free_memory(text);
  return value;
}

template <class T>
T read_scalar_attribute(hid_t object, const char* name) {
  const Handle attribute = h5::attribute(H5Aopen(object, name, H5P_DEFAULT), std::string("open attribute ") + name);
  T value{};
  h5::check(H5Aread(attribute, native_type<T>(), &value), std::string("read attribute ") + name);
  return value;
}

// -- small whole datasets --
template <class T>
void write_array(hid_t parent, const char* name, const std::vector<hsize_t>& dims, const T* data) {
  const Handle space = h5::dataspace(H5Screate_simple(int(dims.size()), dims.data(), nullptr), "create a dataspace");
  const Handle set =
      h5::dataset(H5Dcreate2(parent, name, native_type<T>(), space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  std::string("create dataset ") + name);
  h5::check(H5Dwrite(set, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), std::string("write dataset ") + name);
}

std::vector<hsize_t> dataset_dims(hid_t set, const std::string& name) {
  const Handle space = h5::dataspace(H5Dget_space(set), "get the dataspace of " + name);
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0) h5::fail("get the rank of " + name);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (H5Sget_simple_extent_dims(space, dims.data(), nullptr) < 0) h5::fail("get the shape of " + name);
  return dims;
}

template <class T>
std::vector<T> read_array(hid_t parent, const std::string& name, std::vector<hsize_t>* dims_out = nullptr) {
  const Handle set = h5::dataset(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), "open dataset " + name);
  const auto dims = dataset_dims(set, name);
  std::size_t count = 1;
  for (const auto d : dims) count *= std::size_t(d);
  std::vector<T> data(count);
  if (count)
    h5::check(H5Dread(set, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), "read dataset " + name);
  if (dims_out) *dims_out = dims;
  return data;
}

bool exists(hid_t parent, const std::string& path) {
  const htri_t found = H5Lexists(parent, path.c_str(), H5P_DEFAULT);
  if (found < 0) h5::fail("look up " + path);
  return found > 0;
}

// -- per-point datasets: the table of io/result_fields.hpp for one layout, shared by writer and reader --
struct Spec {
  const ResultField* field;
  std::size_t map;            // K of a field map's dataset
  std::string path;
  std::vector<hsize_t> tail;  // dimensions after the sweep dimensions
  std::size_t values;         // elements of one point (complex counted once)
  bool compressed;            // chunked one point per chunk, shuffle + gzip + Fletcher32; else contiguous
};

hid_t native(ElementKind kind) {
  switch (kind) {
    case ElementKind::f64:
    case ElementKind::c128:
      return H5T_NATIVE_DOUBLE;
    case ElementKind::i32:
      return H5T_NATIVE_INT32;
    case ElementKind::u8:
      return H5T_NATIVE_UINT8;
  }
  return H5T_NATIVE_DOUBLE;
}
hid_t file_type(ElementKind kind) {
  switch (kind) {
    case ElementKind::f64:
    case ElementKind::c128:
      return H5T_IEEE_F64LE;
    case ElementKind::i32:
      return H5T_STD_I32LE;
    case ElementKind::u8:
      return H5T_STD_U8LE;
  }
  return H5T_IEEE_F64LE;
}

std::string map_group(std::size_t k) { return "fields/map_" + std::to_string(k); }

constexpr const char* phase_dataset = "solver/phase_seconds";
constexpr const char* method_dataset = "solver/method";

std::vector<Spec> point_specs(const ResultLayout& l) {
  std::vector<Spec> specs;
  for (const ResultDataset& d : result_datasets(l))
    specs.push_back({d.field, d.map, d.path, std::vector<hsize_t>(d.tail.begin(), d.tail.end()), d.values(),
                     d.field->chunked()});
  return specs;
}

/// The sweep axes in the order of the per-point datasets' leading dimensions: the parameters (schema
/// version 2), then wavelength, θ, φ; each a dataset sweep/NAME with a `units` attribute.
struct SweepAxis {
  std::string name;
  const std::vector<double>* values;
  std::string units;
};
std::vector<SweepAxis> sweep_axes(const ResultLayout& l) {
  std::vector<SweepAxis> axes;
  for (const auto& p : l.parameters) axes.push_back({p.name, &p.values, "as written in input/case"});
  axes.push_back({"wavelength", &l.wavelength_nm, "nm"});
  axes.push_back({"theta", &l.theta_deg, "deg"});
  axes.push_back({"phi", &l.phi_deg, "deg"});
  return axes;
}

std::vector<hsize_t> full_dims(const ResultLayout& l, const Spec& s) {
  std::vector<hsize_t> dims;
  for (const auto& axis : sweep_axes(l)) dims.push_back(axis.values->size());
  dims.insert(dims.end(), s.tail.begin(), s.tail.end());
  return dims;
}

void create_point_dataset(hid_t file, const ResultLayout& l, const Spec& s) {
  const auto dims = full_dims(l, s);
  const Handle space = h5::dataspace(H5Screate_simple(int(dims.size()), dims.data(), nullptr), "create a dataspace");
  const Handle create = h5::plist(H5Pcreate(H5P_DATASET_CREATE), "create a dataset property list");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::int32_t minus_one = -1;
  const std::uint8_t zero = 0;
  const ElementKind kind = s.field->kind;
  const void* fill = kind == ElementKind::i32  ? static_cast<const void*>(&minus_one)
                     : kind == ElementKind::u8 ? static_cast<const void*>(&zero)
                                               : static_cast<const void*>(&nan);
  h5::check(H5Pset_fill_value(create, native(kind), fill), "set the fill value of " + s.path);
  if (s.compressed) {
    // One point per chunk: each point is written once, and a reader of one point inflates one chunk.
    std::vector<hsize_t> chunk = dims;
    std::fill_n(chunk.begin(), l.parameters.size() + 3, hsize_t(1));
    h5::check(H5Pset_chunk(create, int(chunk.size()), chunk.data()), "set the chunking of " + s.path);
    h5::check(H5Pset_shuffle(create), "enable shuffling for " + s.path);
    h5::check(H5Pset_deflate(create, 4), "enable gzip for " + s.path);
    // A checksum per chunk: a damaged chunk fails to read instead of returning wrong numbers.
    h5::check(H5Pset_fletcher32(create), "enable Fletcher32 checksums for " + s.path);
  } else {
    // Contiguous and allocated (NaN-filled) now: writing a point then only overwrites raw data in
    // place, so an interruption during a point cannot damage the file's structure.
    h5::check(H5Pset_layout(create, H5D_CONTIGUOUS), "set the layout of " + s.path);
    h5::check(H5Pset_alloc_time(create, H5D_ALLOC_TIME_EARLY), "set early allocation for " + s.path);
    h5::check(H5Pset_fill_time(create, H5D_FILL_TIME_ALLOC), "set the fill time of " + s.path);
  }
  const Handle links = h5::plist(H5Pcreate(H5P_LINK_CREATE), "create a link property list");
  h5::check(H5Pset_create_intermediate_group(links, 1), "allow intermediate groups");
  h5::dataset(H5Dcreate2(file, s.path.c_str(), file_type(s.field->kind), space, links, create, H5P_DEFAULT),
              "create dataset " + s.path);
}

/// Reads or writes one point's block of a per-point dataset.
/// Writes from `data`, or reads into it (then it points to a non-const object).
void transfer_point(hid_t set, const ResultLayout& l, const Spec& s, std::size_t point, const void* data, bool write) {
  const auto dims = full_dims(l, s);
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  const std::vector<std::size_t> index = l.sweep_indices(point);
  std::copy(index.begin(), index.end(), start.begin());
  std::fill_n(count.begin(), index.size(), hsize_t(1));
  const Handle file_space = h5::dataspace(H5Dget_space(set), "get the dataspace of " + s.path);
  h5::check(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
            "select point " + std::to_string(point) + " of " + s.path);
  const Handle memory_space =
      s.tail.empty()
          ? h5::dataspace(H5Screate(H5S_SCALAR), "create a scalar dataspace")
          : h5::dataspace(H5Screate_simple(int(s.tail.size()), s.tail.data(), nullptr), "create a dataspace");
  const herr_t status =
      write ? H5Dwrite(set, native(s.field->kind), memory_space, file_space, H5P_DEFAULT, data)
            : H5Dread(set, native(s.field->kind), memory_space, file_space, H5P_DEFAULT, const_cast<void*>(data));
  h5::check(status, std::string(write ? "write" : "read") + " point " + std::to_string(point) + " of " + s.path);
}

/// The bytes of each per-point dataset for one point, in spec order (pointers into `r` or `scratch`).
struct PointBuffers {
  std::vector<const void*> data;
  std::vector<std::vector<double>> scratch;  // |E| maps, computed from the components
  std::uint8_t done = 1;
};

template <class T>
inline constexpr bool is_array = false;
template <class T, std::size_t N>
inline constexpr bool is_array<std::array<T, N>> = true;

/// For writing (R = const PointResult) the sizes of r's vectors are checked; for reading
/// (R = PointResult) they are sized to the layout.
template <class R>
PointBuffers buffers(const ResultLayout& l, const std::vector<Spec>& specs, R& r) {
  constexpr bool for_write = std::is_const_v<R>;
  PointBuffers b;
  b.scratch.reserve(l.maps.size());
  const auto sized = [&](auto& v, std::size_t n, const std::string& name) {
    if constexpr (for_write)
      GS_EXPECTS(v.size() == n, "PointResult::" + name + " has " + std::to_string(v.size()) +
                                 " values, the layout needs " + std::to_string(n));
    else
      v.resize(n);
    return static_cast<const void*>(v.data());
  };
  for (const auto& s : specs) {
    const std::string name(s.field->member);
    b.data.push_back(std::visit(
        [&](auto member) -> const void* {
          using Source = decltype(member);
          if constexpr (std::is_same_v<Source, DoneFlag>) {
            return &b.done;
          } else if constexpr (std::is_same_v<Source, MapMagnitude>) {
            // Written from field_maps[K] (sized by the map's E, the row before); read into scratch.
            const std::size_t cells = s.values / std::size_t(l.polarizations());
            auto& norm = b.scratch.emplace_back(s.values);
            if constexpr (for_write)  // |E| = sqrt(|Ex|² + |Ey|² + |Ez|²)
              for (std::size_t i = 0; i < std::size_t(l.polarizations()); ++i)
                for (std::size_t c = 0; c < cells; ++c) {
                  double sum = 0;
                  for (std::size_t comp = 0; comp < 3; ++comp)
                    sum += std::norm(r.field_maps[s.map][(i * 3 + comp) * cells + c]);
                  norm[i * cells + c] = std::sqrt(sum);
                }
            return norm.data();
          } else {
            auto& value = r.*member;
            using T = std::remove_cvref_t<decltype(value)>;
            if constexpr (std::is_same_v<T, std::vector<std::vector<std::complex<double>>>>) {  // field_maps
              if (s.map == 0) sized(value, l.maps.size(), name);
              return sized(value[s.map], s.values, name + "[" + std::to_string(s.map) + "]");
            } else if constexpr (std::is_arithmetic_v<T>) {
              return &value;
            } else if constexpr (is_array<T>) {
              GS_EXPECTS(value.size() == s.values, "PointResult::" + name + " does not have the shape of " + s.path);
              return value.data();
            } else {
              return sized(value, s.values, name);
            }
          }
        },
        s.field->source));
  }
  return b;
}

// -- layout and info as stored --
void write_metadata(hid_t file, const ResultLayout& l, const RunInfo& info) {
  write_string_attribute(file, "schema", schema_name);
  write_scalar_attribute<std::int32_t>(file, "schema_version", l.schema_version());
  write_string_attribute(file, "gratingsim_version", GRATINGSIM_VERSION);
  std::string axis_names;  // "cd, height, wavelength, theta, phi"
  for (const auto& axis : sweep_axes(l)) axis_names += (axis_names.empty() ? "" : ", ") + axis.name;
  for (const auto& [name, value] : conventions)
    write_string_attribute(file, name,
                           std::string(name) == "point_order" && !l.parameters.empty()
                               ? "result datasets start with the sweep dimensions [" + axis_names + "]"
                               : std::string(value));
  write_string_attribute(file, "input_units", info.input_units);
  write_string_attribute(file, "backend", info.backend);
  write_string_attribute(file, "precision", info.precision);
  write_string_attribute(file, "formulation", info.formulation);
  write_string_attribute(file, "device", info.device);
  write_string_attribute(file, "polarization", std::string(to_string(l.polarization)));

  const Handle input =
      h5::group(H5Gcreate2(file, "input", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create group input");
  {
    const Handle type = string_type();
    const Handle space = h5::dataspace(H5Screate(H5S_SCALAR), "create a scalar dataspace");
    const Handle set = h5::dataset(H5Dcreate2(input, "case", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                   "create dataset input/case");
    const char* text = info.case_yaml.c_str();
    h5::check(H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text), "write dataset input/case");
    write_string_attribute(set, "path", info.case_path);
    if (!info.inputs_digest.empty()) write_string_attribute(set, "inputs_digest", info.inputs_digest);
  }

  const Handle sweep =
      h5::group(H5Gcreate2(file, "sweep", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create group sweep");
  // Version 2: the axes' order (HDF5 lists a group's members by name).
  if (!l.parameters.empty()) write_string_attribute(sweep, "axes", axis_names);
  for (const auto& axis : sweep_axes(l)) {
    write_array(sweep, axis.name.c_str(), {axis.values->size()}, axis.values->data());
    const Handle set = h5::dataset(H5Dopen2(sweep, axis.name.c_str(), H5P_DEFAULT), "open sweep/" + axis.name);
    write_string_attribute(set, "units", axis.units);
  }
  std::vector<std::int32_t> orders;
  for (const auto& o : l.orders) orders.insert(orders.end(), {o[0], o[1]});
  write_array(file, "orders", {l.orders.size(), 2}, orders.data());
  {
    const Handle set = h5::dataset(H5Dopen2(file, "orders", H5P_DEFAULT), "open orders");
    write_string_attribute(set, "columns", "m1, m2: kx = kx0 + 2 pi m1 / period_x, ky = ky0 + 2 pi m2 / period_y");
  }

  if (l.accuracy) {
    const Handle group =
        h5::group(H5Gcreate2(file, "accuracy", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create group accuracy");
    const AccuracyTarget& a = *l.accuracy;
    write_string_attribute(group, "raised",
                           a.harmonics && a.slices ? "harmonics, slices" : a.harmonics ? "harmonics" : "slices");
    write_scalar_attribute<double>(group, "target_error", a.target_error);
    write_scalar_attribute<std::int32_t>(group, "max_harmonics", a.max_harmonics);
    write_scalar_attribute<std::int32_t>(group, "max_slices", a.max_slices);
  }
  if (!l.fields) return;
  const Handle fields =
      h5::group(H5Gcreate2(file, "fields", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create group fields");
  write_scalar_attribute<std::int32_t>(fields, "harmonics_x", l.harmonics_x);
  write_scalar_attribute<std::int32_t>(fields, "harmonics_y", l.harmonics_y);
  write_array(fields, "slice_z", {l.slice_center_nm.size()}, l.slice_center_nm.data());
  std::vector<std::int32_t> index;
  for (int m1 = -l.harmonics_x; m1 <= l.harmonics_x; ++m1)
    for (int m2 = -l.harmonics_y; m2 <= l.harmonics_y; ++m2) index.insert(index.end(), {m1, m2});
  write_array(fields, "harmonic_index", {l.harmonics_count(), 2}, index.data());
  for (std::size_t k = 0; k < l.maps.size(); ++k) {
    const auto& m = l.maps[k];
    const Handle g = h5::group(H5Gcreate2(file, map_group(k).c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                               "create group " + map_group(k));
    write_string_attribute(g, "plane", std::string(to_string(m.kind)));
    write_scalar_attribute<double>(g, "position", m.position_nm);
    write_array(g, "first", {m.first_nm.size()}, m.first_nm.data());
    write_array(g, "second", {m.second_nm.size()}, m.second_nm.data());
  }
}

RunInfo read_info(hid_t file) {
  RunInfo info;
  info.input_units = read_string_attribute(file, "input_units");
  info.backend = read_string_attribute(file, "backend");
  info.precision = read_string_attribute(file, "precision");
  // Files written before the option existed were computed with Laurent's rule.
  info.formulation = H5Aexists(file, "formulation") > 0 ? read_string_attribute(file, "formulation") : "laurent";
  info.device = read_string_attribute(file, "device");
  const Handle set = h5::dataset(H5Dopen2(file, "input/case", H5P_DEFAULT), "open dataset input/case");
  const Handle type = string_type();
  char* text = nullptr;
  h5::check(H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text), "read dataset input/case");
  info.case_yaml = text ? text : "";
  H5free_memory(text);
  info.case_path = read_string_attribute(set, "path");
  if (H5Aexists(set, "inputs_digest") > 0) info.inputs_digest = read_string_attribute(set, "inputs_digest");
  return info;
}

ResultLayout read_layout(hid_t file, const std::string& path) {
  if (H5Aexists(file, "schema") <= 0 || read_string_attribute(file, "schema") != schema_name)
    throw OutputError(path + ": not a gratingsim result file (no 'schema' attribute \"" + schema_name + "\")");
  const int version = read_scalar_attribute<std::int32_t>(file, "schema_version");
  if (version < 1 || version > result_schema_version)
    throw OutputError(path + ": result schema version " + std::to_string(version) + ", this build reads versions 1 to " +
                      std::to_string(result_schema_version));
  ResultLayout l;
  if (version >= 2) {
    const Handle sweep = h5::group(H5Gopen2(file, "sweep", H5P_DEFAULT), "open group sweep");
    const std::string axes = read_string_attribute(sweep, "axes");
    for (std::size_t start = 0; start < axes.size();) {
      std::size_t end = axes.find(", ", start);
      if (end == std::string::npos) end = axes.size();
      const std::string name = axes.substr(start, end - start);
      start = end + 2;
      if (name == "wavelength" || name == "theta" || name == "phi") continue;
      l.parameters.push_back({name, read_array<double>(file, "sweep/" + name)});
    }
  }
  l.wavelength_nm = read_array<double>(file, "sweep/wavelength");
  l.theta_deg = read_array<double>(file, "sweep/theta");
  l.phi_deg = read_array<double>(file, "sweep/phi");
  const std::string pol = read_string_attribute(file, "polarization");
  l.polarization = pol == "s" ? Polarization::s : pol == "p" ? Polarization::p : Polarization::both;
  const auto orders = read_array<std::int32_t>(file, "orders");
  for (std::size_t i = 0; i + 1 < orders.size(); i += 2) l.orders.push_back({orders[i], orders[i + 1]});
  l.fields = exists(file, "fields");
  if (l.fields) {
    const Handle fields = h5::group(H5Gopen2(file, "fields", H5P_DEFAULT), "open group fields");
    l.harmonics_x = read_scalar_attribute<std::int32_t>(fields, "harmonics_x");
    l.harmonics_y = read_scalar_attribute<std::int32_t>(fields, "harmonics_y");
    l.slice_center_nm = read_array<double>(fields, "slice_z");
    for (std::size_t k = 0; exists(file, map_group(k)); ++k) {
      const Handle g = h5::group(H5Gopen2(file, map_group(k).c_str(), H5P_DEFAULT), "open group " + map_group(k));
      MapLayout m;
      const std::string plane = read_string_attribute(g, "plane");
      m.kind = plane == "xz" ? PlaneKind::xz : plane == "yz" ? PlaneKind::yz : PlaneKind::xy;
      m.position_nm = read_scalar_attribute<double>(g, "position");
      m.first_nm = read_array<double>(g, "first");
      m.second_nm = read_array<double>(g, "second");
      l.maps.push_back(std::move(m));
    }
  }
  if (exists(file, "accuracy")) {
    const Handle group = h5::group(H5Gopen2(file, "accuracy", H5P_DEFAULT), "open group accuracy");
    AccuracyTarget a;
    const std::string raised = read_string_attribute(group, "raised");
    a.harmonics = raised.find("harmonics") != std::string::npos;
    a.slices = raised.find("slices") != std::string::npos;
    a.target_error = read_scalar_attribute<double>(group, "target_error");
    a.max_harmonics = read_scalar_attribute<std::int32_t>(group, "max_harmonics");
    a.max_slices = read_scalar_attribute<std::int32_t>(group, "max_slices");
    l.accuracy = a;
  }
  return l;
}

/// The first difference between what a partial file holds and what a resumed run would write.
std::string difference(const ResultLayout& a, const RunInfo& ai, const ResultLayout& b, const RunInfo& bi) {
  if (ai.case_yaml != bi.case_yaml) return "the input case text";
  if (a.parameters != b.parameters) return "the parameter axes";
  if (a.wavelength_nm != b.wavelength_nm) return "the wavelength axis";
  if (a.theta_deg != b.theta_deg) return "the theta axis";
  if (a.phi_deg != b.phi_deg) return "the phi axis";
  if (a.polarization != b.polarization) return "the incident polarisations";
  if (a.orders != b.orders) return "the stored diffraction orders";
  if (!(a.fields == b.fields && a.harmonics_x == b.harmonics_x && a.harmonics_y == b.harmonics_y &&
        a.slice_center_nm == b.slice_center_nm && a.maps == b.maps))
    return "the field output";
  if (a.accuracy != b.accuracy) return "the accuracy settings (numerics.target_error, max_harmonics, max_slices)";
  if (ai.backend != bi.backend) return "the backend ('" + ai.backend + "' there, '" + bi.backend + "' now)";
  if (ai.precision != bi.precision) return "the precision ('" + ai.precision + "' there, '" + bi.precision + "' now)";
  if (ai.formulation != bi.formulation)
    return "the formulation ('" + ai.formulation + "' there, '" + bi.formulation + "' now)";
  if (ai.input_units != bi.input_units) return "the input units";
  // The case is identified by its content and that of the files it reads, not by the spelling of
  // its path (./w.yaml, /abs/w.yaml and another working directory are the same case).
  if (ai.inputs_digest != bi.inputs_digest) return "the content of a file the case reads (a material table or raster array)";
  return "";
}

void check_layout(const ResultLayout& l) {
  GS_EXPECTS(!l.wavelength_nm.empty() && !l.theta_deg.empty() && !l.phi_deg.empty(), "every sweep axis needs a value");
  for (const auto& p : l.parameters) {
    GS_EXPECTS(!p.values.empty(), "every sweep axis needs a value");
    GS_EXPECTS(!p.name.empty() && p.name != "wavelength" && p.name != "theta" && p.name != "phi" &&
                   p.name.find_first_of(", /") == std::string::npos,
               "parameter axis '" + p.name + "': not a name a result file can hold");
  }
  GS_EXPECTS(l.parameter_points() == 1 || !l.fields, "field output is not stored with a parameter sweep");
  GS_EXPECTS(!l.orders.empty(), "a result file stores at least one diffraction order");
  if (l.fields) {
    GS_EXPECTS(!l.slice_center_nm.empty(), "field output needs the slice positions");
    for (const auto& m : l.maps)
      GS_EXPECTS(!m.first_nm.empty() && !m.second_nm.empty(), "a field map needs grid coordinates");
  }
}

struct OpenDatasets {
  std::vector<Spec> specs;
  std::vector<Handle> sets;
};

OpenDatasets open_point_datasets(hid_t file, const ResultLayout& l) {
  OpenDatasets d;
  d.specs = point_specs(l);
  // Files written before solver/phase_seconds or solver/method existed are read (and resumed) without them.
  std::erase_if(d.specs, [&](const Spec& s) {
    return (s.path == phase_dataset || s.path == method_dataset) && H5Lexists(file, s.path.c_str(), H5P_DEFAULT) <= 0;
  });
  for (const auto& s : d.specs) {
    d.sets.push_back(h5::dataset(H5Dopen2(file, s.path.c_str(), H5P_DEFAULT), "open dataset " + s.path));
    const auto expected = full_dims(l, s);
    if (dataset_dims(d.sets.back(), s.path) != expected)
      throw OutputError("dataset " + s.path + " has the wrong shape for this layout");
  }
  return d;
}

/// The done flags, each 0 or 1: any other value means a damaged file (it would pass NaN points as done).
std::vector<std::uint8_t> read_done(hid_t file, const std::string& path) {
  std::vector<std::uint8_t> done = read_array<std::uint8_t>(file, "done");
  for (std::size_t p = 0; p < done.size(); ++p)
    if (done[p] > 1)
      throw OutputError(path + ": the done flag of point " + std::to_string(p) + " is " + std::to_string(done[p]) +
                        " (0 or 1 expected)");
  return done;
}

/// An existing result file opened and checked: its layout, run, datasets and done flags.
struct Opened {
  Handle file;
  ResultLayout layout;
  RunInfo info;
  OpenDatasets datasets;
  std::vector<std::uint8_t> done;
};

/// Opens a result file; any failure (not HDF5, truncated, a flipped byte in its structure, a done
/// flag that is neither 0 nor 1) is an OutputError saying the file is damaged, with `advice`.
Opened open_result(const std::string& path, unsigned flags, const std::string& advice) {
  Opened o;
  try {
    o.file = h5::file(H5Fopen(path.c_str(), flags, H5P_DEFAULT), "open " + path);
    o.layout = read_layout(o.file, path);
    o.info = read_info(o.file);
    o.datasets = open_point_datasets(o.file, o.layout);
    o.done = read_done(o.file, path);
  } catch (const OutputError& e) {
    throw OutputError(path + " is damaged or not a gratingsim result file: " + e.what() + advice);
  }
  return o;
}

/// What to do with a partial file that cannot be resumed.
std::string resume_advice(const std::string& partial) {
  return "\n  to start again: delete " + partial + " (its finished points are lost), or run without --resume, "
         "which replaces it";
}

/// Claims `bytes` beyond the end of `path` from the file system and gives them back at once: the
/// next writes then fit (unless another process takes the space meanwhile), and a full disk (ENOSPC),
/// a quota (EDQUOT) or a file-size limit (EFBIG: `ulimit -f`) is reported here, before HDF5 writes a
/// byte, instead of in the middle of a flush that would leave the file half updated.
void claim_space(const std::string& path, std::size_t bytes, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);  // (glibc emulates fallocate by reads and writes)
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw OutputError(what + ": " + std::strerror(error));
  }
  int error = ::posix_fallocate(fd, st.st_size, off_t(bytes));
  if (::ftruncate(fd, st.st_size) != 0 && error == 0) error = errno;
  ::close(fd);
  if (error == EFBIG) throw OutputError(what + ": " + std::strerror(error) + " (over the file-size limit, `ulimit -f`)");
  if (error != 0) throw OutputError(what + ": " + std::strerror(error));
}

/// The most a point can add to the file: its chunked (field) datasets uncompressed, with gzip's worst
/// case and the checksums, plus 64 KiB for the chunk index and HDF5's allocation blocks. The
/// contiguous datasets were allocated with the file.
std::size_t growth_per_point(const std::vector<Spec>& specs) {
  std::size_t bytes = 0;
  for (const Spec& s : specs) {
    if (!s.compressed) continue;
    std::size_t n = stored_element_bytes(s.field->kind);
    for (const hsize_t d : s.tail) n *= std::size_t(d);
    bytes += n + n / 8 + 64;
  }
  return bytes + (64u << 10);
}

}  // namespace

std::string partial_path(const std::string& path) { return path + ".partial"; }

// --- ResultWriter ----------------------------------------------------------------------------

std::string lock_path(const std::string& path) { return path + ".lock"; }

// --- OutputLock ------------------------------------------------------------------------------

OutputLock::OutputLock(const std::string& path) : path_(lock_path(path)) {
  const auto fail = [&](const std::string& why) {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
    throw OutputError(why);
  };
  // A finishing holder removes the lock file: a lock taken on the removed file is no lock, so the
  // file locked must still be the one at the path (else take the new one).
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create the lock file " + path_ + ": " + std::strerror(errno));
    struct stat locked {}, now {};
    if (::fstat(fd_, &locked) != 0 || !S_ISREG(locked.st_mode))
      fail(path_ + " (the lock file of " + path + ") is not a regular file; remove it");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) fail("cannot lock " + path_ + ": " + std::strerror(errno));
      char holder[256] = {};
      const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
      fail(path + " is being written by another gratingsim run (" +
           (n > 0 ? std::string(holder, std::size_t(n)) : std::string("a process that just started")) +
           ", holding " + path_ + "); wait for it to finish, or stop it and run again with --resume");
    }
    if (::stat(path_.c_str(), &now) == 0 && now.st_dev == locked.st_dev && now.st_ino == locked.st_ino) break;
    ::close(std::exchange(fd_, -1));
    if (attempt == 100) fail("cannot lock " + path_ + ": it is replaced again and again");
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string holder = "pid " + std::to_string(::getpid()) + " on " + host;
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, holder.data(), holder.size(), 0) != ssize_t(holder.size()))
    fail("cannot write the lock file " + path_ + ": " + std::strerror(errno));
}

OutputLock::~OutputLock() {
  ::unlink(path_.c_str());  // while still locked: no other run can hold the file being removed
  ::close(fd_);
}

// --- ResultWriter ----------------------------------------------------------------------------

struct ResultWriter::State {
  std::string path;
  ResultLayout layout;
  Handle file;
  OpenDatasets datasets;
  std::vector<std::uint8_t> done;
  std::size_t growth = 0;  ///< growth_per_point: claimed before each point
  bool finished = false;
  /// HDF5 failed while writing: its view of the file no longer matches the disk, and closing would
  /// flush it (HDF5 1.10 may crash doing so). The handles are given up unclosed, the file left as is.
  bool broken = false;
  ~State() {
    if (!broken) return;
    for (Handle& set : datasets.sets) set.release();
    file.release();
  }
};

ResultWriter::ResultWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
ResultWriter::ResultWriter(ResultWriter&&) noexcept = default;
ResultWriter& ResultWriter::operator=(ResultWriter&&) noexcept = default;
ResultWriter::~ResultWriter() = default;

ResultWriter ResultWriter::create(const std::string& path, const ResultLayout& layout, const RunInfo& info) {
  check_layout(layout);
  h5::silence_errors();
  auto s = std::make_unique<State>();
  s->path = path;
  s->layout = layout;
  const std::string partial = partial_path(path);
  try {
    s->file = h5::file(H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create " + partial);
    write_metadata(s->file, layout, info);
    for (const auto& spec : point_specs(layout)) create_point_dataset(s->file, layout, spec);
    write_dimension_scales(s->file, layout);
    s->datasets = open_point_datasets(s->file, layout);
    std::string names;  // the phases of solver/phase_seconds, in order
    for (const std::string_view n : physics::phase_names) {
      if (!names.empty()) names += ',';
      names += n;
    }
    const Handle phases = h5::dataset(H5Dopen2(s->file, phase_dataset, H5P_DEFAULT), "open dataset " + std::string(phase_dataset));
    write_string_attribute(phases, "phases", names);
    std::string methods;  // the values of solver/method: "0 not recorded,1 gmres,..."
    for (std::size_t k = 0; k < method_names.size(); ++k)
      methods += (k ? "," : "") + std::to_string(k) + ' ' + method_names[k];
    const Handle method = h5::dataset(H5Dopen2(s->file, method_dataset, H5P_DEFAULT), "open dataset " + std::string(method_dataset));
    write_string_attribute(method, "methods", methods);
    h5::check(H5Fflush(s->file, H5F_SCOPE_LOCAL), "flush " + partial);
  } catch (const OutputError& e) {
    // Nothing of value in it yet: removed, and HDF5 does not touch it again.
    s->broken = s->file.valid();
    if (s->file.valid()) ::unlink(partial.c_str());
    throw OutputError("cannot create " + partial + ": " + e.what());
  }
  s->done.assign(layout.points(), 0);
  s->growth = growth_per_point(s->datasets.specs);
  return ResultWriter(std::move(s));
}

ResultWriter ResultWriter::resume(const std::string& path, const ResultLayout& layout, const RunInfo& info) {
  check_layout(layout);
  h5::silence_errors();
  const std::string partial = partial_path(path);
  if (!std::filesystem::exists(partial))
    throw OutputError("cannot resume: " + partial + " does not exist (nothing was interrupted, or it was removed)");
  Opened o = open_result(partial, H5F_ACC_RDWR, resume_advice(partial));
  if (const std::string what = difference(o.layout, o.info, layout, info); !what.empty())
    throw OutputError("cannot resume: " + partial + " was written for a different run (" + what +
                      " differs); remove it or run without --resume");
  auto s = std::make_unique<State>();
  s->path = path;
  s->layout = layout;
  s->file = std::move(o.file);
  s->datasets = std::move(o.datasets);
  s->done = std::move(o.done);
  s->growth = growth_per_point(s->datasets.specs);
  // The checksummed (field) chunks of every finished point are read once: a damaged one is found
  // now, not after the rename has published the file.
  PointResult check;
  const PointBuffers b = buffers(layout, s->datasets.specs, check);
  for (std::size_t p = 0; p < s->done.size(); ++p)
    for (std::size_t i = 0; i < s->datasets.specs.size() && s->done[p]; ++i) try {
        if (s->datasets.specs[i].compressed)
          transfer_point(s->datasets.sets[i], layout, s->datasets.specs[i], p, b.data[i], false);
      } catch (const OutputError& e) {
        throw OutputError(partial + " is damaged: " + e.what() + resume_advice(partial));
      }
  // Another device (another GPU model, more MPI ranks) continues the same computation, to solver
  // tolerance: allowed, and recorded, so that the file says where its points were solved.
  const std::string resumed_on = "; resumed on " + info.device;
  if (o.info.device != info.device && !o.info.device.ends_with(resumed_on)) {
    h5::check(H5Adelete(s->file, "device"), "replace attribute device");
    write_string_attribute(s->file, "device", o.info.device + resumed_on);
  }
  return ResultWriter(std::move(s));
}

const ResultLayout& ResultWriter::layout() const { return state_->layout; }

bool ResultWriter::done(std::size_t point) const {
  GS_EXPECTS(point < state_->done.size(), "point index out of range");
  return state_->done[point] != 0;
}

std::size_t ResultWriter::points_done() const {
  std::size_t n = 0;
  for (const auto d : state_->done) n += d != 0;
  return n;
}

void ResultWriter::write(std::size_t point, const PointResult& result) {
  State& s = *state_;
  const std::string partial = partial_path(s.path);
  GS_EXPECTS(!s.finished, "the result file is already finished");
  if (s.broken) throw OutputError("an earlier write to " + partial + " failed; nothing more is written to it");
  GS_EXPECTS(point < s.done.size(), "point index " + std::to_string(point) + " out of range");
  GS_EXPECTS(!s.done[point],
          "point " + std::to_string(point) + " is already written (finished points are never rewritten)");
  const PointBuffers b = buffers(s.layout, s.datasets.specs, result);
  const std::string what = "cannot write point " + std::to_string(point) + " to " + partial;
  claim_space(partial, s.growth, what);
  // The data reach the file (a flush) before the done flag (the last spec) does: a flag of 1 on
  // disk always follows complete data, whatever order HDF5 writes its caches in.
  const std::size_t flag = s.datasets.specs.size() - 1;
  try {
    for (std::size_t i = 0; i < flag; ++i)
      transfer_point(s.datasets.sets[i], s.layout, s.datasets.specs[i], point, b.data[i], true);
    h5::check(H5Fflush(s.file, H5F_SCOPE_LOCAL), "flush " + partial);
    transfer_point(s.datasets.sets[flag], s.layout, s.datasets.specs[flag], point, b.data[flag], true);
    h5::check(H5Fflush(s.file, H5F_SCOPE_LOCAL), "flush " + partial);
  } catch (const OutputError& e) {
    s.broken = true;
    throw OutputError(what + ": " + e.what());
  }
  s.done[point] = 1;
}

void ResultWriter::record_writing(std::span<const std::size_t> points, double seconds) {
  State& s = *state_;
  const std::string partial = partial_path(s.path);
  GS_EXPECTS(!s.finished, "the result file is already finished");
  if (s.broken) throw OutputError("an earlier write to " + partial + " failed; nothing more is written to it");
  const auto at = std::find_if(s.datasets.specs.begin(), s.datasets.specs.end(),
                               [](const Spec& spec) { return spec.path == phase_dataset; });
  if (at == s.datasets.specs.end()) return;  // a file resumed from before the dataset existed
  const std::size_t i = std::size_t(at - s.datasets.specs.begin());
  try {
    for (const std::size_t point : points) {
      GS_EXPECTS(point < s.done.size() && s.done[point], "record_writing: point " + std::to_string(point) + " is not written");
      std::array<double, physics::phase_count> row{};
      transfer_point(s.datasets.sets[i], s.layout, *at, point, row.data(), false);
      row[std::size_t(physics::Phase::writing)] = seconds;
      transfer_point(s.datasets.sets[i], s.layout, *at, point, row.data(), true);
    }
    h5::check(H5Fflush(s.file, H5F_SCOPE_LOCAL), "flush " + partial);
  } catch (const OutputError& e) {
    s.broken = true;
    throw OutputError("cannot record the writing time in " + partial + ": " + e.what());
  }
}

void ResultWriter::finish(bool replace) {
  State& s = *state_;
  GS_EXPECTS(!s.finished, "the result file is already finished");
  const std::size_t missing = s.done.size() - points_done();
  GS_EXPECTS(missing == 0, std::to_string(missing) + " sweep points are not written yet");
  const std::string partial = partial_path(s.path);
  if (s.file.valid()) {  // (closed already when an earlier finish() stopped before renaming)
    s.datasets.sets.clear();
    s.file.close("close " + partial);
    // Durable before visible: the data reach the disk before the rename publishes the file.
    try {
      sync_file(partial);
    } catch (const FileError& e) {
      throw OutputError(e.what());
    }
  }
  // Checked again just before renaming (the path may have changed during the run): a rename never
  // replaces a directory, device, FIFO or socket, nor a file that `replace` does not allow.
  const std::string kept = "; the complete result stays in " + partial + " ('gratingsim run --resume' renames it)";
  struct stat target {};
  if (::stat(s.path.c_str(), &target) == 0) {
    if (!S_ISREG(target.st_mode))
      throw OutputError(s.path + " is not a regular file (it appeared during the run) and is left untouched" + kept);
    if (!replace)
      throw OutputError(s.path + " appeared during the run and is not replaced without --overwrite" + kept);
  }
  std::error_code error;
  std::filesystem::rename(partial, s.path, error);
  if (error) throw OutputError("cannot rename " + partial + " to " + s.path + ": " + error.message() + kept);
  s.finished = true;
  // The rename itself reaches the disk with the directory (file systems without directory fsync,
  // EINVAL, have nothing to sync).
  try {
    sync_parent_directory(s.path);
  } catch (const FileError& e) {
    throw OutputError(s.path + " is complete, but its directory cannot be synced (" + e.what() +
                      "): a power failure now could lose the rename");
  }
}

// --- ResultReader ----------------------------------------------------------------------------

struct ResultReader::State {
  std::string path;
  ResultLayout layout;
  RunInfo info;
  Handle file;
  OpenDatasets datasets;
  std::vector<std::uint8_t> done;
};

ResultReader::ResultReader(const std::string& path) : state_(std::make_unique<State>()) {
  h5::silence_errors();
  Opened o = open_result(path, H5F_ACC_RDONLY,
                         path.ends_with(".partial") ? resume_advice(path) : std::string());
  state_->file = std::move(o.file);
  state_->layout = std::move(o.layout);
  state_->info = std::move(o.info);
  state_->datasets = std::move(o.datasets);
  state_->done = std::move(o.done);
  state_->path = path;
}
ResultReader::ResultReader(ResultReader&&) noexcept = default;
ResultReader& ResultReader::operator=(ResultReader&&) noexcept = default;
ResultReader::~ResultReader() = default;

const ResultLayout& ResultReader::layout() const { return state_->layout; }
const RunInfo& ResultReader::info() const { return state_->info; }

bool ResultReader::done(std::size_t point) const {
  GS_EXPECTS(point < state_->done.size(), "point index out of range");
  return state_->done[point] != 0;
}

PointResult ResultReader::read(std::size_t point) const {
  const State& s = *state_;
  GS_EXPECTS(point < s.done.size(), "point index out of range");
  PointResult r;
  const PointBuffers b = buffers(s.layout, s.datasets.specs, r);
  try {
    for (std::size_t i = 0; i < s.datasets.specs.size(); ++i)
      transfer_point(s.datasets.sets[i], s.layout, s.datasets.specs[i], point, b.data[i], false);
  } catch (const OutputError& e) {
    throw OutputError(s.path + " is damaged: " + e.what());
  }
  return r;
}

}  // namespace gratingsim::io
