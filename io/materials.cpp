// Refractive-index models: constants, tables, Sellmeier; the built-in materials; table files.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <system_error>

#include "io/case.hpp"
#include "io/index_table.hpp"

namespace gratingsim::io {

namespace {

std::string format_nm(double value) {
  std::ostringstream os;
  os << value << " nm";
  return os.str();
}

std::complex<double> interpolate(const IndexTable& table, double wavelength_nm) {
  const auto& w = table.wavelength_nm;
  EXPECTS(wavelength_nm >= w.front() && wavelength_nm <= w.back(),
          "wavelength " + format_nm(wavelength_nm) + " outside the table " + table.path + " (" +
              format_nm(w.front()) + " to " + format_nm(w.back()) + ")");
  const std::size_t hi = std::max<std::size_t>(
      1, std::size_t(std::lower_bound(w.begin(), w.end(), wavelength_nm) - w.begin()));
  const std::size_t lo = hi - 1;
  const double t = (wavelength_nm - w[lo]) / (w[hi] - w[lo]);
  return {table.n[lo] + t * (table.n[hi] - table.n[lo]), table.k[lo] + t * (table.k[hi] - table.k[lo])};
}

std::complex<double> sellmeier(const Sellmeier& model, double wavelength_nm) {
  if (model.valid_max_nm > 0)
    EXPECTS(wavelength_nm >= model.valid_min_nm && wavelength_nm <= model.valid_max_nm,
            "wavelength " + format_nm(wavelength_nm) + " outside the Sellmeier model's range " +
                format_nm(model.valid_min_nm) + " to " + format_nm(model.valid_max_nm));
  const double l2 = wavelength_nm * wavelength_nm;
  double n2 = 1;
  for (std::size_t i = 0; i < model.b.size(); ++i)
    n2 += model.b[i] * l2 / (l2 - model.resonance_nm[i] * model.resonance_nm[i]);
  EXPECTS(n2 > 0, "Sellmeier model gives n² = " + std::to_string(n2) + " ≤ 0 at " + format_nm(wavelength_nm));
  return {std::sqrt(n2), 0.0};
}

struct RowField {
  std::string_view text;
  int column;  // 1-based
};

std::vector<RowField> split_fields(std::string_view line) {
  std::vector<RowField> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ',' || line[i] == ';' || line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
      ++i;
    const std::size_t start = i;
    while (i < line.size() && !(line[i] == ',' || line[i] == ';' || line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
      ++i;
    if (i > start) fields.push_back({line.substr(start, i - start), int(start) + 1});
  }
  return fields;
}

bool parse_double(std::string_view text, double& value) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && std::isfinite(value);
}

}  // namespace

std::complex<double> Material::refractive_index(double wavelength_nm) const {
  if (const auto* constant = std::get_if<ConstantIndex>(&model)) return constant->index;
  if (const auto* table = std::get_if<IndexTable>(&model)) return interpolate(*table, wavelength_nm);
  return sellmeier(std::get<Sellmeier>(model), wavelength_nm);
}

std::complex<double> Material::permittivity(double wavelength_nm) const {
  const std::complex<double> index = refractive_index(wavelength_nm);
  return index * index;
}

const std::map<std::string, Material, std::less<>>& built_in_materials() {
  static const std::map<std::string, Material, std::less<>> materials = [] {
    std::map<std::string, Material, std::less<>> m;
    m["air"] = {"air", ConstantIndex{{1.0, 0.0}}, true};
    m["vacuum"] = {"vacuum", ConstantIndex{{1.0, 0.0}}, true};
    // I. H. Malitson, J. Opt. Soc. Am. 55, 1205 (1965): fused silica at 20 °C, 0.21–3.71 µm.
    m["SiO2"] = {"SiO2",
                 Sellmeier{{0.6961663, 0.4079426, 0.8974794}, {68.4043, 116.2414, 9896.161}, 210.0, 3710.0},
                 true};
    return m;
  }();
  return materials;
}

IndexTable read_index_table(const std::string& path, LengthUnit unit) {
  std::ifstream in(path);
  if (!in) throw CaseError(path, 0, 0, "cannot read the index table (missing or unreadable file)");
  IndexTable table;
  table.path = path;
  const double scale = nanometres_per(unit);
  std::string line;
  int line_number = 0;
  bool header_allowed = true;
  int columns = 0;
  while (std::getline(in, line)) {
    ++line_number;
    std::string_view text(line);
    if (const auto hash = text.find('#'); hash != std::string_view::npos) text = text.substr(0, hash);
    const auto fields = split_fields(text);
    if (fields.empty()) continue;
    double first = 0;
    if (header_allowed && !parse_double(fields[0].text, first)) {  // a line of column names
      header_allowed = false;
      continue;
    }
    header_allowed = false;
    const auto at = [&](const RowField& f, const std::string& message) {
      throw CaseError(path, line_number, f.column, message);
    };
    if (fields.size() < 2 || fields.size() > 3)
      at(fields[0], "expected 2 or 3 columns (wavelength, n[, k]), got " + std::to_string(fields.size()));
    if (columns != 0 && int(fields.size()) != columns)
      at(fields[0], "expected " + std::to_string(columns) + " columns like the rows above, got " +
                        std::to_string(fields.size()));
    columns = int(fields.size());
    double values[3] = {0, 0, 0};
    for (std::size_t i = 0; i < fields.size(); ++i)
      if (!parse_double(fields[i].text, values[i]))
        at(fields[i], "expected a finite number, got '" + std::string(fields[i].text) + "'");
    const double wavelength_nm = values[0] * scale;
    if (wavelength_nm <= 0) at(fields[0], "wavelength must be > 0");
    if (!table.wavelength_nm.empty() && wavelength_nm <= table.wavelength_nm.back())
      at(fields[0], "wavelengths must increase strictly from row to row");
    if (values[1] <= 0) at(fields[1], "n must be > 0");
    if (values[2] < 0) at(fields[2], "k must be ≥ 0 (absorption; exp(-iωt) convention)");
    table.wavelength_nm.push_back(wavelength_nm);
    table.n.push_back(values[1]);
    table.k.push_back(values[2]);
  }
  if (table.wavelength_nm.size() < 2)
    throw CaseError(path, std::max(line_number, 1), 1, "an index table needs at least two rows");
  return table;
}

}  // namespace gratingsim::io
