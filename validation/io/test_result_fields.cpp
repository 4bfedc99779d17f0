// The table of per-point result datasets (io/result_fields.hpp) against io/SCHEMA.md §2.2, row by
// row (path, type, shape, unit, "P = 2 only"), both ways; against the PointResult members it names;
// and against a file written with every feature (its datasets, read through the HDF5 C API).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "io/result_fields.hpp"
#include "validation/io/result_fixtures.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;

namespace {

struct DocumentedDataset {
  std::string type, shape, unit;
  bool both_polarizations_only = false;
};

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(' '), end = s.find_last_not_of(' ');
  return begin == std::string::npos ? "" : s.substr(begin, end - begin + 1);
}

/// The per-point rows of §2.2's table (shape starting with the sweep dimensions), by path, with `…`
/// written out as Nw × Nθ × Nφ; a row naming several paths gives each of them.
std::map<std::string, DocumentedDataset> documented_point_datasets() {
  const fs::path page = fs::path(__FILE__).parent_path().parent_path().parent_path() / "io" / "SCHEMA.md";
  std::ifstream in(page);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const std::size_t begin = s.find("### 2.2 Datasets"), end = s.find("### 2.3");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  std::istringstream section(s.substr(begin, end - begin));
  const std::string sweep = "Nw × Nθ × Nφ", ellipsis = "…";
  std::map<std::string, DocumentedDataset> rows;
  bool header_seen = false;
  for (std::string line; std::getline(section, line);) {
    if (line.starts_with("| path | type | shape | unit | content |")) header_seen = true;
    if (!line.starts_with("| `")) continue;
    // path | type | shape | unit | content (the content may hold '|' itself: |1 − ΣR − ΣT|)
    std::vector<std::string> cells;
    std::size_t at = 2;
    for (int i = 0; i < 4; ++i) {
      const std::size_t bar = line.find(" | ", at);
      REQUIRE(bar != std::string::npos);
      cells.push_back(trim(line.substr(at, bar - at)));
      at = bar + 3;
    }
    DocumentedDataset d{cells[1], cells[2], cells[3], line.find("P = 2 only", at) != std::string::npos};
    if (d.shape.starts_with(ellipsis)) d.shape = sweep + d.shape.substr(ellipsis.size());
    if (!d.shape.starts_with(sweep)) continue;  // sweep axes, orders, field grids: written once per file
    for (std::size_t tick = cells[0].find('`'); tick != std::string::npos; tick = cells[0].find('`', tick + 1)) {
      const std::size_t close = cells[0].find('`', tick + 1);
      rows[cells[0].substr(tick + 1, close - tick - 1)] = d;
      tick = close;
    }
  }
  CHECK(header_seen);
  return rows;
}

std::string symbol(const io::Dim& d) {
  switch (d.extent) {
    case io::Extent::fixed:
      return std::to_string(d.size);
    case io::Extent::polarizations:
      return "P";
    case io::Extent::orders:
      return "No";
    case io::Extent::slices:
      return "Nz";
    case io::Extent::harmonics:
      return "Nm";
    case io::Extent::map_first:
      return "N1";
    case io::Extent::map_second:
      return "N2";
  }
  return "?";
}

/// The shape as §2.2 writes it.
std::string documented_shape(const io::ResultField& f) {
  std::string shape = "Nw × Nθ × Nφ";
  for (std::size_t i = 0; i < f.shape.rank; ++i) shape += " × " + symbol(f.shape.dims[i]);
  if (f.kind == io::ElementKind::c128) shape += " × 2";  // (re, im)
  return shape;
}

std::string documented_type(io::ElementKind kind) {
  switch (kind) {
    case io::ElementKind::f64:
    case io::ElementKind::c128:
      return "f64";
    case io::ElementKind::i32:
      return "i32";
    case io::ElementKind::u8:
      return "u8";
  }
  return "?";
}

bool both_polarizations_only(io::Presence p) {
  return p == io::Presence::both_polarizations || p == io::Presence::accuracy_both_polarizations;
}

}  // namespace

