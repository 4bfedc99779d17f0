// io/measured.hpp: CSV and HDF5 measured tables read back exactly (random values, random column
// order), defaults and Δ's normalisation applied, and every refusal located: line:column in a CSV
// file, the dataset in an HDF5 file.
#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/measured.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"
#include "validation/support/scratch_directory.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;

namespace {

double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(test::rng()); }

std::string text(double x) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.17g", x);
  return buffer;
}

/// A table as named columns of numbers, written as CSV with ", " between fields.
struct Table {
  std::vector<std::string> names;
  std::vector<std::vector<double>> rows;
  std::vector<std::vector<std::string>> overrides;  // per row and column: text instead of the number ("" none)

  [[nodiscard]] std::vector<std::string> fields(std::size_t row) const {
    std::vector<std::string> out;
    for (std::size_t c = 0; c < names.size(); ++c)
      out.push_back(!overrides.empty() && !overrides[row][c].empty() ? overrides[row][c] : text(rows[row][c]));
    return out;
  }
  /// Two comment lines and a blank line come first: the header is line 4, row r is line 5 + r.
  [[nodiscard]] std::string csv() const {
    std::string out = "# measured on a test bench\n\n  # indented comment\n";
    const auto join = [](const std::vector<std::string>& f) {
      std::string line;
      for (std::size_t i = 0; i < f.size(); ++i) line += (i ? ", " : "") + f[i];
      return line + "\n";
    };
    out += join(names);
    for (std::size_t r = 0; r < rows.size(); ++r) out += join(fields(r));
    return out;
  }
  /// The 1-based column where field c of a row (or of the header, row = -1) starts.
  [[nodiscard]] int column_of(int row, std::size_t c) const {
    const std::vector<std::string> f = row < 0 ? names : fields(std::size_t(row));
    int at = 1;
    for (std::size_t i = 0; i < c; ++i) at += int(f[i].size()) + 2;
    return at;
  }
  void set(const std::string& name, std::size_t row, const std::string& value) {
    if (overrides.empty()) overrides.assign(rows.size(), std::vector<std::string>(names.size()));
    overrides[row][std::size_t(std::find(names.begin(), names.end(), name) - names.begin())] = value;
  }
  [[nodiscard]] std::size_t index(const std::string& name) const {
    return std::size_t(std::find(names.begin(), names.end(), name) - names.begin());
  }
};

/// A random ellipsometry table (columns in random order), Δ in (−180°, 180°].
Table ellipsometry_table(std::size_t rows) {
  Table t;
  t.names = {"wavelength", "theta_deg", "phi_deg", "psi_deg", "delta_deg", "sigma_psi", "sigma_delta"};
  std::shuffle(t.names.begin(), t.names.end(), test::rng());
  for (std::size_t r = 0; r < rows; ++r) {
    std::vector<double> row;
    for (const auto& name : t.names)
      row.push_back(name == "wavelength" ? uniform(300, 900)
                    : name == "theta_deg" ? uniform(0, 89)
                    : name == "phi_deg"   ? uniform(-180, 180)
                    : name == "psi_deg"   ? uniform(0, 90)
                    : name == "delta_deg" ? uniform(-179.9, 180)
                                          : uniform(0.01, 0.5));
    t.rows.push_back(row);
  }
  return t;
}

void write(const std::string& path, const std::string& contents) { std::ofstream(path, std::ios::binary) << contents; }

/// The error read_measured raises for `path`; fails the test if it reads the file.
io::MeasuredDataError refusal(const std::string& path, const io::MeasuredDefaults& defaults = {}) {
  try {
    io::read_measured(path, defaults);
  } catch (const io::MeasuredDataError& e) {
    return e;
  }
  FAIL("read_measured accepted " << path);
  throw;  // unreachable
}

}  // namespace

