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

namespace {
/// The CaseError of parsing `text` (FAIL if there is none).
io::CaseError error_of(const std::string& text) {
  try {
    (void)io::parse_case(text, "counts.yaml");
  } catch (const io::CaseError& e) {
    return e;
  }
  FAIL("the case was accepted");
  throw;  // not reached
}
}  // namespace

TEST_CASE("counts computed from user numbers are refused above their limits, never wrap", "[io][case]") {
  SECTION("a 1e12 nm film's default slicing (~1e11 slices) at its thickness") {
    const io::CaseError e = error_of(
        "wavelength: 500\nlattice: {period_x: 400}\nsubstrate: SiO2\nmaterials: {film: {n: 2}}\n"
        "layers:\n  - {material: film, thickness: 1e12}\nnumerics: {harmonics: 0}\n");
    INFO(e.what());
    CHECK(e.line() == 6);
    CHECK(e.column() == 33);
    CHECK(std::string(e.what()).find("needs 1.6e+11 slices") != std::string::npos);  // 40 · 1e12 nm · 2 / 500 nm
    CHECK(std::string(e.what()).find("more than the limit of 100000 per layer") != std::string::npos);
  }
  SECTION("21475 aliased layers of 100000 slices: 2147500000 slices in all, past INT_MAX") {
    std::string text =
        "wavelength: 500\nlattice: {period_x: 400}\nsubstrate: SiO2\n"
        "layers: [&film {material: SiO2, thickness: 1, slices: 100000}";
    for (int i = 1; i < 21475; ++i) text += ", *film";
    text += "]\nnumerics: {harmonics: 0}\n";
    const io::CaseError e = error_of(text);
    INFO(std::string(e.what()).substr(0, 300));
    CHECK(e.line() == 4);
    CHECK(e.column() == 9);
    CHECK(std::string(e.what()).find("2147500000 slices in all, more than the limit of 1000000") != std::string::npos);
  }
  SECTION("a sweep of 10⁴ wavelengths × 10⁴ angles (10⁸ points) at incidence") {
    const io::CaseError e = error_of(
        "wavelength: {start: 400, stop: 800, count: 10000}\nincidence: {theta_deg: {start: 0, stop: 80, count: 10000}}\n"
        "lattice: {period_x: 400}\nsubstrate: SiO2\nlayers: [{material: SiO2, thickness: 10}]\nnumerics: {harmonics: 0}\n");
    INFO(e.what());
    CHECK(e.line() == 2);
    CHECK(std::string(e.what()).find("1e+08 points (10000 wavelengths × 10000 θ × 1 φ), more than the limit of 1e+07") !=
          std::string::npos);
  }
}
