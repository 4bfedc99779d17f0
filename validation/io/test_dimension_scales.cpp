// Dimension scales of result files (io/SCHEMA.md §2.4), read back through the HDF5 C and H5DS APIs
// independently of io's code: every dimension of every dataset has one scale, named like the
// dimension, as long as the dimension, with the layout's values; and xarray (engine="h5netcdf")
// opens the file with those names (validation/io/check_xarray.py; skipped, exit 77, without
// Python 3 with xarray and h5netcdf: Debian python3-xarray python3-h5netcdf).
#include <hdf5.h>
#include <hdf5_hl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/dimension_scales.hpp"
#include "io/result_fields.hpp"
#include "io/results.hpp"
#include "validation/io/result_fixtures.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;

namespace {

struct Scale {
  std::string name;            // its NAME (H5DSget_scale_name)
  std::size_t length = 0;
  std::vector<double> values;  // numeric scales
  std::vector<std::string> labels;  // text scales
};

/// Per dataset (not itself a scale): its dimensions' labels and the scale attached to each.
struct Named {
  std::vector<std::string> labels;
  std::vector<Scale> scales;
  std::vector<int> attached;  // scales per dimension
};
using Inventory = std::map<std::string, Named>;

Scale read_scale(hid_t scale) {
  Scale s;
  char name[256] = {};
  CHECK(H5DSget_scale_name(scale, name, sizeof name) > 0);
  s.name = name;
  const hid_t space = H5Dget_space(scale), type = H5Dget_type(scale);
  s.length = std::size_t(H5Sget_simple_extent_npoints(space));
  if (H5Tget_class(type) == H5T_STRING) {
    std::vector<char*> text(s.length);
    REQUIRE(H5Dread(scale, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()) >= 0);
    for (char* t : text) {
      s.labels.emplace_back(t);
      H5free_memory(t);
    }
  } else {
    s.values.resize(s.length);
    REQUIRE(H5Dread(scale, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.values.data()) >= 0);
  }
  H5Tclose(type);
  H5Sclose(space);
  return s;
}

herr_t visit_scale(hid_t, unsigned, hid_t scale, void* data) {
  *static_cast<Scale*>(data) = read_scale(scale);
  return 1;  // the first scale (there must be exactly one)
}

herr_t visit_object(hid_t root, const char* path, const H5O_info_t* info, void* data) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  const hid_t set = H5Dopen2(root, path, H5P_DEFAULT);
  const hid_t space = H5Dget_space(set);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::size_t(rank > 0 ? rank : 0));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  if (rank > 0 && H5DSis_scale(set) <= 0) {
    Named& n = (*static_cast<Inventory*>(data))[path];
    for (unsigned i = 0; i < unsigned(rank); ++i) {
      char label[256] = {};
      H5DSget_label(set, i, label, sizeof label);
      n.labels.emplace_back(label);
      n.attached.push_back(H5DSget_num_scales(set, i));
      Scale s;
      int index = 0;
      if (n.attached.back() > 0) H5DSiterate_scales(set, i, &index, visit_scale, &s);
      INFO(path << " dimension " << i);
      CHECK(s.length == dims[i]);  // a scale as long as the dimension it labels
      n.scales.push_back(s);
    }
  }
  H5Sclose(space);
  H5Dclose(set);
  return 0;
}

Inventory inventory(const std::string& path) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  Inventory inventory;
  H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, visit_object, &inventory);
  H5Fclose(file);
  return inventory;
}

/// full_layout() with fresh random sweep values (ascending, like a case's).
io::ResultLayout random_layout() {
  io::ResultLayout l = test::full_layout();
  l.wavelength_nm = {test::uniform(300, 400), test::uniform(500, 600), test::uniform(700, 900)};
  l.theta_deg = {test::uniform(0, 20), test::uniform(30, 70)};
  l.phi_deg = {test::uniform(0, 40), test::uniform(45, 90)};
  return l;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("gratingsim_io_scales_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string write_file(const fs::path& dir, const io::ResultLayout& l) {
  const std::string path = (dir / "out.h5").string();
  auto writer = io::ResultWriter::create(path, l, test::run_info());
  for (std::size_t i = 0; i < l.points(); ++i) writer.write(i, test::random_point(l));
  writer.finish();
  return path;
}

}  // namespace

