// Every malformed case under validation/io/cases/ must fail with a located CaseError whose location and
// message match the file's first line, "# expect: LINE:COLUMN fragment", and leave no output file.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/case.hpp"
#include "io/results.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;

namespace {

struct Expectation {
  int line = 0, column = 0;
  std::string fragment;
};

Expectation expectation_of(const fs::path& file) {
  std::ifstream in(file);
  std::string first;
  std::getline(in, first);
  const std::string prefix = "# expect: ";
  REQUIRE(first.rfind(prefix, 0) == 0);
  const std::string rest = first.substr(prefix.size());
  const auto colon = rest.find(':'), space = rest.find(' ');
  REQUIRE(colon != std::string::npos);
  REQUIRE(space != std::string::npos);
  return {std::stoi(rest.substr(0, colon)), std::stoi(rest.substr(colon + 1, space - colon - 1)),
          rest.substr(space + 1)};
}

/// What the application does with a case: read it, then open the output. The error must come first.
void run_until_output(const fs::path& case_file, const fs::path& output) {
  const io::Case c = io::load_case(case_file.string());
  io::ResultLayout layout;
  layout.wavelength_nm = c.wavelength_nm;
  layout.theta_deg = c.incidence.theta_deg;
  layout.phi_deg = c.incidence.phi_deg;
  layout.orders = {{0, 0}};
  (void)io::ResultWriter::create(output.string(), layout, io::RunInfo{});
}

}  // namespace

TEST_CASE("malformed cases give located errors and no output file", "[io][case]") {
  const fs::path directory = fs::path(__FILE__).parent_path() / "cases";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(directory))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 30);

  const fs::path out_dir = fs::temp_directory_path() / ("gratingsim_io_errors_" + std::to_string(::getpid()));
  fs::create_directories(out_dir);
  for (const auto& file : files) {
    INFO(file.filename().string());
    const Expectation expected = expectation_of(file);
    const fs::path output = out_dir / (file.stem().string() + ".h5");
    bool thrown = false;
    try {
      run_until_output(file, output);
    } catch (const io::CaseError& e) {
      thrown = true;
      const std::string what = e.what();
      INFO(what);
      // The message is "FILE:LINE:COLUMN: error: MESSAGE" and names the case file or a file it references.
      CHECK(what.rfind(e.file() + ":" + std::to_string(e.line()) + ":" + std::to_string(e.column()) + ": error: ", 0) ==
            0);
      CHECK(fs::path(e.file()).parent_path().string().rfind(directory.string(), 0) == 0);
      CHECK(e.line() == expected.line);
      CHECK(e.column() == expected.column);
      CHECK(what.find(expected.fragment) != std::string::npos);
      // The application catches gratingsim::Error and exits non-zero.
      CHECK(dynamic_cast<const Error*>(&e) != nullptr);
    }
    CHECK(thrown);
    CHECK_FALSE(fs::exists(output));
    CHECK_FALSE(fs::exists(io::partial_path(output.string())));
  }
  CHECK(fs::is_empty(out_dir));
  fs::remove_all(out_dir);
}

TEST_CASE("an unreadable case file is an error naming the file", "[io][case]") {
  const std::string missing = (fs::temp_directory_path() / "gratingsim_no_such_case.yaml").string();
  try {
    (void)io::load_case(missing);
    FAIL("no error");
  } catch (const io::CaseError& e) {
    CHECK(std::string(e.what()).rfind(missing + ": error: cannot read", 0) == 0);
  }
}
