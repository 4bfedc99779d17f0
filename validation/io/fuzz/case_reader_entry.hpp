#pragma once
// The one entry point of the case-reader fuzz target (fuzz_case_reader.cpp, libFuzzer) and of its
// corpus replay in CI (validation/io/test_fuzz_corpus.cpp): reads one input the way `gratingsim run`
// reads a case, with io::parse_case, over the YAML text and a material table.
//
// An input is the case text, optionally followed by a line "%%table" and the text of a table file:
// the table is written to table.csv in a directory of this process, against which the case's
// relative table paths resolve (a seed using it says `table: table.csv`). A refused case (CaseError,
// any gratingsim::Error) is a correct outcome; anything else (another exception, a crash, a hang, a
// sanitizer report) is a defect.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "io/case.hpp"

namespace gratingsim::fuzz {

inline const std::string& table_directory() {
  static const std::string directory = [] {
    const auto d = std::filesystem::temp_directory_path() / ("gratingsim-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return directory;
}

/// Returns 0; throws nothing that is not a refusal (a defect escapes as an exception or a crash).
inline int read_case_input(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view separator = "\n%%table\n";
  const std::size_t at = input.find(separator);
  const std::string_view yaml = input.substr(0, at);
  {
    std::ofstream table(table_directory() + "/table.csv", std::ios::binary | std::ios::trunc);
    if (at != std::string_view::npos) table << input.substr(at + separator.size());
  }
  try {
    (void)io::parse_case(yaml, "fuzz.yaml", table_directory());
  } catch (const gratingsim::Error&) {
    // a refusal, located: the reader's correct answer to a malformed case
  }
  return 0;
}

}  // namespace gratingsim::fuzz