TEST_CASE("a CSV table of Psi and Delta reads back exactly, Delta normalised into -180 exclusive to 180 inclusive") {
  test::ScratchDirectory dir("measured_csv");
  Table t = ellipsometry_table(std::size_t(uniform(4, 12)));
  // One Δ given in [180, 360) (ellipsometers that report 0..360): read as Δ − 360.
  const std::size_t wrapped_row = std::size_t(uniform(0, double(t.rows.size())));
  t.rows[wrapped_row][t.index("delta_deg")] = uniform(181, 359);
  std::string csv = t.csv();
  if (uniform(0, 1) < 0.5) {  // Windows line ends are read alike
    std::string crlf;
    for (const char c : csv) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    csv = crlf;
  }
  write((dir / "m.csv").string(), csv);
  const io::MeasuredData data = io::read_measured((dir / "m.csv").string());
  CHECK(data.kind == io::MeasuredKind::ellipsometry);
  CHECK(data.quantities == std::vector<std::string>{"psi_deg", "delta_deg"});
  CHECK(data.sigma_defaulted == std::vector<bool>{false, false});
  REQUIRE(data.rows() == t.rows.size());
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const auto& row = t.rows[r];
    CHECK(data.points[r] == io::MeasuredPoint{row[t.index("wavelength")], row[t.index("theta_deg")], row[t.index("phi_deg")]});
    CHECK(data.values[2 * r] == row[t.index("psi_deg")]);
    const double delta = row[t.index("delta_deg")];
    CHECK(data.values[2 * r + 1] == (r == wrapped_row ? delta - 360 : delta));
    CHECK(data.sigmas[2 * r] == row[t.index("sigma_psi")]);
    CHECK(data.sigmas[2 * r + 1] == row[t.index("sigma_delta")]);
  }
  // A later check refuses a row at its value: e.g. a wavelength outside a material's table.
  const std::size_t late = std::size_t(uniform(0, double(t.rows.size())));
  try {
    io::refuse_value(data, late, "wavelength", "outside the table of material Si");
    FAIL("refuse_value returned");
  } catch (const io::MeasuredDataError& e) {
    CHECK(e.line() == 5 + int(late));
    CHECK(e.column() == t.column_of(int(late), t.index("wavelength")));
    CHECK(std::string(e.what()).ends_with(": error: outside the table of material Si"));
  }
  // The fit's measurement: the same order, Δ periodic.
  const fitting::Measurement m = io::to_measurement(data);
  CHECK(m.values.size() == Eigen::Index(2 * t.rows.size()));
  CHECK(m.values[1] == data.values[1]);
  CHECK(m.periods[0] == 0);
  CHECK(m.periods[1] == 360);
}

TEST_CASE("a CSV table of Mueller elements: elements in m11..m44 order, missing sigmas and phi from the stated defaults") {
  test::ScratchDirectory dir("measured_mueller");
  Table t;
  t.names = {"m33", "wavelength", "sigma_m12", "theta_deg", "m12"};
  for (int r = 0; r < 6; ++r)
    t.rows.push_back({uniform(-1, 1), uniform(300, 900), uniform(0.001, 0.01), uniform(0, 80), uniform(-1, 1)});
  write((dir / "mueller.csv").string(), t.csv());
  const double sigma = uniform(0.001, 0.01);
  const io::MeasuredData data = io::read_measured((dir / "mueller.csv").string(), {.sigma_psi_deg = {}, .sigma_delta_deg = {}, .sigma_mueller = sigma});
  CHECK(data.kind == io::MeasuredKind::mueller);
  CHECK(data.quantities == std::vector<std::string>{"m12", "m33"});
  CHECK(data.sigma_defaulted == std::vector<bool>{false, true});
  for (std::size_t r = 0; r < 6; ++r) {
    CHECK(data.points[r].phi_deg == 0);
    CHECK(data.values[2 * r] == t.rows[r][4]);
    CHECK(data.values[2 * r + 1] == t.rows[r][0]);
    CHECK(data.sigmas[2 * r] == t.rows[r][2]);
    CHECK(data.sigmas[2 * r + 1] == sigma);
  }
  // Without the default, the element without a sigma column is refused at its header field.
  const io::MeasuredDataError e = refusal((dir / "mueller.csv").string());
  CHECK(e.line() == 4);
  CHECK(e.column() == t.column_of(-1, 0));
  CHECK(e.message().find("sigma_m33") != std::string::npos);
}

TEST_CASE("CSV refusals name the file, line and column of the offending text") {
  test::ScratchDirectory dir("measured_csv_errors");
  const std::string path = (dir / "bad.csv").string();
  const Table base = ellipsometry_table(6);
  const std::size_t row = std::size_t(uniform(0, 6));
  const int line = 5 + int(row);
  struct Expected {
    int line, column;
    std::string message;
  };
  const auto check = [&](const Table& t, const Expected& expected, const std::string& suffix = "") {
    write(path, t.csv() + suffix);
    const io::MeasuredDataError e = refusal(path);
    INFO(e.what());
    CHECK(e.file() == path);
    CHECK(e.line() == expected.line);
    CHECK(e.column() == expected.column);
    CHECK(e.message().find(expected.message) != std::string::npos);
    CHECK(std::string(e.what()).starts_with(path + ":" + std::to_string(expected.line) + ":" +
                                            std::to_string(expected.column) + ": error: "));
  };
  {  // a value that is not a number
    Table t = base;
    t.set("psi_deg", row, "12.5x");
    check(t, {line, t.column_of(int(row), t.index("psi_deg")), "'12.5x' is not a number"});
  }
  {  // values out of their ranges
    for (const auto& [name, value, message] :
         std::vector<std::tuple<std::string, double, std::string>>{{"psi_deg", 90.5, "[0, 90]"},
                                                                   {"delta_deg", -400, "[-360, 360]"},
                                                                   {"theta_deg", 90, "[0, 90)"},
                                                                   {"wavelength", -5, "> 0"},
                                                                   {"sigma_delta", 0, "> 0"}}) {
      Table t = base;
      t.rows[row][t.index(name)] = value;
      check(t, {line, t.column_of(int(row), t.index(name)), message});
    }
    Table t = base;
    t.set("phi_deg", row, "nan");
    check(t, {line, t.column_of(int(row), t.index("phi_deg")), "not a finite number"});
  }
  {  // header problems
    Table t = base;
    t.names.push_back("thickness");
    for (auto& r : t.rows) r.push_back(1);
    check(t, {4, t.column_of(-1, t.names.size() - 1), "unknown column 'thickness'"});
    t = base;
    t.names.back() = t.names.front();
    check(t, {4, t.column_of(-1, t.names.size() - 1), "given twice"});
    t = base;
    t.names[t.index("psi_deg")] = "m12";
    t.names[t.index("sigma_psi")] = "sigma_m12";
    check(t, {4, t.column_of(-1, t.index("m12")), "not both"});
  }
  {  // rows of the wrong length: at the first extra field, or just past the end of a short row
    Table t = base;
    write(path, t.csv() + "500, 1, 2, 3, 4, 5, 6, 7\n");
    io::MeasuredDataError e = refusal(path);
    CHECK(e.line() == 5 + 6);
    CHECK(e.column() == int(std::string("500, 1, 2, 3, 4, 5, 6, ").size()) + 1);
    write(path, t.csv() + "500, 1, 2\n");
    e = refusal(path);
    CHECK(e.line() == 5 + 6);
    CHECK(e.column() == int(std::string("500, 1, 2").size()) + 1);
  }
  {  // a header without rows; a file without a table; no file at all
    Table t = base;
    t.rows.clear();
    check(t, {4, 1, "no rows"});
    write(path, "# nothing\n\n");
    const io::MeasuredDataError e = refusal(path);
    CHECK(e.line() == 3);
    CHECK(e.message().find("no header") != std::string::npos);
    const io::MeasuredDataError missing = refusal((dir / "absent.csv").string());
    CHECK(missing.line() == 0);
    CHECK(std::string(missing.what()).starts_with((dir / "absent.csv").string() + ": error: "));
  }
}

