#pragma once
// A file's whole content as a string (binary: bytes as they are), for tests that read the tree or a written file.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace gratingsim::test {

inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace gratingsim::test
