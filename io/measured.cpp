// Measured-data tables (io/SCHEMA.md §4): CSV and HDF5 read into named columns, then checked and
// assembled by one set of rules, every refusal located in the file.
#include "io/measured.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "io/hdf5_handles.hpp"

namespace gratingsim::io {

namespace {

std::string located(const std::string& file, int line, int column, const std::string& dataset, const std::string& message) {
  if (!dataset.empty()) return file + ": dataset /" + dataset + ": error: " + message;
  if (line > 0) return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": error: " + message;
  return file + ": error: " + message;
}

std::string number(double x) {
  std::ostringstream s;
  s.precision(10);
  s << x;
  return s.str();
}

/// One column of the table, with (CSV only) where its header and each value stand.
struct Column {
  std::string name;
  std::vector<double> values;
  int line = 0, column = 0;                     ///< the header field (CSV)
  std::vector<std::pair<int, int>> positions;  ///< per value: line, column (CSV)
};

/// Where refusals point: a CSV file (lines and columns) or an HDF5 file (datasets).
struct Source {
  std::string path;
  bool csv = true;
  int header_line = 0;

  [[noreturn]] void fail(const Column* column, int row, const std::string& message) const {
    if (csv) {
      const auto [line, at] = column == nullptr ? std::pair{header_line, 1}
                              : row < 0         ? std::pair{column->line, column->column}
                                                : column->positions[std::size_t(row)];
      throw MeasuredDataError(path, line, at, "", message);
    }
    const std::string where = row < 0 ? "" : "value [" + std::to_string(row) + "]: ";
    throw MeasuredDataError(path, 0, 0, column == nullptr ? "" : column->name, where + message);
  }
};

const std::vector<std::string>& mueller_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (int i = 1; i <= 4; ++i)
      for (int j = 1; j <= 4; ++j) n.push_back({'m', char('0' + i), char('0' + j)});
    return n;
  }();
  return names;
}

std::string sigma_name(const std::string& quantity) {
  if (quantity == "psi_deg") return "sigma_psi";
  if (quantity == "delta_deg") return "sigma_delta";
  return "sigma_" + quantity;
}

bool known(const std::string& name) {
  static const std::set<std::string> names = [] {
    std::set<std::string> n{"wavelength", "theta_deg", "phi_deg", "psi_deg", "delta_deg", "sigma_psi", "sigma_delta"};
    for (const auto& m : mueller_names()) n.insert({m, "sigma_" + m});
    return n;
  }();
  return names.count(name) != 0;
}

