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

TEST_CASE("help (--help) and version (--version) succeed with text", "[cli]") {
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

  for (const char* sub : {"info", "bench", "bench conv", "bench solve", "run", "validate"}) {
    const Result r = cli(std::string(sub) + " --help"), short_form = cli(std::string(sub) + " -h");
    INFO(sub << ": " << r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "usage: gratingsim " + std::string(sub)));
    CHECK(short_form.status == 0);
    CHECK(short_form.output == r.output);  // -h is --help on every command
  }

  // -h is --help, on every command.
  for (const char* command : {"", "info", "bench", "bench conv", "bench solve", "bench e2e", "run", "validate"}) {
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
  CHECK(std::regex_search(r.output, std::regex(R"(\n  cpu-direct +available\n)")));
  CHECK(contains(r.output, "FFTW      fftw-3"));
  // Whether MPI is built in, and the versions of the libraries io reads and writes with.
  CHECK(contains(r.output, GRATINGSIM_EXECUTABLE_MPI ? "MPI:       built in" : "MPI:       not built in"));
  CHECK(std::regex_search(r.output, std::regex(R"(\n  HDF5      1\.\d+\.\d+\n)")));
  CHECK(std::regex_search(r.output, std::regex(R"(\n  yaml-cpp  0\.\d+\.\d+\n)")));
  CHECK(std::regex_search(r.output, std::regex(R"(\n  CLI11     \d+\.\d+\.\d+\n)")));
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
      {"bench conv --warmup 3", "unknown option '--warmup'"},
      {"bench solve --method gmres", "--method: expected gmres(M), gmres-host(M), gmres-graph(M) (CUDA graphs), bicgstab"},
      {"bench solve --method 'gmres(1)'", "--method expects"},
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

  const Result r = cli("bench conv --case 1 --backend cpu-direct,cpu-fftw --repeats 3 --warmup-ms 10 --csv '" +
                       csv.string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "case 1, single"));
  CHECK(contains(r.output, "case 1, double"));

  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  CHECK(header ==
        "case,shape,backend,precision,device,stream_median_us,stream_q1_us,stream_q3_us,stream_min_us,stream_max_us,"
        "graph_median_us,graph_q1_us,graph_q3_us,graph_min_us,graph_max_us,graph_executions,warmup_runs,warmup_ms,"
        "memory_floor_us,arithmetic_floor_us,ratio_to_floor,speedup_vs_cufft,graph_speedup_vs_cufft,"
        "speedup_vs_cufft_callbacks,graph_speedup_vs_cufft_callbacks,max_rel_error,checked_outputs,timed_executions,"
        "verified,note");
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
    REQUIRE(f.size() == 30);
    CHECK(f[0] == "1");
    CHECK(f[1] == "scalar");
    CHECK(f[2] == expected[i].first);
    CHECK(f[3] == expected[i].second);
    CHECK(!f[4].empty());  // host CPU model and threads
    const double median = std::stod(f[5]), q1 = std::stod(f[6]), q3 = std::stod(f[7]), min = std::stod(f[8]),
                 max = std::stod(f[9]);
    CHECK(min > 0);
    CHECK(min <= q1);
    CHECK(q1 <= median);
    CHECK(median <= q3);
    CHECK(q3 <= max);
    for (int graph = 10; graph <= 14; ++graph) CHECK(f[std::size_t(graph)].empty());  // no graph time on the host
    CHECK(std::stoi(f[16]) >= 1);  // warm-up runs
    CHECK(std::stod(f[17]) >= 10);  // warm-up ms
    // Memory floor: s·(2·N² + L²/per_slice)·batch / B, N 7, L 16, 24 per slice, batch 792, B = 3e12 B/s.
    const double s = f[3] == "single" ? 8 : 16;
    const double memory_us = 1e6 * s * (2 * 49 + 256.0 / 24) * 792 / 3e12;
    CHECK(std::abs(std::stod(f[18]) - memory_us) <= 1e-4 * memory_us);
    // Arithmetic floor: 792 · [10·(7·16·4 + 16·16·4) + 6·256] flop at 67e12 (FP32) or 34e12 (FP64) flop/s.
    const double arithmetic_us = 1e6 * 792 * (10.0 * (7 * 16 * 4 + 16 * 16 * 4) + 6 * 256) / (s == 8 ? 67e12 : 34e12);
    CHECK(std::abs(std::stod(f[19]) - arithmetic_us) <= 1e-4 * arithmetic_us);
    const double floor_us = std::max(memory_us, arithmetic_us);
    CHECK(std::abs(std::stod(f[20]) - median / floor_us) <= 1e-3 * median / floor_us);
    for (int speedup = 21; speedup <= 24; ++speedup)  // no gpu-cufft or gpu-cufft-callbacks row to compare with
      CHECK(f[std::size_t(speedup)].empty());
    CHECK(std::stod(f[25]) <= (f[3] == "single" ? 1e-4 : 1e-10));
    CHECK(f[26] == "3");  // every timed output checked
    CHECK(f[27] == "3");
    CHECK(f[28] == "yes");
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
  REQUIRE(f.size() == 30);
  CHECK(f[1] == "normal-vector");
  CHECK(f[2] == "cpu-direct");
  CHECK(f[28] == "yes");
  // Memory floor: s·[(Q + P)·N²·groups + K·L²·slices] / B: Q 3, P 5, K 7, N 7, L 16, 33 slices x 16 groups.
  const double floor_us = 1e6 * 16 * (8.0 * 49 * 33 * 16 + 7.0 * 256 * 33) / 3e12;
  CHECK(std::abs(std::stod(f[18]) - floor_us) <= 1e-4 * floor_us);
  // Arithmetic floor (FP64): 528 groups · [5·8·(7·16·4 + 16·16·4) + 256·(8·9 − 2·5)] flop at 34e12 flop/s.
  const double arithmetic_us = 1e6 * 528 * (40.0 * (7 * 16 * 4 + 16 * 16 * 4) + 256 * (72 - 10)) / 34e12;
  CHECK(std::abs(std::stod(f[19]) - arithmetic_us) <= 1e-4 * arithmetic_us);
}

