// The time per phase of each wavelength batch (physics/phase_times.hpp, app/phases.hpp): `run`
// stores it in solver/phase_seconds (every phase finite, non-negative, shared by a batch's points,
// the batches' sum within the wall time of the whole command) and prints it in the summary;
// `bench e2e` prints the same table, whose sum stays within the sweep's wall time it prints. Of a sweep
// of many batches the summary shows only the few that took longest.
#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "validation/app/executable.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;
using test::contains;
using test::quoted;
using test::run_gratingsim;

namespace {

/// Wall time of `arguments` run by the executable, s; its output in `out`.
double timed_run(const std::string& arguments, test::Execution& out) {
  const auto start = std::chrono::steady_clock::now();
  out = run_gratingsim(arguments);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The phases attribute of solver/phase_seconds, read through the HDF5 C API ("" when absent).
std::string phases_attribute(const std::string& path) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  std::string text;
  if (H5Lexists(file, "solver/phase_seconds", H5P_DEFAULT) > 0) {
    const hid_t set = H5Dopen2(file, "solver/phase_seconds", H5P_DEFAULT);
    if (H5Aexists(set, "phases") > 0) {
      const hid_t attribute = H5Aopen(set, "phases", H5P_DEFAULT);
      const hid_t type = H5Aget_type(attribute);
      char* value = nullptr;
      const hid_t memory = H5Tget_native_type(type, H5T_DIR_DEFAULT);
      if (H5Tis_variable_str(type) > 0 && H5Aread(attribute, memory, &value) >= 0 && value) {
        text = value;
        H5free_memory(value);
      } else if (H5Tis_variable_str(type) <= 0) {
        text.resize(H5Tget_size(type));
        H5Aread(attribute, memory, text.data());
        text.resize(std::strlen(text.c_str()));
      }
      H5Tclose(memory);
      H5Tclose(type);
      H5Aclose(attribute);
    }
    H5Dclose(set);
  }
  H5Fclose(file);
  return text;
}

/// Checks every point's phases; returns their sum over the distinct batches.
double check_points(const std::string& path, std::size_t per_batch) {
  const io::ResultReader reader(path);
  const std::size_t points = reader.layout().points();
  double sum = 0;
  for (std::size_t p = 0; p < points; ++p) {
    INFO("point " << p);
    const auto row = reader.read(p).phase_seconds;
    // The fill value is NaN: a phase never recorded (or a missing dataset) fails here.
    for (std::size_t i = 0; i < physics::phase_count; ++i) {
      INFO("phase " << physics::phase_names[i]);
      CHECK(std::isfinite(row[i]));
      CHECK(row[i] >= 0);
    }
    CHECK(row[std::size_t(physics::Phase::krylov)] > 0);
    CHECK(row[std::size_t(physics::Phase::writing)] > 0);
    const std::size_t first = p - p % per_batch;  // the batch's points share its row
    CHECK(std::memcmp(row.data(), reader.read(first).phase_seconds.data(), sizeof row) == 0);
    if (p == first)
      for (const double s : row) sum += s;
  }
  return sum;
}

}  // namespace

TEST_CASE("run: the phases of every batch are stored, non-negative, within the wall time, and summarised",
          "[app][phases]") {
  const test::ScratchDirectory dir("phases");
  const auto config = dir / "sweep.yaml", output = dir / "sweep.h5";
  std::ofstream(config) << test::sweep_case;  // 3 wavelengths × 2 angles: 3 batches of 2 points
  for (const char* backend : {"cpu-direct", "cpu-fftw"}) {
    INFO(backend);
    test::Execution run;
    const double wall = timed_run("run " + quoted(config) + " -o " + quoted(output) + " --overwrite --backend " + backend, run);
    INFO(run.output);
    REQUIRE(run.status == 0);
    CHECK(phases_attribute(output.string()) ==
          "structure,spectra+plans,z-operator,uploads,preconditioner,krylov,far-field,writing");
    const double sum = check_points(output.string(), 2);
    CHECK(sum > 0);
    CHECK(sum <= wall);
    // The summary's table: a row per batch, the total, the share and the comparison with the sweep's wall time.
    CHECK(contains(run.output, "time per phase of each wavelength batch"));
    CHECK(contains(run.output, "λ = 650 nm"));
    CHECK(contains(run.output, "total (3 batches)"));
    std::smatch m;
    REQUIRE(std::regex_search(run.output, m, std::regex(R"(phases sum to ([0-9.]+) s of ([0-9.]+) s wall time)")));
    CHECK(std::stod(m[1]) <= std::stod(m[2]) + 1e-3);  // printed to 1 ms
    CHECK(std::stod(m[2]) <= wall);
  }
}