/// The table's checks and assembly, shared by both formats.
MeasuredData assemble(const Source& source, const std::vector<Column>& columns, const MeasuredDefaults& defaults) {
  std::map<std::string, const Column*> by_name;
  for (const Column& column : columns) {
    if (!known(column.name))
      source.fail(&column, -1, "unknown column '" + column.name + "' (known: wavelength, theta_deg, phi_deg, psi_deg, "
                                                                  "delta_deg, sigma_psi, sigma_delta, m11..m44, sigma_m11..sigma_m44)");
    if (!by_name.emplace(column.name, &column).second) source.fail(&column, -1, "column '" + column.name + "' given twice");
  }
  const auto find = [&](const std::string& name) -> const Column* {
    const auto at = by_name.find(name);
    return at == by_name.end() ? nullptr : at->second;
  };
  for (const char* required : {"wavelength", "theta_deg"})
    if (find(required) == nullptr) source.fail(nullptr, -1, std::string("no '") + required + "' column");

  MeasuredData data;
  data.path = source.path;
  data.csv = source.csv;
  for (const Column& column : columns) data.columns.push_back(column.name);
  const bool ellipsometry = find("psi_deg") != nullptr || find("delta_deg") != nullptr;
  for (const auto& m : mueller_names())
    if (find(m) != nullptr) {
      if (ellipsometry) source.fail(find(m), -1, "a table holds Psi/Delta or Mueller elements, not both");
      data.quantities.push_back(m);
    }
  if (ellipsometry) {
    for (const char* needed : {"psi_deg", "delta_deg"})
      if (find(needed) == nullptr) source.fail(nullptr, -1, std::string("no '") + needed + "' column (Psi and Delta come together)");
    data.quantities = {"psi_deg", "delta_deg"};
  }
  data.kind = ellipsometry ? MeasuredKind::ellipsometry : MeasuredKind::mueller;
  if (data.quantities.empty())
    source.fail(nullptr, -1, "no measured quantity: the table needs psi_deg and delta_deg, or Mueller elements m11..m44");
  for (const Column& column : columns)
    if (column.name.starts_with("sigma_")) {
      const bool used = std::any_of(data.quantities.begin(), data.quantities.end(),
                                    [&](const std::string& q) { return sigma_name(q) == column.name; });
      if (!used) source.fail(&column, -1, "'" + column.name + "' without the quantity it belongs to");
    }

  const std::size_t rows = columns.front().values.size();
  if (rows == 0) source.fail(nullptr, -1, "the table has no rows");
  const auto check = [&](const Column& column, bool ok, std::size_t row, const std::string& what) {
    if (!ok) source.fail(&column, int(row), column.name + " = " + number(column.values[row]) + ": " + what);
  };
  for (const Column& column : columns)
    for (std::size_t row = 0; row < rows; ++row) check(column, std::isfinite(column.values[row]), row, "not a finite number");

  const Column& wavelength = *find("wavelength");
  const Column& theta = *find("theta_deg");
  const Column* phi = find("phi_deg");  // absent: φ = 0 for every row
  for (std::size_t row = 0; row < rows; ++row) {
    check(wavelength, wavelength.values[row] > 0, row, "a wavelength must be > 0 (nm)");
    check(theta, theta.values[row] >= 0 && theta.values[row] < 90, row, "theta must lie in [0, 90) degrees");
    data.points.push_back({wavelength.values[row], theta.values[row], phi == nullptr ? 0.0 : phi->values[row]});
  }

  if (source.csv)
    for (std::size_t row = 0; row < rows; ++row)
      for (const Column& column : columns) data.cells.push_back(column.positions[row]);
  const std::size_t q = data.quantities.size();
  data.values.resize(rows * q);
  data.sigmas.resize(rows * q);
  for (std::size_t k = 0; k < q; ++k) {
    const std::string& name = data.quantities[k];
    const Column& values = *find(name);
    const Column* sigmas = find(sigma_name(name));
    const std::optional<double> fallback = name == "psi_deg"     ? defaults.sigma_psi_deg
                                           : name == "delta_deg" ? defaults.sigma_delta_deg
                                                                 : defaults.sigma_mueller;
    if (sigmas == nullptr && !fallback)
      source.fail(&values, -1, "no '" + sigma_name(name) + "' column and no default uncertainty for " + name);
    data.sigma_defaulted.push_back(sigmas == nullptr);
    for (std::size_t row = 0; row < rows; ++row) {
      double value = values.values[row];
      if (name == "psi_deg") check(values, value >= 0 && value <= 90, row, "Psi must lie in [0, 90] degrees");
      if (name == "delta_deg") {
        check(values, value >= -360 && value <= 360, row, "Delta must lie in [-360, 360] degrees");
        value = value - 360 * std::ceil((value - 180) / 360);  // into (−180, 180]
      }
      data.values[row * q + k] = value;
      if (sigmas != nullptr) check(*sigmas, sigmas->values[row] > 0, row, "an uncertainty must be > 0");
      data.sigmas[row * q + k] = sigmas != nullptr ? sigmas->values[row] : *fallback;
    }
  }
  return data;
}

// --- CSV ---------------------------------------------------------------------------------------

/// A field of a line: its text without surrounding blanks and its 1-based column.
struct Field {
  std::string text;
  int column = 0;
};

std::vector<Field> split(const std::string& line) {
  std::vector<Field> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = std::min(line.find(',', start), line.size());
    std::size_t first = start, last = end;
    while (first < last && (line[first] == ' ' || line[first] == '\t')) ++first;
    while (last > first && (line[last - 1] == ' ' || line[last - 1] == '\t')) --last;
    fields.push_back({line.substr(first, last - first), int(first) + 1});
    if (end == line.size()) break;
    start = end + 1;
  }
  return fields;
}

MeasuredData read_csv(const std::string& path, const std::string& text, const MeasuredDefaults& defaults) {
  Source source{path, true, 0};
  std::vector<Column> columns;
  std::istringstream in(text);
  std::string line;
  int number_of_line = 0;
  while (std::getline(in, line)) {
    ++number_of_line;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;  // blank lines and comments
    if (const auto quote = line.find('"'); quote != std::string::npos)
      throw MeasuredDataError(path, number_of_line, int(quote) + 1, "", "quoted fields are not supported");
    const std::vector<Field> fields = split(line);
    if (columns.empty()) {  // the header
      source.header_line = number_of_line;
      for (const Field& field : fields) {
        if (field.text.empty()) throw MeasuredDataError(path, number_of_line, field.column, "", "empty column name");
        columns.push_back({.name = field.text, .values = {}, .line = number_of_line, .column = field.column, .positions = {}});
      }
      continue;
    }
    if (fields.size() != columns.size()) {
      const int at = fields.size() > columns.size() ? fields[columns.size()].column : int(line.size()) + 1;
      throw MeasuredDataError(path, number_of_line, at, "",
                              "a row of " + std::to_string(fields.size()) + " fields under a header of " +
                                  std::to_string(columns.size()) + " columns");
    }
    for (std::size_t c = 0; c < fields.size(); ++c) {
      const Field& field = fields[c];
      double value = 0;
      const char* end = field.text.data() + field.text.size();
      const auto [stop, error] = std::from_chars(field.text.data(), end, value);
      if (field.text.empty() || error != std::errc() || stop != end)
        throw MeasuredDataError(path, number_of_line, field.column, "",
                                columns[c].name + ": '" + field.text + "' is not a number");
      columns[c].values.push_back(value);
      columns[c].positions.emplace_back(number_of_line, field.column);
    }
  }
  if (columns.empty()) throw MeasuredDataError(path, number_of_line + 1, 1, "", "no header line (the file holds no table)");
  return assemble(source, columns, defaults);
}