TEST_CASE("bench solve times iterations of real solves, split into stages that add up", "[cli][bench]") {
  const fs::path dir = fs::temp_directory_path() / ("gratingsim-cli-solve-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path csv = dir / "solve.csv";
  const Result r = cli("bench solve --case 1 --backend cpu-fftw --precision double --method 'gmres(4),bicgstab' "
                       "--bicgstab-steps 3 --cpu-repeats 2 --warmup-ms 0 --csv '" + csv.string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  CHECK(line ==
        "case,backend,method,precision,device,status,iterations_per_solve,solves,iteration_median_us,"
        "iteration_min_us,iteration_max_us,convolution_us,z_operator_us,vector_ops_us,vector_ops_min_us,"
        "vector_ops_max_us,products_per_iteration,mean_arnoldi_depth,floor_bytes,floor_us,ratio_to_floor,"
        "speedup_vs_cpu_fftw,verify_rel_error,note");
  std::vector<std::vector<std::string>> rows;
  for (; std::getline(in, line);) rows.push_back(split(line, ','));
  fs::remove_all(dir);
  REQUIRE(rows.size() == 2);
  const char* methods[] = {"gmres(4)", "bicgstab"};
  const char* iterations[] = {"4", "3"};
  const char* products[] = {"1", "2"};
  const char* depths[] = {"2.5", "0.0"};  // (M + 1)/2 basis vectors per Arnoldi step; none for BiCGStab
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& f = rows[i];
    INFO("row " << i);
    REQUIRE(f.size() == 24);
    CHECK(f[1] == "cpu-fftw");
    CHECK(f[2] == methods[i]);
    CHECK(f[5] == "ok");
    CHECK(f[6] == iterations[i]);
    CHECK(f[7] == "2");
    const double median = std::stod(f[8]), min = std::stod(f[9]), max = std::stod(f[10]);
    CHECK(min > 0);
    CHECK(min <= median);
    CHECK(median <= max);
    const double conv = std::stod(f[11]), zop = std::stod(f[12]), vec = std::stod(f[13]);
    CHECK(conv > 0);
    CHECK(zop > 0);
    CHECK(vec > 0);  // the vector operations take time: not a difference of two noisy totals
    CHECK(f[16] == products[i]);
    CHECK(f[17] == depths[i]);
    CHECK(std::stod(f[20]) > 0);
    CHECK(std::stod(f[22]) <= 1e-10);
  }
}

