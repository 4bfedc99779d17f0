// The `auto` backend choice and its cache file (the key with the pattern, version 1 lines still read), and its
// fallback when a backend cannot serve a problem (a fake backend table). The timing utility it measures
// with is tested in test_timing.cpp.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "convolution/autotune.hpp"
#include "core/error.hpp"
#include "validation/convolution/pattern_cases.hpp"
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

/// A version 2 cache key: sizes, pattern signature, precision, machine.
std::string key_of(const conv::Problem& g, Precision p) {
  const conv::Problem r = conv::resolve(g);
  std::ostringstream os;
  os << r.n1 << ' ' << r.n2 << ' ' << r.l1 << ' ' << r.l2 << ' ' << r.slices << ' ' << r.per_slice << ' '
     << conv::pattern_signature(r) << ' ' << to_string(p) << ' ' << conv::machine_key();
  return os.str();
}

/// A version 1 cache key (before patterns): no signature field.
std::string version1_key_of(const conv::Problem& g, Precision p) {
  const conv::Problem r = conv::resolve(g);
  std::ostringstream os;
  os << r.n1 << ' ' << r.n2 << ' ' << r.l1 << ' ' << r.l2 << ' ' << r.slices << ' ' << r.per_slice << ' '
     << to_string(p) << ' ' << conv::machine_key();
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

  const conv::Backend chosen = conv::select_backend(g, Precision::single, cache);
  CHECK(conv::backend_available(chosen));
  REQUIRE(fs::exists(cache));
  const auto lines = cache_entries(cache);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == key_of(g, Precision::single) + ' ' + std::string(conv::to_string(chosen)));
  for (const auto& entry : fs::directory_iterator(cache.parent_path()))  // no temporary left behind
    CHECK(entry.path().filename() == "backends.txt");

  // Another precision is another key: appended, the first line kept.
  const conv::Backend chosen_double = conv::select_backend(g, Precision::double_, cache);
  CHECK(conv::backend_available(chosen_double));
  const auto after = cache_entries(cache);
  REQUIRE(after.size() == 2);
  CHECK(after[0] == lines[0]);
  CHECK(after[1] == key_of(g, Precision::double_) + ' ' + std::string(conv::to_string(chosen_double)));
}

TEST_CASE("a cache hit returns the cached choice without measuring", "[autotune]") {
  TempDir dir;
  const fs::path cache = dir.path / "backends.txt";
  // 2·63⁴·50 ≈ 1.6e9 multiply-adds per execution: far above what autotune would ever time cpu-direct
  // for, so cpu-direct can only come from the cache, and returning it shows nothing was measured.
  const conv::Problem g{.n1 = 63, .n2 = 63, .slices = 2, .per_slice = 50};
  {
    std::ofstream out(cache);
    out << "# a comment\n" << key_of(g, Precision::double_) << " cpu-direct\n";
  }
  const auto before = fs::last_write_time(cache);
  CHECK(conv::select_backend(g, Precision::double_, cache) == conv::Backend::cpu_direct);
  CHECK(cache_entries(cache).size() == 1);
  CHECK(fs::last_write_time(cache) == before);

  // The last line for a key wins.
  { std::ofstream(cache, std::ios::app) << key_of(g, Precision::double_) << " cpu-fftw\n"; }
  CHECK(conv::select_backend(g, Precision::double_, cache) == conv::Backend::cpu_fftw);
}

