#include "convolution/autotune.hpp"

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "convolution/devices.hpp"
#include "convolution/error.hpp"
#include "convolution/timing.hpp"

namespace gratingsim::conv {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view cache_header = "# gratingsim backend cache: n1 n2 l1 l2 slices per_slice precision machine backend\n";

/// cpu-direct is timed only below this many complex multiply-adds per execution (batch·N1²·N2²):
/// above it, it is never the fastest and measuring it would take seconds.
constexpr double direct_measure_limit = 1e8;

const TimingOptions autotune_timing{.warmup = 2, .repeats = 7};

struct CacheKey {
  Problem geometry;  // resolved
  Precision precision;
  std::string machine;

  [[nodiscard]] bool operator==(const CacheKey& o) const {
    const Problem &a = geometry, &b = o.geometry;
    return a.n1 == b.n1 && a.n2 == b.n2 && a.l1 == b.l1 && a.l2 == b.l2 && a.slices == b.slices &&
           a.per_slice == b.per_slice && precision == o.precision && machine == o.machine;
  }
};

std::string format_line(const CacheKey& key, Backend backend) {
  const Problem& g = key.geometry;
  std::ostringstream os;
  os << g.n1 << ' ' << g.n2 << ' ' << g.l1 << ' ' << g.l2 << ' ' << g.slices << ' ' << g.per_slice << ' '
     << to_string(key.precision) << ' ' << key.machine << ' ' << to_string(backend) << '\n';
  return os.str();
}

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

/// One cache line as (key, backend); nullopt when it does not parse.
std::optional<std::pair<CacheKey, Backend>> parse_line(const std::string& line) {
  std::istringstream is(line);
  std::vector<std::string> f;
  for (std::string field; is >> field;) f.push_back(field);
  if (f.size() != 9) return std::nullopt;
  int v[6];
  for (int i = 0; i < 6; ++i) {
    const auto parsed = parse_int(f[std::size_t(i)]);
    if (!parsed) return std::nullopt;
    v[i] = *parsed;
  }
  try {
    CacheKey key{resolve({.n1 = v[0], .n2 = v[1], .l1 = v[2], .l2 = v[3], .slices = v[4], .per_slice = v[5]}),
                 parse_precision(f[6]), f[7]};
    if (key.geometry.l1 != v[2] || key.geometry.l2 != v[3]) return std::nullopt;  // a 0 never gets written
    return std::pair{key, parse_backend(f[8])};
  } catch (const InvalidArgument&) {
    return std::nullopt;
  }
}

/// The last cached choice for `key`; corrupt lines are reported on stderr and skipped. A missing or
/// unreadable file is an empty cache.
std::optional<Backend> look_up(const fs::path& file, const CacheKey& key) {
  std::ifstream in(file);
  std::optional<Backend> found;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto entry = parse_line(line);
    if (!entry) {
      std::cerr << "gratingsim: warning: ignoring line " << number << " of backend cache " << file
                << " (expected 'n1 n2 l1 l2 slices per_slice precision machine backend'): " << line << '\n';
      continue;
    }
    if (entry->first == key) found = entry->second;
  }
  return found;
}

/// Appends `line` by rewriting the file through a temporary in the same directory and a rename.
void append(const fs::path& file, const std::string& line) {
  std::string content;
  if (std::ifstream in(file, std::ios::binary); in) {
    content.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!content.empty() && content.back() != '\n') content += '\n';
  } else {
    content = cache_header;
  }
  content += line;

  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  fs::path temporary = file;
  temporary += ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) {
      std::cerr << "gratingsim: warning: cannot write backend cache " << temporary << "; choice not remembered\n";
      fs::remove(temporary, ec);
      return;
    }
  }
  fs::rename(temporary, file, ec);
  if (ec) {
    std::cerr << "gratingsim: warning: cannot replace backend cache " << file << ": " << ec.message()
              << "; choice not remembered\n";
    fs::remove(temporary, ec);
  }
}

/// Median time of one backend on random data; nullopt when it cannot plan the shape here.
template <class Real>
std::optional<double> measure(Backend backend, const Problem& g, std::uint64_t seed) {
  if (!backend_available(backend)) return std::nullopt;
  if (backend == Backend::cpu_direct &&
      double(g.input_blocks()) * double(g.field_size()) * double(g.field_size()) > direct_measure_limit)
    return std::nullopt;
  const auto kernels = random_complex<Real>(g.kernels_total(), seed);
  std::unique_ptr<Convolution<Real>> plan;
  try {
    plan = make_convolution<Real>(backend, g, kernels);
  } catch (const Unsupported&) {
    return std::nullopt;
  }
  const auto wide = random_complex<Real>(g.input_size(), seed + 1);
  const std::vector<std::complex<Real>> in(wide.begin(), wide.end());
  BufferSets<Real> buffers(plan->memory(), in.size(),
                           rotation_count(plan->memory(), 2 * in.size() * sizeof(std::complex<Real>)));
  buffers.fill_inputs(in);
  return time_execute(*plan, buffers, autotune_timing).median_us();
}

template <class Real>
Backend measure_fastest(const Problem& g) {
  const std::uint64_t seed = std::random_device{}();
  std::optional<Backend> best;
  double best_us = std::numeric_limits<double>::infinity();
  for (Backend b : all_backends)
    if (const auto us = measure<Real>(b, g, seed); us && *us < best_us) {
      best = b;
      best_us = *us;
    }
  SUPPORTS(best.has_value(), "no backend could be measured for this shape (N " + std::to_string(g.n1) + "x" +
                                 std::to_string(g.n2) + ", batch " + std::to_string(g.input_blocks()) + ")");
  return *best;
}

std::string without_blanks(std::string s) {
  for (char& c : s)
    if (c == ' ' || c == '\t') c = '_';
  return s;
}
}  // namespace

fs::path default_backend_cache() {
  const auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (auto file = env("GRATINGSIM_BACKEND_CACHE"); !file.empty()) return file;
  if (auto xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return fs::path(xdg) / "gratingsim" / "backends.txt";
  if (auto home = env("HOME"); !home.empty()) return fs::path(home) / ".cache" / "gratingsim" / "backends.txt";
  return "gratingsim-backends.txt";
}

std::string machine_key() {
  const auto device = current_cuda_device();
  const HostCpu cpu = host_cpu();
  return without_blanks((device ? device->name : "no-gpu") + '|' + cpu.model + '|' + std::to_string(cpu.threads) +
                        't');
}

Backend select_backend(const Problem& geometry, Precision precision, const fs::path& cache_file) {
  const CacheKey key{resolve(geometry), precision, machine_key()};
  if (const auto cached = look_up(cache_file, key)) {
    if (backend_available(*cached)) return *cached;
    std::cerr << "gratingsim: warning: cached backend " << to_string(*cached)
              << " is not available here; measuring again\n";
  }
  const Backend best = precision == Precision::single ? measure_fastest<float>(key.geometry)
                                                      : measure_fastest<double>(key.geometry);
  append(cache_file, format_line(key, best));
  return best;
}

Backend backend_by_name(std::string_view name, const Problem& geometry, Precision precision) {
  if (name == "auto") return select_backend(geometry, precision, default_backend_cache());
  return parse_backend(name);
}

}  // namespace gratingsim::conv
