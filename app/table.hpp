#pragma once
// Text tables for the terminal: cells aligned by their display width, counted in UTF-8 code points so
// that λ, θ, Σ and ° take one column each.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gratingsim::app {

struct Column {
  std::string header;
  std::size_t width = 0;  ///< at least the header's width (widen() does that)
  bool left = false;      ///< left-aligned (text); numbers are right-aligned
};

/// Code points in `text` (its width on a terminal for the scripts used here).
std::size_t display_width(std::string_view text);

/// Widens each column to its header and to every row's cell.
void widen(std::vector<Column>& columns, std::span<const std::vector<std::string>> rows = {});

/// One line: two spaces, then the cells separated by two spaces; a last left-aligned column is not padded.
std::string format_row(std::span<const Column> columns, std::span<const std::string> cells);
std::string format_header(std::span<const Column> columns);

}  // namespace gratingsim::app