TEST_CASE("corrupt cache lines are ignored with a warning", "[autotune]") {
  TempDir dir;
  const fs::path cache = dir.path / "backends.txt";
  const conv::Problem g{.n1 = 5, .n2 = 5, .slices = 3, .per_slice = 4};
  const std::string key = key_of(g, Precision::single);
  {
    std::ofstream out(cache);
    out << "garbage\n"
        << key << " no-such-backend\n"
        << "5 5 x 8 3 4 single " << conv::machine_key() << " cpu-fftw\n"
        << "5 5 8 8 3 4 quadruple " << conv::machine_key() << " cpu-fftw\n"
        << "5 5 8 8 3 4 single\n"
        << "\n"
        << key << " cpu-direct\n"
        << "4 4 8 8 3 4 single " << conv::machine_key() << " cpu-fftw\n"  // even N is no geometry
        << "5 5 8 8 3 4 K1P1Q1:0.0.0,x single " << conv::machine_key() << " cpu-fftw\n"          // bad term
        << "5 5 8 8 3 4 K2P1Q1:0.0.0,0.0.1 single " << conv::machine_key() << " cpu-fftw\n"      // repeated pair
        << "5 5 8 8 3 4 K1P2Q1:0.0.0 single " << conv::machine_key() << " cpu-fftw\n"            // output 1 has no term
        << "5 5 8 8 3 4 P1Q1:0.0.0 single " << conv::machine_key() << " cpu-fftw\n";             // no K
  }
  CaptureStderr captured;
  CHECK(conv::select_backend(g, Precision::single, cache) == conv::Backend::cpu_direct);
  const std::string warnings = captured.text.str();
  INFO(warnings);
  for (int corrupt : {1, 2, 3, 4, 5, 8, 9, 10, 11, 12})
    CHECK(warnings.find("ignoring line " + std::to_string(corrupt) + " ") != std::string::npos);
  for (int fine : {6, 7}) CHECK(warnings.find("ignoring line " + std::to_string(fine) + " ") == std::string::npos);
}

TEST_CASE("pattern signatures: compact, blank-free, independent of the order of the terms", "[autotune][pattern]") {
  CHECK(conv::pattern_signature(conv::Problem{}) == "K1P1Q1:0.0.0");
  CHECK(conv::pattern_signature(test::with_pattern({}, test::normal_vector_1d_pattern())) == "K3P4Q3:0.0.1,1.1.0,2.2.0,3.0.2");
  const conv::Problem nv = test::with_pattern({}, test::normal_vector_pattern());
  CHECK(conv::pattern_signature(nv) == "K7P5Q3:0.0.1,0.1.2,1.0.2,1.1.3,2.2.0,3.0.4,3.1.5,4.0.5,4.1.6");
  conv::Problem reversed = nv;
  std::reverse(reversed.pattern.begin(), reversed.pattern.end());
  CHECK(conv::pattern_signature(reversed) == conv::pattern_signature(nv));
  conv::Problem other_kernel = nv;
  other_kernel.pattern[0].kernel = 3;
  CHECK(conv::pattern_signature(other_kernel) != conv::pattern_signature(nv));
}

TEST_CASE("the cache key includes the pattern, version 1 lines are scalar problems", "[autotune][pattern]") {
  TempDir dir;
  const fs::path cache = dir.path / "backends.txt";
  // Far above what autotune times cpu-direct for (see "a cache hit ..."), so cpu-direct can only come
  // from the cache.
  const conv::Problem scalar{.n1 = 63, .n2 = 63, .slices = 2, .per_slice = 50};
  const conv::Problem nv = test::with_pattern({.n1 = 63, .n2 = 63, .slices = 2, .per_slice = 50},
                                              test::normal_vector_pattern());
  conv::Problem nv_reordered = nv;
  std::reverse(nv_reordered.pattern.begin(), nv_reordered.pattern.end());
  { std::ofstream(cache) << version1_key_of(scalar, Precision::double_) << " cpu-direct\n"; }
  std::string note = "stale";
  CHECK(conv::select_backend(scalar, Precision::double_, cache, &note) == conv::Backend::cpu_direct);
  CHECK(note.empty());
  CHECK(cache_entries(cache).size() == 1);  // a hit: nothing measured, nothing written

  // The same sizes with a pattern are another key: written as a version 2 line after the version 1 one.
  { std::ofstream(cache, std::ios::app) << key_of(nv, Precision::double_) << " cpu-direct\n"; }
  CHECK(conv::select_backend(nv, Precision::double_, cache) == conv::Backend::cpu_direct);
  CHECK(conv::select_backend(nv_reordered, Precision::double_, cache) == conv::Backend::cpu_direct);
  CHECK(cache_entries(cache).size() == 2);

  // A pattern the cache does not hold is measured (cpu-direct is never timed this large) and appended.
  const conv::Problem one_d = test::with_pattern({.n1 = 63, .n2 = 63, .slices = 2, .per_slice = 50},
                                                 test::normal_vector_1d_pattern());
  const conv::Backend chosen = conv::select_backend(one_d, Precision::double_, cache);
  CHECK(chosen != conv::Backend::cpu_direct);
  const auto lines = cache_entries(cache);
  REQUIRE(lines.size() == 3);
  CHECK(lines[2] == key_of(one_d, Precision::double_) + ' ' + std::string(conv::to_string(chosen)));
}

