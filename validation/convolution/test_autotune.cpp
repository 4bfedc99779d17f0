// The `auto` backend choice and its cache file, and the timing utility it measures with.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "convolution/autotune.hpp"
#include "convolution/timing.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
namespace fs = std::filesystem;

namespace {

/// A fresh directory per test case, removed afterwards. FFTW plans by estimate and keeps no wisdom
/// files, so the tests are quick and leave nothing behind.
struct TempDir {
  fs::path path;
  TempDir() {
    setenv("GRATINGSIM_FFTW_PLANNING", "estimate", 1);
    setenv("GRATINGSIM_FFTW_WISDOM", "", 1);
    path = fs::temp_directory_path() /
           ("gratingsim-autotune-" + std::to_string(getpid()) + "-" + std::to_string(test::rng()()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::vector<std::string> cache_entries(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}

std::string key_of(const conv::Problem& g, conv::Precision p) {
  const conv::Problem r = conv::resolve(g);
  std::ostringstream os;
  os << r.n1 << ' ' << r.n2 << ' ' << r.l1 << ' ' << r.l2 << ' ' << r.slices << ' ' << r.per_slice << ' '
     << conv::to_string(p) << ' ' << conv::machine_key();
  return os.str();
}

/// Captures what is written to std::cerr while alive.
struct CaptureStderr {
  std::ostringstream text;
  std::streambuf* saved = std::cerr.rdbuf(text.rdbuf());
  ~CaptureStderr() { std::cerr.rdbuf(saved); }
};

}  // namespace

TEST_CASE("a cache miss measures, returns an available backend and writes the cache", "[autotune]") {
  TempDir dir;
  const fs::path cache = dir.path / "sub" / "backends.txt";  // the directory does not exist yet
  const conv::Problem g{.n1 = 7, .n2 = 5, .slices = 2, .per_slice = 3};

  const conv::Backend chosen = conv::select_backend(g, conv::Precision::single, cache);
  CHECK(conv::backend_available(chosen));
  REQUIRE(fs::exists(cache));
  const auto lines = cache_entries(cache);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == key_of(g, conv::Precision::single) + ' ' + std::string(conv::to_string(chosen)));
  for (const auto& entry : fs::directory_iterator(cache.parent_path()))  // no temporary left behind
    CHECK(entry.path().filename() == "backends.txt");

  // Another precision is another key: appended, the first line kept.
  const conv::Backend chosen_double = conv::select_backend(g, conv::Precision::double_, cache);
  CHECK(conv::backend_available(chosen_double));
  const auto after = cache_entries(cache);
  REQUIRE(after.size() == 2);
  CHECK(after[0] == lines[0]);
  CHECK(after[1] == key_of(g, conv::Precision::double_) + ' ' + std::string(conv::to_string(chosen_double)));
}

TEST_CASE("a cache hit returns the cached choice without measuring", "[autotune]") {
  TempDir dir;
  const fs::path cache = dir.path / "backends.txt";
  // 2·63⁴·50 ≈ 1.6e9 multiply-adds per execution: far above what autotune would ever time cpu-direct
  // for, so cpu-direct can only come from the cache, and returning it shows nothing was measured.
  const conv::Problem g{.n1 = 63, .n2 = 63, .slices = 2, .per_slice = 50};
  {
    std::ofstream out(cache);
    out << "# a comment\n" << key_of(g, conv::Precision::double_) << " cpu-direct\n";
  }
  const auto before = fs::last_write_time(cache);
  CHECK(conv::select_backend(g, conv::Precision::double_, cache) == conv::Backend::cpu_direct);
  CHECK(cache_entries(cache).size() == 1);
  CHECK(fs::last_write_time(cache) == before);

  // The last line for a key wins.
  { std::ofstream(cache, std::ios::app) << key_of(g, conv::Precision::double_) << " cpu-fftw\n"; }
  CHECK(conv::select_backend(g, conv::Precision::double_, cache) == conv::Backend::cpu_fftw);
}

TEST_CASE("corrupt cache lines are ignored with a warning", "[autotune]") {
  TempDir dir;
  const fs::path cache = dir.path / "backends.txt";
  const conv::Problem g{.n1 = 5, .n2 = 5, .slices = 3, .per_slice = 4};
  const std::string key = key_of(g, conv::Precision::single);
  {
    std::ofstream out(cache);
    out << "garbage\n"
        << key << " no-such-backend\n"
        << "5 5 x 8 3 4 single " << conv::machine_key() << " cpu-fftw\n"
        << "5 5 8 8 3 4 quadruple " << conv::machine_key() << " cpu-fftw\n"
        << "5 5 8 8 3 4 single\n"
        << "\n"
        << key << " cpu-direct\n"
        << "4 4 8 8 3 4 single " << conv::machine_key() << " cpu-fftw\n";  // even N is no geometry
  }
  CaptureStderr captured;
  CHECK(conv::select_backend(g, conv::Precision::single, cache) == conv::Backend::cpu_direct);
  const std::string warnings = captured.text.str();
  INFO(warnings);
  for (int corrupt : {1, 2, 3, 4, 5, 8})
    CHECK(warnings.find("ignoring line " + std::to_string(corrupt) + " ") != std::string::npos);
  for (int fine : {6, 7}) CHECK(warnings.find("ignoring line " + std::to_string(fine) + " ") == std::string::npos);
}

TEST_CASE("a cache in a directory that cannot be created costs a warning, not the choice", "[autotune]") {
  TempDir dir;
  const fs::path blocker = dir.path / "file";
  std::ofstream(blocker) << "not a directory\n";
  CaptureStderr captured;
  const conv::Backend chosen =
      conv::select_backend({.n1 = 3, .n2 = 3, .slices = 2, .per_slice = 2}, conv::Precision::single, blocker / "backends.txt");
  CHECK(conv::backend_available(chosen));
  CHECK(captured.text.str().find("not remembered") != std::string::npos);
}

TEST_CASE("default cache path follows GRATINGSIM_BACKEND_CACHE, then XDG_CACHE_HOME", "[autotune]") {
  setenv("GRATINGSIM_BACKEND_CACHE", "/some/where/cache.txt", 1);
  CHECK(conv::default_backend_cache() == fs::path("/some/where/cache.txt"));
  unsetenv("GRATINGSIM_BACKEND_CACHE");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  CHECK(conv::default_backend_cache() == fs::path("/xdg/gratingsim/backends.txt"));
  unsetenv("XDG_CACHE_HOME");
  CHECK(conv::default_backend_cache().filename() == "backends.txt");
}

TEST_CASE("time_execute rotates buffer sets and every written output is the convolution", "[timing]") {
  const conv::Problem g{.n1 = 5, .n2 = 3, .slices = 3, .per_slice = 4};
  const auto kernels = conv::random_complex<double>(g.kernels_total(), test::rng()());
  const auto in = conv::random_complex<double>(g.input_size(), test::rng()());
  auto plan = conv::make_convolution<double>(conv::Backend::cpu_direct, g, kernels);
  std::vector<std::complex<double>> expect(in.size());
  plan->execute(in.data(), expect.data());
  REQUIRE(test::l2_norm<double>(expect) > 0);

  const int sets = 5;
  conv::BufferSets<double> buffers(conv::Memory::host, in.size(), sets);
  buffers.fill_inputs(in);
  const conv::TimingOptions options{.warmup = 1, .repeats = 3};  // 4 executions: sets 0..3 written
  const conv::Timing t = conv::time_execute(*plan, buffers, options);
  REQUIRE(t.samples_us.size() == 3);
  CHECK(t.min_us() > 0);
  CHECK(t.min_us() <= t.median_us());
  CHECK(t.median_us() <= t.max_us());

  std::vector<std::complex<double>> out(in.size());
  for (int s = 0; s < sets; ++s) {
    buffers.read_output(s, out);
    const double error = test::relative_l2<double, double>(out, expect);
    if (s < 4)
      CHECK(error == 0);
    else
      CHECK(std::isinf(error));  // never written: still the NaN poison
  }
  CHECK(conv::rotation_count(conv::Memory::host, 1) >= 2);
  CHECK(conv::rotation_count(conv::Memory::host, std::size_t(1) << 40) == 1);
}

TEST_CASE("timing summaries: median of even and odd sample counts", "[timing]") {
  conv::Timing t{{4.0, 1.0, 3.0, 2.0}};
  CHECK(t.median_us() == 2.5);
  CHECK(t.min_us() == 1.0);
  CHECK(t.max_us() == 4.0);
  t.samples_us.push_back(10.0);
  CHECK(t.median_us() == 3.0);
}
