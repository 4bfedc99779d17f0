// Device work goes on explicit streams (the code rules' "explicit CUDA streams"): the library's kernels run on
// non-blocking streams, which do not follow the legacy default stream, so a cudaMemcpy, cudaMemset or stream-less
// launch there is not ordered before the kernels that read what it writes. cudaMemcpy from pageable memory may
// even return before its copy has landed. Such a copy in the device BiCGStab's set-up (its per-rhs state) landed
// after the first kernels when other threads kept the device busy: solves ended after 0 iterations with their
// initial guess as the result (a 33-wavelength sweep on an H200, 12 of 66 solves). This test reads the library's
// sources and refuses those calls, but where a file waits for the whole device after them (listed below, with why).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.hpp"  // GRATINGSIM_SOURCE_DIR
#include "validation/support/catch.hpp"
#include "validation/support/text_file.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path root = GRATINGSIM_SOURCE_DIR;

/// The library's C++ and CUDA sources (the folders a build compiles into the library and the executable).
std::vector<fs::path> library_sources() {
  static const std::set<std::string> extensions = {".cpp", ".hpp", ".cu", ".cuh", ".h"};
  std::vector<fs::path> files;
  for (const char* folder : {"core", "convolution", "physics", "io", "app", "fitting", "python"}) {
    if (!fs::exists(root / folder)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / folder))
      if (entry.is_regular_file() && extensions.count(entry.path().extension().string()) != 0)
        files.push_back(entry.path());
  }
  return files;
}

/// Uses of the legacy default stream in `text`, as "line: text" (comments left out).
std::vector<std::string> legacy_stream_uses(const std::string& text) {
  // Synchronous copies and sets, and launches with fewer than four configuration arguments (no stream).
  // (cudaMemcpyFromSymbol is not among them: it reads a link-time constant, which no stream writes, into host
  // memory, and returns when that has landed.)
  static const std::regex call(R"(\b(cudaMemcpy|cudaMemset|cudaMemcpy2D|cudaMemcpyToSymbol)\s*\()");
  static const std::regex launch(R"(<<<([^<>]*)>>>)");
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string code = line.substr(0, line.find("//"));
    std::smatch m;
    bool found = std::regex_search(code, call);
    if (std::regex_search(code, m, launch)) {
      const std::string args = m[1].str();
      found = found || std::count(args.begin(), args.end(), ',') < 3;
    }
    if (found) out.push_back(std::to_string(number) + ": " + line);
  }
  return out;
}

}  // namespace

TEST_CASE("the library enqueues device work on explicit streams, never on the legacy default stream", "[docs]") {
  // Files allowed to, each because it waits for the whole device (cudaDeviceSynchronize) after every such call.
  const std::set<std::string> allowed = {
      "convolution/timing.cpp",  // the bench's buffers: poisoned and filled at set-up, read back after a wait
  };
  const std::vector<fs::path> files = library_sources();
  REQUIRE(files.size() > 50);  // the tree was found
  int seen_allowed = 0;
  for (const fs::path& file : files) {
    const std::string name = fs::relative(file, root).generic_string();
    const std::string text = gratingsim::test::read_text(file);
    const std::vector<std::string> uses = legacy_stream_uses(text);
    if (allowed.count(name) != 0) {
      ++seen_allowed;
      INFO(name << " is allowed legacy-stream calls only where the device is waited for");
      CHECK(text.find("cudaDeviceSynchronize") != std::string::npos);
      continue;
    }
    for (const std::string& use : uses) {
      INFO(name << ":" << use);
      CHECK(false);
    }
  }
  CHECK(seen_allowed == int(allowed.size()));  // the list names files that exist
}

TEST_CASE("the legacy-stream scan finds synchronous copies and stream-less launches", "[docs]") {
  // The scan itself, on lines written here: each kind it must find, and the forms it must let pass.
  CHECK(legacy_stream_uses("  GS_CUDA_TRY(cudaMemcpy(a, b, n, cudaMemcpyHostToDevice));").size() == 1);
  CHECK(legacy_stream_uses("cudaMemset (p, 0, n);").size() == 1);
  CHECK(legacy_stream_uses("kernel<<<grid, threads>>>(x);").size() == 1);
  CHECK(legacy_stream_uses("kernel<<<grid, threads, shared>>>(x);").size() == 1);
  CHECK(legacy_stream_uses("kernel<<<grid, threads, shared, stream>>>(x);").empty());
  CHECK(legacy_stream_uses("cudaMemcpyAsync(a, b, n, kind, stream);").empty());
  CHECK(legacy_stream_uses("cudaMemsetAsync(p, 0, n, stream);").empty());
  CHECK(legacy_stream_uses("x = 1;  // a cudaMemcpy( in a comment").empty());
  CHECK(legacy_stream_uses("a\nb\n  cudaMemcpy(a, b, n, k);\n").front().rfind("3: ", 0) == 0);  // its line number
}