namespace {

void write_column(hid_t file, const std::string& name, const std::vector<double>& values, bool two_d = false) {
  const hsize_t dims[2] = {two_d ? values.size() / 2 : values.size(), 2};
  const hid_t space = H5Screate_simple(two_d ? 2 : 1, dims, nullptr);
  const hid_t set = H5Dcreate2(file, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(H5Dwrite(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  H5Dclose(set);
  H5Sclose(space);
}

/// The table as 1-D datasets in the root group of a new HDF5 file; `extra` adds to it.
template <class Extra>
void write_hdf5(const std::string& path, const Table& t, Extra extra) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(file >= 0);
  for (std::size_t c = 0; c < t.names.size(); ++c) {
    std::vector<double> column;
    for (const auto& row : t.rows) column.push_back(row[c]);
    write_column(file, t.names[c], column);
  }
  extra(file);
  H5Fclose(file);
}

}  // namespace

TEST_CASE("an HDF5 table reads back exactly, its refusals name the dataset") {
  test::ScratchDirectory dir("measured_hdf5");
  const std::string path = (dir / "m.h5").string();
  const Table t = ellipsometry_table(std::size_t(uniform(3, 10)));
  write_hdf5(path, t, [](hid_t) {});
  const io::MeasuredData data = io::read_measured(path);
  REQUIRE(data.rows() == t.rows.size());
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    CHECK(data.points[r].wavelength_nm == t.rows[r][t.index("wavelength")]);
    CHECK(data.values[2 * r + 1] == t.rows[r][t.index("delta_deg")]);
    CHECK(data.sigmas[2 * r] == t.rows[r][t.index("sigma_psi")]);
  }
  try {
    io::refuse_value(data, 1, "theta_deg", "no such angle");
    FAIL("refuse_value returned");
  } catch (const io::MeasuredDataError& e) {
    CHECK(e.dataset() == "theta_deg");
    CHECK(e.message() == "value [1]: no such angle");
  }
  const auto check = [&](const std::string& dataset, const std::string& message) {
    const io::MeasuredDataError e = refusal(path);
    INFO(e.what());
    CHECK(e.dataset() == dataset);
    CHECK(e.message().find(message) != std::string::npos);
    CHECK(std::string(e.what()).starts_with(path + ": dataset /" + dataset + ": error: "));
  };
  write_hdf5(path, t, [&](hid_t file) { write_column(file, "temperature", std::vector<double>(t.rows.size(), 20.0)); });
  check("temperature", "unknown column");
  write_hdf5(path, t, [&](hid_t file) { write_column(file, "sigma_m12", std::vector<double>(t.rows.size() + 1, 1.0)); });
  check("sigma_m12", std::to_string(t.rows.size() + 1) + " values");
  write_hdf5(path, t, [&](hid_t file) { write_column(file, "m13", std::vector<double>(2 * t.rows.size(), 1.0), true); });
  check("m13", "2 dimensions");
  write_hdf5(path, t, [&](hid_t file) { H5Gclose(H5Gcreate2(file, "extra", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)); });
  check("extra", "not a dataset");
  Table bad = t;
  const std::size_t row = t.rows.size() - 1;
  bad.rows[row][t.index("psi_deg")] = 91;
  write_hdf5(path, bad, [](hid_t) {});
  check("psi_deg", "value [" + std::to_string(row) + "]");
}
