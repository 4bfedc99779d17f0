#include "convolution/autotune.hpp"

#include <unistd.h>

#include <algorithm>
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
#include "core/error.hpp"
#include "core/atomic_file.hpp"
#include "convolution/timing.hpp"

namespace gratingsim::conv {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view cache_header =
    "# gratingsim backend cache v2: n1 n2 l1 l2 slices per_slice pattern precision machine backend\n";

/// cpu-direct is timed only below this many complex multiply-adds per execution (terms·groups·N1²·N2²):
/// above it, it is never the fastest and measuring it would take seconds.
constexpr double direct_measure_limit = 1e8;

/// Short: the choice needs a ranking, not a benchmark; stream time, the way the solver executes.
const TimingOptions autotune_timing{.warmup_ms = 20, .min_warmup = 2, .repeats = 7, .graph = false};

struct CacheKey {
  Problem geometry;       // resolved
  std::string signature;  // pattern_signature(geometry): the pattern part of the key
  Precision precision;
  std::string machine;

  [[nodiscard]] bool operator==(const CacheKey& o) const {
    const Problem &a = geometry, &b = o.geometry;
    return a.n1 == b.n1 && a.n2 == b.n2 && a.l1 == b.l1 && a.l2 == b.l2 && a.slices == b.slices &&
           a.per_slice == b.per_slice && signature == o.signature && precision == o.precision &&
           machine == o.machine;
  }
};

std::string format_line(const CacheKey& key, Backend backend) {
  const Problem& g = key.geometry;
  std::ostringstream os;
  os << g.n1 << ' ' << g.n2 << ' ' << g.l1 << ' ' << g.l2 << ' ' << g.slices << ' ' << g.per_slice << ' '
     << key.signature << ' ' << to_string(key.precision) << ' ' << key.machine << ' ' << to_string(backend) << '\n';
  return os.str();
}

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

/// Sets g's K, P, Q and pattern from a pattern_signature() field; false when it does not parse (the
/// pattern itself is checked by resolve()).
bool parse_signature(std::string_view text, Problem& g) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view counts = text.substr(0, colon);
  const auto p = counts.find('P'), q = counts.find('Q');
  if (!counts.starts_with('K') || p == std::string_view::npos || q == std::string_view::npos || q < p) return false;
  const auto k_count = parse_int(counts.substr(1, p - 1)), p_count = parse_int(counts.substr(p + 1, q - p - 1)),
             q_count = parse_int(counts.substr(q + 1));
  if (!k_count || !p_count || !q_count) return false;
  g.kernels = *k_count;
  g.outputs = *p_count;
  g.inputs = *q_count;
  g.pattern.clear();
  std::string_view terms = text.substr(colon + 1);
  while (!terms.empty()) {
    const std::string_view term = terms.substr(0, terms.find(','));
    terms.remove_prefix(std::min(terms.size(), term.size() + 1));
    const auto dot1 = term.find('.'), dot2 = term.rfind('.');
    if (dot1 == std::string_view::npos || dot2 == dot1) return false;
    const auto o = parse_int(term.substr(0, dot1)), i = parse_int(term.substr(dot1 + 1, dot2 - dot1 - 1)),
               k = parse_int(term.substr(dot2 + 1));
    if (!o || !i || !k) return false;
    g.pattern.push_back({*o, *i, *k});
  }
  return true;
}

