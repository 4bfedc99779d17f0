// The gratingsim executable as a user runs it: help, version, errors, and a small verified benchmark.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "validation/app/executable.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;

namespace {

using Result = gratingsim::test::Execution;

/// Runs `gratingsim <arguments>`, leaving no FFTW wisdom or backend cache behind (executable.hpp).
Result cli(const std::string& arguments) { return gratingsim::test::run_gratingsim(arguments); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> fields;
  std::stringstream ss(line);
  for (std::string f; std::getline(ss, f, separator);) fields.push_back(f);
  if (!line.empty() && line.back() == separator) fields.emplace_back();
  return fields;
}

}  // namespace

TEST_CASE("--help and --version succeed with text", "[cli]") {
  const Result help = cli("--help");
  INFO(help.output);
  CHECK(help.status == 0);
  CHECK(contains(help.output, "usage: gratingsim"));
  CHECK(contains(help.output, "bench"));
  CHECK(contains(help.output, "info"));

  const Result version = cli("--version");
  INFO(version.output);
  CHECK(version.status == 0);
  CHECK(version.output.rfind("gratingsim ", 0) == 0);
  CHECK(version.output.find_first_of("0123456789") != std::string::npos);

  CHECK(contains(help.output, "run"));
  CHECK(contains(help.output, "validate"));

  for (const char* sub : {"info --help", "bench --help", "bench conv --help", "run --help", "validate --help"}) {
    const Result r = cli(sub);
    INFO(sub << ": " << r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "usage: gratingsim"));
  }

  // -h is --help, on every command.
  for (const char* command : {"", "info", "bench", "bench conv", "bench solve", "run", "validate"}) {
    const std::string name = *command ? std::string("gratingsim ") + command : "gratingsim";
    const Result h = cli(std::string(command) + " -h");
    INFO(name << " -h: " << h.output);
    CHECK(h.status == 0);
    CHECK(h.output.rfind("usage: " + name, 0) == 0);
    CHECK(h.output == cli(std::string(command) + " --help").output);
  }
}

TEST_CASE("info lists the build, devices, backends and libraries", "[cli]") {
  const Result r = cli("info");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "CUDA devices:"));
  CHECK(contains(r.output, "cpu-direct  available"));
  CHECK(contains(r.output, "FFTW      fftw-3"));
  // Whether MPI is built in, and the versions of the libraries io reads and writes with.
  CHECK(contains(r.output, GRATINGSIM_EXECUTABLE_MPI ? "MPI:       built in" : "MPI:       not built in"));
  CHECK(std::regex_search(r.output, std::regex(R"(\n  HDF5      1\.\d+\.\d+\n)")));
  CHECK(std::regex_search(r.output, std::regex(R"(\n  yaml-cpp  0\.\d+\.\d+\n)")));
}

TEST_CASE("wrong command lines exit with 2 and say what is wrong", "[cli]") {
  const std::pair<const char*, const char*> cases[] = {
      {"", "missing command"},
      {"frobnicate", "unknown command 'frobnicate'"},
      {"bench", "missing command"},
      {"bench solve-everything", "unknown command 'solve-everything'"},
      {"info --verbose", "unknown option '--verbose'"},
      {"bench conv --bogus", "unknown option '--bogus'"},
      {"bench conv --case 5", "--case expects"},
      {"bench conv --case 1,9", "got '9'"},
      {"bench conv --case 1,,2", "empty item"},
      {"bench conv --backend gpu-magic", "unknown backend 'gpu-magic'"},
      {"bench conv --precision half", "--precision expects"},
      {"bench conv --shape triangle", "--shape: expected scalar, normal-vector or both"},
      {"bench conv --repeats 0", "--repeats expects"},
      {"bench conv --repeats", "needs a value"},
      {"bench conv --case 1 --case 2", "given twice"},
      {"bench conv stray", "unexpected argument 'stray'"},
      {"bench conv solve", "unexpected argument 'solve'"},
      {"run a.yaml --quiet --quiet", "option '--quiet' given twice"},
      {"run a.yaml --overwrite=no", "option '--overwrite' takes no value"},
      {"run a.yaml -o x.h5 --output=y.h5", "option '--output' given twice"},
      {"--version extra", "takes no arguments"},
  };
  for (auto [arguments, message] : cases) {
    const Result r = cli(arguments);
    INFO("gratingsim " << arguments << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, message));
  }
}