// --- HDF5 --------------------------------------------------------------------------------------

MeasuredData read_hdf5(const std::string& path, const MeasuredDefaults& defaults) {
  const Source source{path, false, 0};
  const auto fail = [&](const std::string& dataset, const std::string& message) -> MeasuredDataError {
    return MeasuredDataError(path, 0, 0, dataset, message);
  };
  std::vector<Column> columns;
  try {
    const h5::Handle file = h5::file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open " + path);
    std::vector<std::string> names;
    const auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
      static_cast<std::vector<std::string>*>(out)->push_back(name);
      return 0;
    };
    h5::check(H5Literate(file, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect, &names), "list the root group");
    for (const std::string& name : names) {
      const h5::Handle object(H5Oopen(file, name.c_str(), H5P_DEFAULT), H5Oclose, "open /" + name);
      if (H5Iget_type(object) != H5I_DATASET) throw fail(name, "not a dataset (a table is 1-D datasets in the root group)");
      const h5::Handle dataset = h5::dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), "open /" + name);
      const h5::Handle space = h5::dataspace(H5Dget_space(dataset), "the dataspace of /" + name);
      const int rank = H5Sget_simple_extent_ndims(space);
      if (rank != 1) throw fail(name, "has " + std::to_string(rank) + " dimensions; a table column is 1-D");
      const h5::Handle type = h5::datatype(H5Dget_type(dataset), "the type of /" + name);
      const H5T_class_t type_class = H5Tget_class(type);
      if (type_class != H5T_FLOAT && type_class != H5T_INTEGER) throw fail(name, "not numeric");
      hsize_t length = 0;
      H5Sget_simple_extent_dims(space, &length, nullptr);
      Column column{.name = name, .values = std::vector<double>(length), .line = 0, .column = 0, .positions = {}};
      if (length > 0)
        h5::check(H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, column.values.data()), "read /" + name);
      if (!columns.empty() && length != columns.front().values.size())
        throw fail(name, std::to_string(length) + " values where /" + columns.front().name + " has " +
                             std::to_string(columns.front().values.size()));
      columns.push_back(std::move(column));
    }
  } catch (const OutputError& e) {
    throw MeasuredDataError(path, 0, 0, "", e.what());
  }
  if (columns.empty()) throw fail("", "no datasets in the root group (the file holds no table)");
  return assemble(source, columns, defaults);
}

}  // namespace

MeasuredDataError::MeasuredDataError(std::string file, int line, int column, std::string dataset, std::string message)
    : InvalidArgument(located(file, line, column, dataset, message)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      dataset_(std::move(dataset)),
      message_(std::move(message)) {}

MeasuredData read_measured(const std::string& path, const MeasuredDefaults& defaults) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MeasuredDataError(path, 0, 0, "", "cannot open the measured data file");
  std::ostringstream text;
  text << in.rdbuf();
  h5::silence_errors();
  if (H5Fis_hdf5(path.c_str()) > 0) return read_hdf5(path, defaults);
  return read_csv(path, text.str(), defaults);
}

void refuse_value(const MeasuredData& data, std::size_t row, const std::string& column, const std::string& message) {
  const auto at = std::find(data.columns.begin(), data.columns.end(), column);
  GS_EXPECTS(at != data.columns.end() && row < data.rows(), "refuse_value: no column '" + column + "' or row " + std::to_string(row));
  const auto c = std::size_t(at - data.columns.begin());
  if (!data.csv) throw MeasuredDataError(data.path, 0, 0, column, "value [" + std::to_string(row) + "]: " + message);
  const auto [line, position] = data.cells[row * data.columns.size() + c];
  throw MeasuredDataError(data.path, line, position, "", message);
}

fitting::Measurement to_measurement(const MeasuredData& data) {
  const auto m = Eigen::Index(data.values.size());
  fitting::Measurement measurement{.values = Eigen::Map<const Eigen::VectorXd>(data.values.data(), m),
                                   .sigmas = Eigen::Map<const Eigen::VectorXd>(data.sigmas.data(), m),
                                   .periods = Eigen::VectorXd::Zero(m)};
  const std::size_t q = data.quantities.size();
  for (std::size_t k = 0; k < q; ++k)
    if (data.quantities[k] == "delta_deg")
      for (std::size_t row = 0; row < data.rows(); ++row) measurement.periods[Eigen::Index(row * q + k)] = 360;
  return measurement;
}

}  // namespace gratingsim::io