TEST_CASE("run with two workers: the phases' sum is compared with the wall time in words that fit it", "[app][phases]") {
  // Two workers solve batches side by side: the phases may sum to more than the sweep's wall time, and the summary
  // must then say that they overlap rather than leave a negative remainder "between batches".
  const test::ScratchDirectory dir("phases_workers");
  const auto config = dir / "sweep.yaml", output = dir / "sweep.h5";
  std::ofstream(config) << test::sweep_case;
  test::Execution run;
  const double wall = timed_run("run " + quoted(config) + " -o " + quoted(output) + " --backend cpu-fftw --workers 2", run);
  INFO(run.output);
  REQUIRE(run.status == 0);
  std::smatch m;
  double printed_sum = 0, printed_wall = 0;
  if (std::regex_search(run.output, m, std::regex(R"(phases sum to ([0-9.]+) s of ([0-9.]+) s wall time \(the rest)"))) {
    printed_sum = std::stod(m[1]), printed_wall = std::stod(m[2]);
    CHECK(printed_sum <= 1.01 * printed_wall + 2e-3);
  } else {
    REQUIRE(std::regex_search(
        run.output, m,
        std::regex(R"(phases sum to ([0-9.]+) s, ([0-9.]+) times the ([0-9.]+) s of wall time: batches solved side by side overlap)")));
    printed_sum = std::stod(m[1]), printed_wall = std::stod(m[3]);
    CHECK(printed_sum > printed_wall);
    // The ratio, printed to 0.1, of the unrounded sum and wall time (each printed to 1 ms).
    const double ratio = std::stod(m[2]);
    CHECK(ratio >= (printed_sum - 5e-4) / (printed_wall + 5e-4) - 0.05);
    CHECK(ratio <= (printed_sum + 5e-4) / std::max(printed_wall - 5e-4, 1e-9) + 0.05);
  }
  CHECK(printed_sum > 0);
  CHECK(printed_wall <= wall);
}

TEST_CASE("run: a sweep of more than 8 batches shows the 3 that took longest, the total and the share",
          "[app][phases]") {
  const test::ScratchDirectory dir("phases_long");
  const auto config = dir / "long.yaml", output = dir / "long.h5";
  std::ofstream(config) << R"(# ten wavelengths, one angle: ten batches of one point
wavelength: [500, 525, 550, 575, 600, 625, 650, 675, 700, 725]
lattice: {period_x: 600}
substrate: SiO2
layers:
  - {name: lines, thickness: 150, slices: 3, shapes: [{type: line, material: Si3N4, width: 250}]}
numerics: {harmonics: 4}
)";
  const test::Execution run = run_gratingsim("run " + quoted(config) + " -o " + quoted(output));
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto begin = run.output.find("time per phase of each wavelength batch");
  const auto end = run.output.find("phases sum to", begin);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  const std::string table = run.output.substr(begin, end - begin);
  CHECK(contains(table, "total (10 batches)"));
  CHECK(contains(table, "share of the wall time"));
  CHECK(contains(table, "(10 batches: the 3 that took longest shown; the total is of all)"));
  // The batches shown: the three of largest phase sum in the file, in sweep order, and no other.
  const io::ResultReader reader(output.string());
  std::vector<std::pair<double, std::string>> sums;
  for (std::size_t w = 0; w < 10; ++w) {
    double sum = 0;
    for (const double s : reader.read(w).phase_seconds) sum += s;
    char label[32];
    std::snprintf(label, sizeof label, "λ = %g nm", reader.layout().wavelength_nm[w]);
    sums.emplace_back(sum, label);
  }
  // Equal sums (batches of one work unit share its writing time equally) go in sweep order, as the table's.
  std::stable_sort(sums.begin(), sums.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; i < sums.size(); ++i) {
    INFO(sums[i].second << ", sum " << sums[i].first);
    CHECK(contains(table, "  " + sums[i].second + " ") == (i < 3));
  }
}

TEST_CASE("run: an interrupted run records the writing of the points it wrote, resume completes the phases",
          "[app][phases]") {
  const test::ScratchDirectory dir("phases_resume");
  const auto config = dir / "sweep.yaml", output = dir / "sweep.h5";
  std::ofstream(config) << test::sweep_case;
  const test::Execution stopped = run_gratingsim("run " + quoted(config) + " -o " + quoted(output) + " --stop-after 3");
  REQUIRE(stopped.status == 1);
  {
    const io::ResultReader partial(io::partial_path(output.string()));
    // Three points written, their phases recorded; the rest NaN as filled. Which three depends on the
    // workers (on a GPU several may share it, each on its own batch).
    std::size_t written = 0;
    for (std::size_t p = 0; p < 6; ++p) {
      INFO("point " << p);
      const auto row = partial.read(p).phase_seconds;
      written += partial.done(p);
      for (const double s : row) CHECK(std::isfinite(s) == partial.done(p));
    }
    CHECK(written == 3);
  }
  const test::Execution resumed = run_gratingsim("run " + quoted(config) + " -o " + quoted(output) + " --resume");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  const io::ResultReader reader(output.string());
  for (std::size_t p = 0; p < 6; ++p)
    for (const double s : reader.read(p).phase_seconds) CHECK((std::isfinite(s) && s >= 0));
}

