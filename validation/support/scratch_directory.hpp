#pragma once
// A scratch directory for tests that write files.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace gratingsim::test {

/// A fresh directory under the temporary directory, gratingsim_test_TAG_PID (the process id: CTest runs
/// test cases in parallel processes), removed with its contents at scope exit.
class ScratchDirectory {
 public:
  explicit ScratchDirectory(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() / ("gratingsim_test_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDirectory() {
    std::error_code ignored;  // a destructor must not throw
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace gratingsim::test