TEST_CASE("auto on a small pattern problem measures the backends that accept it", "[autotune][pattern]") {
  TempDir dir;
  const fs::path cache = dir.path / "backends.txt";
  const conv::Problem g = test::with_pattern({.n1 = 5, .n2 = 3, .slices = 2, .per_slice = 3}, test::random_pattern());
  const conv::Backend chosen = conv::select_backend(g, Precision::single, cache);
  CHECK(conv::traits(chosen).can_implement(conv::resolve(g), Precision::single).ok);
  const auto lines = cache_entries(cache);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == key_of(g, Precision::single) + ' ' + std::string(conv::to_string(chosen)));
}

namespace {
// A fake backend table for the fallback: gpu-fused refuses L > 128 (as the real one does), gpu-direct
// refuses everything, the rest accept.
conv::Support accept(const conv::Problem&, Precision) { return {}; }
conv::Support fused_like(const conv::Problem& g, Precision) {
  if (g.l1 > 128 || g.l2 > 128) return {false, "needs FFT lengths up to 128"};
  return {};
}
conv::Support refuse(const conv::Problem&, Precision) { return {false, "serves N1*N2 <= 961"}; }
std::size_t no_bytes(const conv::Problem&, Precision) { return 0; }

constexpr conv::BackendTraits fake_table[] = {
    {conv::Backend::cpu_direct, "cpu-direct", Memory::host, accept, no_bytes},
    {conv::Backend::cpu_fftw, "cpu-fftw", Memory::host, accept, no_bytes},
    {conv::Backend::gpu_cufft, "gpu-cufft", Memory::device, accept, no_bytes},
    {conv::Backend::gpu_fused, "gpu-fused", Memory::device, fused_like, no_bytes},
    {conv::Backend::gpu_direct, "gpu-direct", Memory::device, refuse, no_bytes},
};

/// Fake timings (µs): gpu-fused fastest, then gpu-cufft, cpu-fftw; cpu-direct never timed. Records
/// which backends were timed.
struct FakeTimer {
  std::vector<conv::Backend> timed;
  conv::detail::BackendTimer timer() {
    return [this](conv::Backend b) -> std::optional<double> {
      timed.push_back(b);
      switch (b) {
        case conv::Backend::gpu_fused: return 1.0;
        case conv::Backend::gpu_cufft: return 10.0;
        case conv::Backend::cpu_fftw: return 100.0;
        default: return std::nullopt;
      }
    };
  }
  [[nodiscard]] bool was_timed(conv::Backend b) const { return std::find(timed.begin(), timed.end(), b) != timed.end(); }
};
}  // namespace

