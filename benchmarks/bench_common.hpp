#pragma once
// What bench conv and bench solve share: the option rows of one meaning in both (each command keeps its
// own table, in its own order, and reads the values itself), CSV quoting, and how a run ends.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/cli.hpp"

namespace gratingsim::app {
namespace bench_option {

constexpr OptionSpec precision{"precision", "single|double|both", "complex64, complex128 or both (default both)"};
constexpr OptionSpec bandwidth{"bandwidth", "GB/s",
                               "memory bandwidth of the floor (default 3000, the H100's measured copy bandwidth)"};
constexpr OptionSpec csv{"csv", "FILE", "also write the rows to FILE as CSV"};

/// --repeats N: `help` says what a bench times and how many by default.
constexpr OptionSpec repeats(std::string_view help) { return {"repeats", "N", help}; }
/// --warmup-ms MS: `help` says what a bench runs untimed first.
constexpr OptionSpec warmup_ms(std::string_view help) { return {"warmup-ms", "MS", help}; }

}  // namespace bench_option

/// `s` as one CSV field (RFC 4180): in quotes, its quotes doubled, where it holds a comma, quote or newline.
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + '"';
}

/// The end of a bench run: the rows written to `csv` where given (write_csv(file, rows)), then exit
/// status 1 with a line counting the rows that `failed`, or 0 when none did.
template <class Row, class WriteCsv, class Failed>
int finish_bench(const std::optional<std::string>& csv, const std::vector<Row>& rows, WriteCsv write_csv,
                 Failed failed) {
  if (csv) {
    write_csv(*csv, rows);
    std::printf("\nwrote %s\n", csv->c_str());
  }
  const auto failed_rows = std::count_if(rows.begin(), rows.end(), failed);
  if (failed_rows) {
    std::printf("\n%td row(s) FAILED\n", failed_rows);
    return 1;
  }
  return 0;
}

}  // namespace gratingsim::app
