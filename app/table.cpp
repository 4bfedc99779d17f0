#include "app/table.hpp"

#include <algorithm>

namespace gratingsim::app {

std::size_t display_width(std::string_view text) {
  return std::size_t(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

void widen(std::vector<Column>& columns, std::span<const std::vector<std::string>> rows) {
  for (std::size_t i = 0; i < columns.size(); ++i) {
    columns[i].width = std::max(columns[i].width, display_width(columns[i].header));
    for (const auto& row : rows)
      if (i < row.size()) columns[i].width = std::max(columns[i].width, display_width(row[i]));
  }
}

std::string format_row(std::span<const Column> columns, std::span<const std::string> cells) {
  std::string line = " ";
  for (std::size_t i = 0; i < columns.size() && i < cells.size(); ++i) {
    const Column& c = columns[i];
    const std::size_t w = display_width(cells[i]);
    const std::string padding(c.width > w ? c.width - w : 0, ' ');
    line += ' ';
    if (c.left)
      line += cells[i] + (i + 1 == columns.size() ? "" : padding + ' ');
    else
      line += padding + cells[i] + ' ';
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

std::string format_header(std::span<const Column> columns) {
  std::vector<std::string> headers;
  for (const Column& c : columns) headers.push_back(c.header);
  return format_row(columns, headers);
}

}  // namespace gratingsim::app
