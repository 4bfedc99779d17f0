// Refractive-index tables: text files of wavelength, n[, k] rows.
#include "io/index_table.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <system_error>

namespace gratingsim::io {

namespace {

struct RowField {
  std::string_view text;
  int column;  // 1-based
};

std::vector<RowField> split_fields(std::string_view line) {
  std::vector<RowField> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() &&
           (line[i] == ',' || line[i] == ';' || line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
      ++i;
    const std::size_t start = i;
    while (i < line.size() &&
           !(line[i] == ',' || line[i] == ';' || line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
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

IndexTable read_index_table(const std::string& path, LengthUnit unit) {
  std::ifstream in(path);
  if (!in) throw CaseError(path, 0, 0, "cannot read the index table (missing or unreadable file)");
  IndexTable table;
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
      at(fields[0],
         "expected " + std::to_string(columns) + " columns like the rows above, got " + std::to_string(fields.size()));
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