TEST_CASE("auto falls back to another GPU backend where the fastest cannot serve, and says so", "[autotune]") {
  TempDir dir;
  const fs::path cache = dir.path / "backends.txt";
  const conv::Problem large = test::with_pattern({.n1 = 127, .n2 = 127, .slices = 1, .per_slice = 3},
                                                 test::normal_vector_pattern());  // L = 256
  FakeTimer fake;
  std::string note;
  CHECK(conv::detail::select_backend(large, Precision::single, cache, fake_table, fake.timer(), &note) ==
        conv::Backend::gpu_cufft);
  INFO(note);
  CHECK_FALSE(fake.was_timed(conv::Backend::gpu_fused));  // only backends that accept the problem are measured
  CHECK_FALSE(fake.was_timed(conv::Backend::gpu_direct));
  CHECK(fake.was_timed(conv::Backend::cpu_fftw));
  CHECK_THAT(note, Catch::Contains("gpu-fused cannot serve"));
  CHECK_THAT(note, Catch::Contains("needs FFT lengths up to 128"));
  CHECK_THAT(note, Catch::Contains("using gpu-cufft"));
  REQUIRE(cache_entries(cache).size() == 1);
  CHECK(cache_entries(cache)[0] == key_of(large, Precision::single) + " gpu-cufft");

  // Where it can serve (L = 128) the fastest wins, and there is nothing to say: gpu-direct's refusal
  // is no fallback (it ranks below gpu-fused by design).
  const conv::Problem case4 = test::with_pattern({.n1 = 63, .n2 = 63, .slices = 1, .per_slice = 3},
                                                 test::normal_vector_pattern());
  CHECK(conv::detail::select_backend(case4, Precision::single, cache, fake_table, FakeTimer{}.timer(), &note) ==
        conv::Backend::gpu_fused);
  CHECK(note.empty());

  // A cached choice that cannot serve the problem here is measured again, and the note says so.
  const conv::Problem other = test::with_pattern({.n1 = 129, .n2 = 1, .slices = 2, .per_slice = 3},
                                                 test::normal_vector_1d_pattern());  // L1 = 256
  { std::ofstream(cache, std::ios::app) << key_of(other, Precision::double_) << " gpu-fused\n"; }
  CHECK(conv::detail::select_backend(other, Precision::double_, cache, fake_table, FakeTimer{}.timer(), &note) ==
        conv::Backend::gpu_cufft);
  CHECK_THAT(note, Catch::Contains("cached choice gpu-fused cannot serve"));
  CHECK(cache_entries(cache).back() == key_of(other, Precision::double_) + " gpu-cufft");
}

TEST_CASE("auto never fails while a backend can serve the problem", "[autotune]") {
  TempDir dir;
  const fs::path cache = dir.path / "backends.txt";
  const conv::Problem g{.n1 = 7, .n2 = 7, .slices = 2, .per_slice = 3};
  const conv::detail::BackendTimer untimeable = [](conv::Backend) { return std::optional<double>{}; };
  std::string note;
  CHECK(conv::detail::select_backend(g, Precision::single, cache, fake_table, untimeable, &note) ==
        conv::Backend::cpu_direct);  // the first in the table that accepts
  CHECK_THAT(note, Catch::Contains("no backend could be timed"));

  // Only when every backend refuses: Unsupported, naming the problem.
  constexpr conv::BackendTraits nothing_serves[] = {
      {conv::Backend::cpu_direct, "cpu-direct", Memory::host, refuse, no_bytes},
      {conv::Backend::gpu_cufft, "gpu-cufft", Memory::device, fused_like, no_bytes},
  };
  const conv::Problem large{.n1 = 127, .n2 = 127};
  CHECK_THROWS_AS(conv::detail::select_backend(large, Precision::single, cache, nothing_serves, untimeable, &note),
                  Unsupported);
}

TEST_CASE("a cached GPU choice on a machine that cannot run it: measured again, with a note", "[autotune]") {
  if (conv::backend_available(conv::Backend::gpu_fused)) return;  // only meaningful without a device
  TempDir dir;
  const fs::path cache = dir.path / "backends.txt";
  const conv::Problem g{.n1 = 5, .n2 = 5, .slices = 2, .per_slice = 3};
  { std::ofstream(cache) << key_of(g, Precision::single) << " gpu-fused\n"; }
  std::string note;
  const conv::Backend chosen = conv::select_backend(g, Precision::single, cache, &note);
  CHECK(conv::memory_of(chosen) == Memory::host);
  CHECK_THAT(note, Catch::Contains("cached choice gpu-fused cannot serve"));
  CHECK(cache_entries(cache).back() == key_of(g, Precision::single) + ' ' + std::string(conv::to_string(chosen)));
}

TEST_CASE("a cache in a directory that cannot be created costs a warning, not the choice", "[autotune]") {
  TempDir dir;
  const fs::path blocker = dir.path / "file";
  std::ofstream(blocker) << "not a directory\n";
  CaptureStderr captured;
  const conv::Backend chosen =
      conv::select_backend({.n1 = 3, .n2 = 3, .slices = 2, .per_slice = 2}, Precision::single, blocker / "backends.txt");
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