TEST_CASE("every per-point dataset of the table is in io/SCHEMA.md with its type, shape and unit, and vice versa",
          "[io][results]") {
  const auto documented = documented_point_datasets();
  std::set<std::string> in_table;
  for (const io::ResultField& f : io::result_fields) {
    const std::string path(f.path);
    INFO(path);
    in_table.insert(path);
    const auto row = documented.find(path);
    REQUIRE(row != documented.end());
    CHECK(row->second.type == documented_type(f.kind));
    CHECK(row->second.shape == documented_shape(f));
    CHECK(row->second.unit == f.unit);
    CHECK(row->second.both_polarizations_only == both_polarizations_only(f.presence));
    CHECK(!f.doc.empty());
  }
  for (const auto& [path, row] : documented) {
    INFO(path << " is documented as a per-point dataset");
    CHECK(in_table.count(path) == 1);
  }
  CHECK(documented.size() == io::result_fields.size());
}

TEST_CASE("the table's rows name distinct members with the element type and fixed sizes of their shape",
          "[io][results]") {
  std::set<std::string_view> members, paths;
  for (const io::ResultField& f : io::result_fields) {
    INFO(f.path);
    CHECK(paths.insert(f.path).second);
    CHECK(f.has_member() == !f.member.empty());
    if (f.has_member()) CHECK(members.insert(f.member).second);
    std::visit(
        [&](auto member) {
          if constexpr (std::is_member_object_pointer_v<decltype(member)>) {
            using T = std::remove_cvref_t<decltype(io::PointResult{}.*member)>;
            // The element: of a vector (field_maps: of a map's vector), an array, or the scalar itself.
            const auto element = [] {
              if constexpr (std::is_arithmetic_v<T>) return T{};
              else if constexpr (std::is_same_v<T, std::vector<std::vector<std::complex<double>>>>)
                return std::complex<double>{};
              else return typename T::value_type{};
            }();
            using E = std::remove_const_t<decltype(element)>;
            const io::ElementKind kind = std::is_same_v<E, double>                 ? io::ElementKind::f64
                                         : std::is_same_v<E, std::complex<double>> ? io::ElementKind::c128
                                         : std::is_same_v<E, std::int32_t>         ? io::ElementKind::i32
                                                                                   : io::ElementKind::u8;
            CHECK((std::is_same_v<E, std::uint8_t> || kind != io::ElementKind::u8));
            CHECK(kind == f.kind);
            std::size_t fixed_values = 1;
            bool all_fixed = true;
            for (std::size_t i = 0; i < f.shape.rank; ++i) {
              all_fixed = all_fixed && f.shape.dims[i].extent == io::Extent::fixed;
              fixed_values *= f.shape.dims[i].size;
            }
            if constexpr (std::is_arithmetic_v<T>) {
              CHECK(f.shape.rank == 0);
            } else if constexpr (requires { std::tuple_size<T>::value; }) {  // std::array: its size is the shape's
              CHECK(all_fixed);
              CHECK(std::tuple_size_v<T> == fixed_values);
            } else {  // a vector sized by the layout
              CHECK(!all_fixed);
            }
          }
        },
        f.source);
  }
}

TEST_CASE("a file with every feature holds exactly the table's datasets, with its shapes", "[io][results]") {
  const io::ResultLayout l = test::full_layout();  // both polarisations, fields with two maps, accuracy
  const fs::path dir = fs::temp_directory_path() / ("gratingsim_io_result_fields_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "all.h5").string();
  {
    io::ResultWriter writer = io::ResultWriter::create(path, l, test::run_info());
    for (std::size_t p = 0; p < l.points(); ++p) writer.write(p, test::random_point(l));
    writer.finish();
  }
  const test::FileDump dump = test::dump_file(path);
  fs::remove_all(dir);

  // Per-point datasets in the file: those whose shape starts with the sweep's (3 × 2 × 2 here).
  const std::string sweep_shape = "shape:3,2,2,";
  std::map<std::string, std::string> in_file;
  for (const auto& [name, bytes] : dump)
    if (name.find('@') == std::string::npos && bytes.starts_with(sweep_shape))
      in_file[name] = bytes.substr(0, bytes.find('|'));
  std::map<std::string, std::string> expected;
  for (const io::ResultDataset& d : io::result_datasets(l)) {
    std::string shape = sweep_shape;
    for (const std::size_t n : d.tail) shape += std::to_string(n) + ",";
    expected[d.path] = shape;
  }
  CHECK(expected.count("fields/map_1/abs_E") == 1);
  CHECK(expected.count("accuracy/delta_change_deg") == 1);
  CHECK(expected.size() == io::result_fields.size() + 2);  // map_K's two rows for both maps
  CHECK(in_file == expected);
}