/// One cache line as (key, backend); nullopt when it does not parse. Ten fields: version 2; nine:
/// version 1, a scalar problem.
std::optional<std::pair<CacheKey, Backend>> parse_line(const std::string& line) {
  std::istringstream is(line);
  std::vector<std::string> f;
  for (std::string field; is >> field;) f.push_back(field);
  if (f.size() == 9) f.insert(f.begin() + 6, pattern_signature(Problem{}));  // version 1: scalar
  if (f.size() != 10) return std::nullopt;
  int v[6];
  for (int i = 0; i < 6; ++i) {
    const auto parsed = parse_int(f[std::size_t(i)]);
    if (!parsed) return std::nullopt;
    v[i] = *parsed;
  }
  Problem g{.n1 = v[0], .n2 = v[1], .l1 = v[2], .l2 = v[3], .slices = v[4], .per_slice = v[5]};
  if (!parse_signature(f[6], g)) return std::nullopt;
  try {
    g = resolve(g);
    if (g.l1 != v[2] || g.l2 != v[3]) return std::nullopt;  // a 0 never gets written
    CacheKey key{g, pattern_signature(g), parse_precision(f[7]), f[8]};
    return std::pair{key, parse_backend(f[9])};
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
                << " (expected 'n1 n2 l1 l2 slices per_slice pattern precision machine backend'): " << line << '\n';
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

  try {
    write_file_atomically(file, content);
  } catch (const FileError& e) {
    std::cerr << "gratingsim: warning: " << e.what() << "; backend choice not remembered\n";
  }
}

/// Median time of one backend on random data; nullopt when it cannot plan the problem here or is
/// cpu-direct above direct_measure_limit.
template <class Real>
std::optional<double> measure(Backend backend, const Problem& g, std::uint64_t seed) {
  const double direct_work = double(g.pattern.size()) * double(g.groups()) * double(g.field_size()) * double(g.field_size());
  if (backend == Backend::cpu_direct && direct_work > direct_measure_limit) return std::nullopt;
  const auto kernels = random_complex<Real>(g.kernels_total(), seed);
  std::unique_ptr<Convolution<Real>> plan;
  try {
    plan = make_convolution<Real>(backend, g, kernels);
  } catch (const Unsupported&) {
    return std::nullopt;
  }
  // One buffer size for inputs and outputs (BufferSets): the larger of the two; the plan reads the
  // first input_size() elements of each input and writes the first output_size() of each output.
  const std::size_t elements = std::max(g.input_size(), g.output_size());
  const auto wide = random_complex<Real>(elements, seed + 1);
  const std::vector<std::complex<Real>> in(wide.begin(), wide.end());
  BufferSets<Real> buffers(plan->memory(), elements,
                           rotation_count(plan->memory(), 2 * elements * sizeof(std::complex<Real>)));
  buffers.fill_inputs(in);
  return time_execute(*plan, buffers, autotune_timing).stream.median();
}

/// Where a backend stands among those of its memory kind by design (lower: the one expected to be
/// faster where it can serve): gpu-fused, gpu-cufft-callbacks, gpu-cufft, gpu-direct; cpu-fftw, cpu-direct.
/// A refusal is worth a note only from a backend ranked above the choice: the choice is then a fallback.
int design_rank(Backend backend) {
  switch (backend) {
    case Backend::gpu_fused: return 0;
    case Backend::gpu_cufft_callbacks: return 1;
    case Backend::gpu_cufft: return 2;
    case Backend::gpu_direct: return 3;
    case Backend::cpu_fftw: return 0;
    case Backend::cpu_direct: return 1;
  }
  return 0;
}

/// Appends `sentence` to `note`, separated by a blank.
void add_note(std::string& note, const std::string& sentence) {
  if (!note.empty()) note += ' ';
  note += sentence;
}

/// The fastest backend of `table` that accepts the problem, and the note select_backend documents.
Backend measure_fastest(const Problem& g, Precision precision, std::span<const BackendTraits> table,
                        const detail::BackendTimer& time, std::string& note) {
  std::vector<std::pair<const BackendTraits*, std::string>> refused;
  std::optional<Backend> best, first_accepting;
  double best_us = std::numeric_limits<double>::infinity();
  for (const BackendTraits& t : table) {
    const Support support = t.can_implement(g, precision);
    if (!support.ok) {
      refused.emplace_back(&t, support.reason);
      continue;
    }
    if (!first_accepting) first_accepting = t.backend;
    if (const auto us = time(t.backend); us && *us < best_us) {
      best = t.backend;
      best_us = *us;
    }
  }
  const std::string shape = "N " + std::to_string(g.n1) + "x" + std::to_string(g.n2) + ", L " + std::to_string(g.l1) +
                            "x" + std::to_string(g.l2) + ", " + std::to_string(g.groups()) + " groups, " +
                            pattern_signature(g);
  GS_SUPPORTS(first_accepting.has_value(), "no backend can serve this problem (" + shape + ")");
  if (!best) {
    best = first_accepting;
    add_note(note, "auto: no backend could be timed for " + shape + "; using " + std::string(to_string(*best)) +
                       ", which can serve it.");
  }
  for (const auto& [t, reason] : refused)
    if (t->memory == memory_of(*best) && design_rank(t->backend) < design_rank(*best))
      add_note(note, "auto: " + std::string(t->name) + " cannot serve " + shape + " (" + reason + "); using " +
                         std::string(to_string(*best)) + ".");
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

std::string pattern_signature(const Problem& g) {
  std::vector<Term> terms = g.pattern;
  std::sort(terms.begin(), terms.end(), [](const Term& a, const Term& b) {
    return a.output != b.output ? a.output < b.output : a.input < b.input;
  });
  std::string s = "K" + std::to_string(g.kernels) + "P" + std::to_string(g.outputs) + "Q" + std::to_string(g.inputs) + ":";
  for (std::size_t i = 0; i < terms.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(terms[i].output);
    s += '.';
    s += std::to_string(terms[i].input);
    s += '.';
    s += std::to_string(terms[i].kernel);
  }
  return s;
}

namespace detail {
Backend select_backend(const Problem& geometry, Precision precision, const fs::path& cache_file,
                       std::span<const BackendTraits> table, const BackendTimer& time, std::string* note) {
  const Problem g = resolve(geometry);
  const CacheKey key{g, pattern_signature(g), precision, machine_key()};
  std::string said;
  if (const auto cached = look_up(cache_file, key)) {
    const auto entry = std::find_if(table.begin(), table.end(), [&](const BackendTraits& t) { return t.backend == *cached; });
    const Support support = entry == table.end() ? Support{false, "not in the table"} : entry->can_implement(g, precision);
    if (support.ok) {
      if (note) note->clear();
      return *cached;
    }
    add_note(said, "auto: the cached choice " + std::string(to_string(*cached)) + " cannot serve this problem here (" +
                       support.reason + "); measured again.");
  }
  const Backend best = measure_fastest(g, precision, table, time, said);
  append(cache_file, format_line(key, best));
  if (note) *note = said;
  return best;
}
}  // namespace detail

Backend select_backend(const Problem& geometry, Precision precision, const fs::path& cache_file, std::string* note) {
  const Problem g = resolve(geometry);
  const std::uint64_t seed = std::random_device{}();
  const detail::BackendTimer time = [&](Backend b) {
    return precision == Precision::single ? measure<float>(b, g, seed) : measure<double>(b, g, seed);
  };
  return detail::select_backend(g, precision, cache_file, backend_table(), time, note);
}

Backend backend_by_name(std::string_view name, const Problem& geometry, Precision precision, std::string* note) {
  if (note) note->clear();
  if (name == "auto") return select_backend(geometry, precision, default_backend_cache(), note);
  return parse_backend(name);
}

}  // namespace gratingsim::conv