namespace {

/// `gratingsim bench e2e` on test::sweep_case (written to scratch directory `scratch`) with `options`; its
/// output in `bench`, its wall time returned.
double bench_sweep_case(const char* scratch, const std::string& options, test::Execution& bench) {
  const test::ScratchDirectory dir(scratch);
  const auto config = dir / "sweep.yaml";
  std::ofstream(config) << test::sweep_case;
  return timed_run("bench e2e " + quoted(config) + " " + options, bench);
}

}  // namespace

TEST_CASE("bench e2e prints the phases of each batch within the sweep's wall time", "[app][phases]") {
  test::Execution bench;
  const double wall = bench_sweep_case("phases_bench", "--backend cpu-direct,cpu-fftw", bench);
  INFO(bench.output);
  REQUIRE(bench.status == 0);
  const std::regex total(R"(phases sum to ([0-9.]+) s of ([0-9.]+) s wall time)");
  int tables = 0;
  for (std::sregex_iterator it(bench.output.begin(), bench.output.end(), total), end; it != end; ++it, ++tables) {
    const double sum = std::stod((*it)[1]), sweep = std::stod((*it)[2]);
    CHECK(sum > 0);
    CHECK(sum <= sweep + 1e-3);
    CHECK(sweep <= wall);
  }
  CHECK(tables == 2);
  for (const char* phase : {"structure", "spectra+plans", "z-operator", "uploads", "preconditioner", "krylov",
                            "far-field", "writing", "total (3 batches)"})
    CHECK(contains(bench.output, phase));
  const test::Execution wrong = run_gratingsim("bench e2e --case 5");
  CHECK(wrong.status == 2);
  CHECK(contains(wrong.output, "--case expects 1, 2, 3, 4"));
  // --precision single as `run --precision single`: the case's 1e-8 tolerance raised, with run's warning (an audit
  // of session 36: it failed on 'tolerance below what complex64 can reach', leaving its temporary file).
  test::Execution single;
  bench_sweep_case("phases_bench_single", "--backend cpu-fftw --precision single", single);
  INFO(single.output);
  CHECK(single.status == 0);
  CHECK(contains(single.output, "warning: single precision: solver tolerance raised from 1e-08 to 1e-06"));
  CHECK(contains(single.output, "backend cpu-fftw, single precision"));
}

TEST_CASE("bench e2e --repeat: N sweeps in one process, their walls and the later calls' median", "[app][phases]") {
  test::Execution bench;
  const double wall = bench_sweep_case("phases_repeat", "--backend cpu-fftw --repeat 4", bench);
  INFO(bench.output);
  REQUIRE(bench.status == 0);
  CHECK(contains(bench.output, "call 1 of 4:"));
  CHECK(contains(bench.output, "call 4 of 4:"));
  std::smatch walls, steady;
  REQUIRE(std::regex_search(bench.output, walls, std::regex(R"(walls \(s\):((?: [0-9.]+)+)\n)")));
  std::vector<double> w;
  std::istringstream values(walls[1].str());
  for (double x; values >> x;) w.push_back(x);
  REQUIRE(w.size() == 4);
  CHECK(w[0] + w[1] + w[2] + w[3] <= wall);
  REQUIRE(std::regex_search(bench.output, steady,
                            std::regex(R"(steady state \(calls 2-4\): median ([0-9.]+) s, min ([0-9.]+) s, max ([0-9.]+) s)")));
  std::vector<double> later(w.begin() + 1, w.end());
  std::sort(later.begin(), later.end());
  CHECK(std::stod(steady[1]) == Approx(later[1]).margin(1e-4));  // the printed values have 4 decimals
  CHECK(std::stod(steady[2]) == Approx(later[0]).margin(1e-4));
  CHECK(std::stod(steady[3]) == Approx(later[2]).margin(1e-4));
  test::Execution zero;
  bench_sweep_case("phases_repeat_zero", "--repeat 0", zero);
  CHECK(zero.status == 2);
  CHECK(contains(zero.output, "--repeat"));
}