TEST_CASE("bench conv on case 1 with the CPU backends writes verified CSV rows", "[cli][bench]") {
  const fs::path dir = fs::temp_directory_path() / ("gratingsim-cli-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path csv = dir / "bench.csv";
  std::ofstream(csv) << "poison: not written by this run\n";

  const Result r = cli("bench conv --case 1 --backend cpu-direct,cpu-fftw --repeats 3 --csv '" +
                              csv.string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "case 1, single"));
  CHECK(contains(r.output, "case 1, double"));

  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  CHECK(header ==
        "case,backend,precision,device,median_us,min_us,max_us,floor_us,ratio_to_floor,speedup_vs_cufft,"
        "max_rel_error,verified,shape");
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(split(line, ','));
  fs::remove_all(dir);

  // cpu-fftw brings its unpruned comparison row; rows in canonical order, per precision.
  const std::pair<const char*, const char*> expected[] = {
      {"cpu-fftw", "single"}, {"cpu-fftw-unpruned", "single"}, {"cpu-direct", "single"},
      {"cpu-fftw", "double"}, {"cpu-fftw-unpruned", "double"}, {"cpu-direct", "double"},
  };
  REQUIRE(rows.size() == std::size(expected));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& f = rows[i];
    INFO("row " << i);
    REQUIRE(f.size() == 13);
    CHECK(f[0] == "1");
    CHECK(f[1] == expected[i].first);
    CHECK(f[2] == expected[i].second);
    CHECK(!f[3].empty());  // host CPU model and threads
    const double median = std::stod(f[4]), min = std::stod(f[5]), max = std::stod(f[6]);
    CHECK(min > 0);
    CHECK(min <= median);
    CHECK(median <= max);
    // Floor: s·(2·N² + L²/per_slice)·batch / B, N 7, L 16, 24 per slice, batch 792, B = 3e12 B/s.
    const double s = f[2] == "single" ? 8 : 16;
    const double floor_us = 1e6 * s * (2 * 49 + 256.0 / 24) * 792 / 3e12;
    CHECK(std::abs(std::stod(f[7]) - floor_us) <= 1e-4 * floor_us);
    CHECK(std::abs(std::stod(f[8]) - median / floor_us) <= 1e-3 * median / floor_us);
    CHECK(f[9].empty());  // no gpu-cufft row to compare with
    CHECK(std::stod(f[10]) <= (f[2] == "single" ? 1e-4 : 1e-10));
    CHECK(f[11] == "yes");
    CHECK(f[12] == "scalar");
  }
}

TEST_CASE("bench conv --shape normal-vector runs the pattern against its own floor", "[cli][bench]") {
  const fs::path dir = fs::temp_directory_path() / ("gratingsim-cli-nv-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path csv = dir / "bench.csv";
  const Result r = cli("bench conv --case 1 --backend cpu-direct --precision double --shape normal-vector --repeats 3 "
                       "--csv '" + csv.string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "case 1, normal-vector, double"));
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  std::vector<std::vector<std::string>> rows;
  for (; std::getline(in, line);) rows.push_back(split(line, ','));
  fs::remove_all(dir);
  REQUIRE(rows.size() == 1);
  const auto& f = rows[0];
  REQUIRE(f.size() == 13);
  CHECK(f[1] == "cpu-direct");
  CHECK(f[11] == "yes");
  CHECK(f[12] == "normal-vector");
  // Floor: s·[(Q + P)·N²·groups + K·L²·slices] / B: Q 3, P 5, K 7, N 7, L 16, 33 slices x 16 groups.
  const double floor_us = 1e6 * 16 * (8.0 * 49 * 33 * 16 + 7.0 * 256 * 33) / 3e12;
  CHECK(std::abs(std::stod(f[7]) - floor_us) <= 1e-4 * floor_us);
}