TEST_CASE("every dimension of every dataset has one dimension scale, named and labelled like it", "[io][results]") {
  const TempDir dir;
  const io::ResultLayout l = random_layout();
  const Inventory datasets = inventory(write_file(dir.path, l));

  // The leading dimensions of per-point datasets end with the sweep's (axes in front of it: io::point_axes).
  using Names = std::vector<std::string>;
  Names leading;
  for (const io::PointAxis& axis : io::point_axes(l)) leading.push_back(axis.name);
  REQUIRE(leading.size() >= 3);
  const std::size_t sweep = leading.size() - 3;
  CHECK(Names(leading.begin() + long(sweep), leading.end()) == Names{"wavelength", "theta", "phi"});
  const auto point = [&](const Names& tail) {
    Names names = leading;
    names.insert(names.end(), tail.begin(), tail.end());
    return names;
  };

  std::size_t per_point = 0;
  for (const auto& [path, named] : datasets) {
    INFO(path);
    for (std::size_t i = 0; i < named.labels.size(); ++i) {
      CHECK(named.attached[i] == 1);
      CHECK(named.scales[i].name == named.labels[i]);  // h5py's dims[i].label and its scale agree
    }
    if (named.labels.size() >= leading.size() && Names(named.labels.begin(), named.labels.begin() + long(leading.size())) == leading) {
      ++per_point;
      CHECK(named.scales[sweep].values == l.wavelength_nm);
      CHECK(named.scales[sweep + 1].values == l.theta_deg);
      CHECK(named.scales[sweep + 2].values == l.phi_deg);
    }
  }
  CHECK(per_point == io::result_fields.size() + 2);  // every per-point dataset (map_K's two rows twice)

  const auto labels = [&](const std::string& path) { return datasets.at(path).labels; };
  CHECK(labels("results/R") == point({"polarization", "order"}));
  CHECK(labels("results/jones_t") == point({"order", "outgoing", "polarization", "complex"}));
  CHECK(labels("results/transmitted_direction") == point({"order", "k_component"}));
  CHECK(labels("results/mueller") == point({"stokes_out", "stokes_in"}));
  CHECK(labels("fields/map_1/E") == point({"polarization", "field_component", "first", "second", "complex"}));
  CHECK(labels("orders") == Names{"order", "lattice_axis"});
  CHECK(labels("fields/harmonic_index") == Names{"harmonic", "lattice_axis"});

  // Coordinates: the layout's, as numbers or labels.
  const std::size_t tail = leading.size();  // the first dimension after the leading ones
  const Named& r = datasets.at("results/R");
  CHECK(r.scales[tail].labels == Names{"s", "p"});
  CHECK(r.scales[tail + 1].labels == Names{"-2,0", "-1,0", "0,0", "1,0", "2,0"});
  const Named& map = datasets.at("fields/map_1/E");
  CHECK(map.scales[tail + 2].values == l.maps[1].first_nm);
  CHECK(map.scales[tail + 3].values == l.maps[1].second_nm);
  CHECK(map.scales[tail + 4].labels == Names{"re", "im"});
  const Named& harmonics = datasets.at("fields/harmonics");
  CHECK(harmonics.scales[tail + 1].values == l.slice_center_nm);
  CHECK(harmonics.scales[tail + 3].labels.size() == l.harmonics_count());
  CHECK(harmonics.scales[tail + 3].labels.front() == "-2,-1");  // m1 slow, m2 fast, as fields/harmonic_index
  CHECK(datasets.at("solver/phase_seconds").scales[tail].labels.size() == physics::phase_count);
}

TEST_CASE("one incident polarisation: the polarization scale names it", "[io][results]") {
  const TempDir dir;
  io::ResultLayout l = random_layout();
  l.polarization = test::uniform(0, 1) < 0.5 ? io::Polarization::s : io::Polarization::p;
  l.fields = false;
  l.maps.clear();
  l.slice_center_nm.clear();
  l.accuracy.reset();
  const Inventory datasets = inventory(write_file(dir.path, l));
  const std::size_t tail = io::point_axes(l).size();
  CHECK(datasets.at("results/T").scales[tail].labels == std::vector<std::string>{std::string(to_string(l.polarization))});
  CHECK(datasets.count("results/mueller") == 0);
  for (const auto& [path, named] : datasets)
    for (const int attached : named.attached) CHECK(attached == 1);
}

TEST_CASE("xarray opens a result file with named dimensions and coordinates", "[io][results][python]") {
  // The first of $GRATINGSIM_PYTHON, /usr/bin/python3 and python3 with xarray and h5netcdf.
  std::vector<std::string> candidates;
  if (const char* chosen = std::getenv("GRATINGSIM_PYTHON")) candidates.emplace_back(chosen);
  candidates.insert(candidates.end(), {"/usr/bin/python3", "python3"});
  std::string python;
  for (const auto& candidate : candidates)
    if (std::system((candidate + " -c 'import xarray, h5netcdf' >/dev/null 2>&1").c_str()) == 0) {
      python = candidate;
      break;
    }
  if (python.empty()) {
    std::printf("SKIPPED: no Python 3 with xarray and h5netcdf (Debian: python3-xarray python3-h5netcdf)\n");
    std::exit(77);  // CTest reports SKIP_RETURN_CODE 77 as skipped, never as passed
  }
  const TempDir dir;
  const std::string path = write_file(dir.path, random_layout());
  const fs::path script = fs::path(__FILE__).parent_path() / "check_xarray.py";
  CHECK(std::system((python + " " + script.string() + " " + path).c_str()) == 0);
}
