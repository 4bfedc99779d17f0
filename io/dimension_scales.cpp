// Dimension scales of a result file (io/SCHEMA.md §2.4). A netCDF reader (h5netcdf, hence xarray)
// names a dimension by the basename of its scale and looks that name up in the dataset's own group and
// then its parents: a scale serving several groups lives in the root group, one serving only `fields`
// there, a field map's grid in its map's group. The sweep axes keep their path (sweep/wavelength, ...)
// and are hard-linked into the root group under their name: one object, no copy.
#include "io/dimension_scales.hpp"

#include <hdf5_hl.h>

#include <string_view>

#include "io/result_fields.hpp"
#include "physics/phase_times.hpp"

namespace gratingsim::io {

std::vector<PointAxis> point_axes(const ResultLayout& l) {
  std::vector<PointAxis> axes;
  for (const auto& p : l.parameters) axes.push_back({p.name, "sweep/" + p.name});
  for (const char* name : {"wavelength", "theta", "phi"}) axes.push_back({name, std::string("sweep/") + name});
  return axes;
}

namespace {

using h5::Handle;

/// A dimension whose coordinates are labels (text), written here: its path and labels.
struct LabelScale {
  std::string path;
  std::vector<std::string> labels;
};

std::string pair_label(int m1, int m2) { return std::to_string(m1) + "," + std::to_string(m2); }

/// The label dimensions of a file with this layout (names as in io/result_fields.hpp's rows).
std::vector<LabelScale> label_scales(const ResultLayout& l) {
  std::vector<std::string> polarizations{"s", "p"};
  if (l.polarization != Polarization::both) polarizations = {std::string(to_string(l.polarization))};
  std::vector<std::string> orders;
  for (const auto& o : l.orders) orders.push_back(pair_label(o[0], o[1]));
  const std::vector<std::string> stokes{"S0", "S1", "S2", "S3"};
  std::vector<LabelScale> scales = {
      {"polarization", polarizations},  // incident (s first)
      {"order", orders},                // (m1, m2) of the stored orders, as in `orders`
      {"outgoing", {"s", "p"}},
      {"k_component", {"kx", "ky", "kz"}},
      {"stokes_out", stokes},  // Mueller rows: S_out = M S_in
      {"stokes_in", stokes},
      {"timing_phase", std::vector<std::string>(physics::phase_names.begin(), physics::phase_names.end())},
      {"lattice_axis", {"x", "y"}},  // (m1, m2) or (M1, M2): along the x and y periods
      {"complex", {"re", "im"}},
  };
  if (l.fields) {
    std::vector<std::string> harmonics;  // m1 slow, m2 fast, as fields/harmonic_index
    for (int m1 = -l.harmonics_x; m1 <= l.harmonics_x; ++m1)
      for (int m2 = -l.harmonics_y; m2 <= l.harmonics_y; ++m2) harmonics.push_back(pair_label(m1, m2));
    scales.push_back({"fields/field_component", {"Ex", "Ey", "Ez"}});
    scales.push_back({"fields/harmonic", harmonics});
  }
  return scales;
}

void write_labels(hid_t file, const LabelScale& scale) {
  std::vector<const char*> text;
  for (const auto& label : scale.labels) text.push_back(label.c_str());
  const hsize_t size = text.size();
  const Handle type = h5::string_type();
  const Handle space = h5::dataspace(H5Screate_simple(1, &size, nullptr), "create a dataspace");
  const Handle set = h5::dataset(H5Dcreate2(file, scale.path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                 "create dataset " + scale.path);
  h5::check(H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()), "write dataset " + scale.path);
}

bool exists(hid_t file, const std::string& path) {
  const htri_t found = H5Lexists(file, path.c_str(), H5P_DEFAULT);
  if (found < 0) h5::fail("look up " + path);
  return found > 0;
}

void make_scale(hid_t file, const std::string& path) {
  const Handle set = h5::dataset(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "open dataset " + path);
  const std::string name = path.substr(path.rfind('/') + 1);
  h5::check(H5DSset_scale(set, name.c_str()), "make " + path + " a dimension scale");
}

/// The scale a netCDF reader finds for dimension `name` of `dataset`: in its group, else the nearest parent.
std::string scale_for(hid_t file, const std::string& dataset, std::string_view name) {
  for (std::string group = dataset;;) {
    const auto slash = group.rfind('/');
    group = slash == std::string::npos ? "" : group.substr(0, slash);
    const std::string candidate = group.empty() ? std::string(name) : group + "/" + std::string(name);
    if (exists(file, candidate)) return candidate;
    if (group.empty()) break;
  }
  throw OutputError("HDF5: no dimension scale '" + std::string(name) + "' for " + dataset);
}

/// Attaches a scale to each dimension of `dataset` (names slowest first) and labels the dimension with its name.
void attach(hid_t file, const std::string& dataset, const std::vector<std::string>& names) {
  const Handle set = h5::dataset(H5Dopen2(file, dataset.c_str(), H5P_DEFAULT), "open dataset " + dataset);
  for (unsigned i = 0; i < names.size(); ++i) {
    const std::string path = scale_for(file, dataset, names[i]);
    const Handle scale = h5::dataset(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "open dataset " + path);
    h5::check(H5DSattach_scale(set, scale, i), "attach " + path + " to dimension " + std::to_string(i) + " of " + dataset);
    h5::check(H5DSset_label(set, i, names[i].c_str()), "label dimension " + std::to_string(i) + " of " + dataset);
  }
}

}  // namespace

bool root_name_taken(std::string_view name) {
  for (const char* member : {"accuracy", "done", "fields", "input", "orders", "results", "solver", "sweep",
                             "wavelength", "theta", "phi"})
    if (name == member) return true;
  for (const LabelScale& scale : label_scales(ResultLayout{}))
    if (name == scale.path) return true;
  return false;
}

void write_dimension_scales(hid_t file, const ResultLayout& l) {
  const std::vector<PointAxis> axes = point_axes(l);
  std::vector<std::string> scales;
  for (const PointAxis& axis : axes) {
    if (axis.values_path != axis.name)
      h5::check(H5Lcreate_hard(file, axis.values_path.c_str(), file, axis.name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
                "link " + axis.values_path + " as " + axis.name);
    scales.push_back(axis.values_path);
  }
  for (const LabelScale& scale : label_scales(l)) {
    write_labels(file, scale);
    scales.push_back(scale.path);
  }
  if (l.fields) {  // the field grids: slice positions, each map's coordinates
    scales.push_back("fields/slice_z");
    for (std::size_t k = 0; k < l.maps.size(); ++k)
      for (const char* grid : {"/first", "/second"}) scales.push_back("fields/map_" + std::to_string(k) + grid);
  }
  for (const std::string& path : scales) make_scale(file, path);

  attach(file, "orders", {"order", "lattice_axis"});
  if (l.fields) attach(file, "fields/harmonic_index", {"harmonic", "lattice_axis"});
  for (const ResultDataset& d : result_datasets(l)) {
    std::vector<std::string> names;
    for (const PointAxis& axis : axes) names.push_back(axis.name);
    for (std::size_t i = 0; i < d.field->shape.rank; ++i) names.emplace_back(d.field->shape.dims[i].name);
    if (d.field->kind == ElementKind::c128) names.emplace_back("complex");
    attach(file, d.path, names);
  }
}

}  // namespace gratingsim::io
