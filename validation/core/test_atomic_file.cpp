// core/atomic_file.hpp: publication replaces the target whole, leaves no temporary, and a failure
// names the path and leaves the old file as it was.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;

namespace {
std::string random_text(std::mt19937& rng, std::size_t size) {
  std::string s(size, ' ');
  for (char& c : s) c = char('a' + rng() % 26);
  return s;
}
std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
fs::path fresh_directory(std::mt19937& rng) {
  const fs::path d = fs::temp_directory_path() / ("gratingsim-atomic-" + std::to_string(::getpid()) + "-" + std::to_string(rng()));
  fs::create_directories(d);
  return d;
}
bool only_target_in(const fs::path& dir, const fs::path& target) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path() != target) return false;
  return true;
}
}  // namespace

TEST_CASE("write_file_atomically creates, then replaces, with no temporary left", "core") {
  std::mt19937 rng(std::random_device{}());
  const fs::path dir = fresh_directory(rng);
  const fs::path target = dir / "nested" / "cache.txt";  // its directory is created
  const std::string first = random_text(rng, 1000 + rng() % 5000), second = random_text(rng, 10 + rng() % 100);
  gratingsim::write_file_atomically(target, first);
  CHECK(read(target) == first);
  gratingsim::write_file_atomically(target, second);
  CHECK(read(target) == second);
  CHECK(only_target_in(target.parent_path(), target));
  fs::remove_all(dir);
}

TEST_CASE("write_file_atomically into a path under a regular file fails with FileError naming it", "core") {
  std::mt19937 rng(std::random_device{}());
  const fs::path dir = fresh_directory(rng);
  const fs::path blocker = dir / "not-a-directory";
  const std::string old = random_text(rng, 64);
  gratingsim::write_file_atomically(blocker, old);
  const fs::path target = blocker / "file.txt";
  try {
    gratingsim::write_file_atomically(target, "x");
    FAIL("no exception");
  } catch (const gratingsim::FileError& e) {
    CHECK_THAT(e.what(), Catch::Contains(blocker.string()));
  }
  CHECK(read(blocker) == old);
  CHECK(only_target_in(dir, blocker));
  fs::remove_all(dir);
}

TEST_CASE("sync_file of a missing file fails with FileError and the system's reason", "core") {
  std::mt19937 rng(std::random_device{}());
  const fs::path missing = fs::temp_directory_path() / ("gratingsim-missing-" + std::to_string(rng()));
  try {
    gratingsim::sync_file(missing);
    FAIL("no exception");
  } catch (const gratingsim::FileError& e) {
    CHECK_THAT(e.what(), Catch::Contains(missing.string()));
    CHECK_THAT(e.what(), Catch::Contains("No such file"));
  }
  CHECK_NOTHROW(gratingsim::sync_parent_directory(missing));  // its directory exists
}
