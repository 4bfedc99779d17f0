// gratingsim bench conv: every backend on the four problem cases of ../shared/design/convolution.md
// (Table 1), as the scalar problem (Laurent's rule) and/or with the 2D normal-vector pattern, timed with
// the timing utility, each timed output verified against a complex128 reference on the same inputs,
// reported against the memory floor and against gpu-cufft.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "app/commands.hpp"
#include "convolution/autotune.hpp"
#include "convolution/convolution.hpp"
#include "convolution/cpu_fftw.hpp"
#include "convolution/devices.hpp"
#include "convolution/timing.hpp"
#include "physics/normal_field.hpp"

namespace gratingsim::app {
namespace {

using conv::Backend;
using conv::Problem;
using conv::Precision;

/// Table 1: 8 angles × 3 field components = 24 convolutions share each slice's spectrum; the batch is
/// the table's (99, 195, 387, 771 convolutions per angle) × 8, i.e. 33, 65, 129, 257 slices.
struct ProblemCase {
  int number;
  Problem geometry;
};
const ProblemCase problem_cases[] = {
    {1, {.n1 = 7, .n2 = 7, .l1 = 16, .l2 = 16, .slices = 33, .per_slice = 24}},
    {2, {.n1 = 15, .n2 = 15, .l1 = 32, .l2 = 32, .slices = 65, .per_slice = 24}},
    {3, {.n1 = 31, .n2 = 31, .l1 = 64, .l2 = 64, .slices = 129, .per_slice = 24}},
    {4, {.n1 = 63, .n2 = 63, .l1 = 128, .l2 = 128, .slices = 257, .per_slice = 24}},
};

/// The problem a case is run as: the scalar batch above, or the 2D normal-vector pattern (K = 7 kernels
/// per slice, Q = 3 inputs F_x, F_y, F_z and P = 5 outputs J_x, J_y, J_z, D_x, D_y per group; physics'
/// normal_field.hpp) with one group per right-hand side: 8 angles × 2 polarisations = 16 groups per
/// slice, as the solver sets up Table 1's 8 angles (per_slice = 2 · incidences).
enum class Shape { scalar, normal_vector };
constexpr int normal_vector_groups_per_slice = 16;

std::string_view name_of(Shape shape) { return shape == Shape::scalar ? "scalar" : "normal-vector"; }

Problem problem_of(const ProblemCase& c, Shape shape) {
  if (shape == Shape::scalar) return c.geometry;
  Problem g = physics::normal_vector_problem(false);
  g.n1 = c.geometry.n1;
  g.n2 = c.geometry.n2;
  g.l1 = c.geometry.l1;
  g.l2 = c.geometry.l2;
  g.slices = c.geometry.slices;
  g.per_slice = normal_vector_groups_per_slice;
  return g;
}

/// What a row measures: a backend, the unpruned FFTW pipeline, or the `auto` choice.
enum class Variant { gpu_cufft, gpu_fused, gpu_direct, cpu_fftw, cpu_fftw_unpruned, cpu_direct, automatic };
constexpr std::pair<Variant, std::string_view> variant_names[] = {
    {Variant::gpu_cufft, "gpu-cufft"},   {Variant::gpu_fused, "gpu-fused"},
    {Variant::gpu_direct, "gpu-direct"}, {Variant::cpu_fftw, "cpu-fftw"},
    {Variant::cpu_fftw_unpruned, "cpu-fftw-unpruned"}, {Variant::cpu_direct, "cpu-direct"},
    {Variant::automatic, "auto"},
};
constexpr Variant default_variants[] = {Variant::gpu_cufft, Variant::gpu_fused, Variant::gpu_direct, Variant::cpu_fftw,
                                        Variant::cpu_fftw_unpruned};
constexpr Variant all_variants[] = {Variant::gpu_cufft, Variant::gpu_fused,         Variant::gpu_direct,
                                    Variant::cpu_fftw,  Variant::cpu_fftw_unpruned, Variant::cpu_direct};

std::string_view name_of(Variant v) {
  for (auto [variant, name] : variant_names)
    if (variant == v) return name;
  return "?";
}

/// Complex multiply-adds of one cpu-direct execution, terms·groups·N1²·N2² (scalar: case 1 1.9e6,
/// case 2 7.9e7, case 3 2.9e9, case 4 9.7e10; the normal-vector pattern's 9 terms on 16 groups: 6×
/// that). The cpu-direct row declines cases above direct_limit.
double direct_multiply_adds(const Problem& g) {
  return double(g.pattern.size()) * double(g.groups()) * double(g.field_size()) * double(g.field_size());
}
constexpr double direct_limit = 1e9;

/// Verification tolerance: relative l2 error per field block against the complex128 reference.
constexpr double tolerance(Precision p) { return p == Precision::single ? 1e-4 : 1e-10; }

std::string fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}
std::string significant(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}
std::string scientific(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2e", v);
  return buffer;
}

struct Settings {
  std::vector<const ProblemCase*> cases;
  std::vector<Shape> shapes;
  std::vector<Variant> variants;
  std::vector<Precision> precisions;
  conv::TimingOptions timing;
  double bandwidth = 3.0e12;  ///< bytes per second for the memory floor
  std::uint64_t seed = 0;
  std::optional<std::string> csv;
};

enum class Status { verified, failed, unavailable };

struct Row {
  int case_number = 0;
  Shape shape = Shape::scalar;
  std::string backend;
  Precision precision = Precision::single;
  std::string device;
  Status status = Status::unavailable;
  std::string note;  ///< why unavailable or failed
  std::optional<conv::Timing> timing;
  double floor_us = 0;
  double max_rel_error = 0;
  std::optional<double> speedup_vs_cufft;
};

/// The fewest bytes the batch must move, s·[(Q + P)·N1·N2·groups + K·L1·L2·slices] (read inputs, write
/// outputs, read each spectrum once per slice; scalar: s·(2·N1·N2 + L1·L2/per_slice)·batch), at
/// `bandwidth` bytes/s; in µs.
double floor_us(const Problem& g, Precision p, double bandwidth) {
  const double s = p == Precision::single ? 8 : 16;
  const double fields = double(g.inputs + g.outputs) * double(g.field_size()) * double(g.groups());
  const double spectra = double(g.kernels) * g.l1 * g.l2 * double(g.slices);
  return 1e6 * s * (fields + spectra) / bandwidth;
}

/// Inputs of one case and precision: kernels and fields rounded to Real, the reference output in
/// complex128 computed once from exactly those values.
template <class Real>
struct CaseData {
  std::vector<std::complex<double>> kernels;
  std::vector<std::complex<Real>> in;
  std::vector<std::complex<double>> expect;  ///< empty when no reference could be computed
  std::string reference;                     ///< which backend computed it, or why none
};

/// The reference is cpu-direct (the defining sum, complex128 accumulation, independent of every FFT
/// backend) where it is cheap, cases 1 and 2; else cpu-fftw in complex128.
constexpr double direct_reference_limit = 1e8;

template <class Real>
CaseData<Real> make_case_data(const Problem& g, std::uint64_t seed) {
  CaseData<Real> d;
  d.kernels = conv::random_complex<Real>(g.kernels_total(), seed);
  const auto wide = conv::random_complex<Real>(g.input_size(), seed + 1);
  d.in.assign(wide.begin(), wide.end());
  std::unique_ptr<conv::Convolution<double>> reference;
  if (direct_multiply_adds(g) <= direct_reference_limit) {
    reference = conv::make_convolution<double>(Backend::cpu_direct, g, d.kernels);
    d.reference = "cpu-direct (double)";
  } else {
    try {
      reference = conv::make_convolution<double>(Backend::cpu_fftw, g, d.kernels);
      d.reference = "cpu-fftw (double)";
    } catch (const Unsupported& e) {
      d.reference = "none (cpu-fftw unavailable: " + user_message(e) + ")";
      return d;
    }
  }
  d.expect.assign(g.output_size(), {});
  reference->execute(wide.data(), d.expect.data());
  return d;
}

template <class Real>
std::unique_ptr<conv::Convolution<Real>> make_plan(Variant v, const Problem& g, const CaseData<Real>& d,
                                                   Backend& chosen) {
  switch (v) {
    case Variant::cpu_fftw_unpruned:
      chosen = Backend::cpu_fftw;
      return conv::make_fftw_convolution<Real>(g, d.kernels, {.prune_zero_rows = false, .planning = {}});
    case Variant::automatic:
      chosen = conv::select_backend(g, conv::precision_of<Real>(), conv::default_backend_cache());
      break;
    case Variant::cpu_direct:
      SUPPORTS(direct_multiply_adds(g) <= direct_limit,
               "cpu-direct declines this case: " + scientific(direct_multiply_adds(g)) +
                   " complex multiply-adds per execution (limit 1e9; it is O(N1^2 N2^2) per block)");
      chosen = Backend::cpu_direct;
      break;
    default: chosen = conv::parse_backend(name_of(v));
  }
  return conv::make_convolution<Real>(chosen, g, d.kernels);
}

template <class Real>
Row measure(Variant v, const ProblemCase& c, Shape shape, const CaseData<Real>& d, const Settings& s) {
  const Problem g = problem_of(c, shape);
  Row row;
  row.case_number = c.number;
  row.shape = shape;
  row.backend = std::string(name_of(v));
  row.precision = conv::precision_of<Real>();
  row.floor_us = floor_us(g, row.precision, s.bandwidth);

  std::unique_ptr<conv::Convolution<Real>> plan;
  Backend chosen{};
  try {
    plan = make_plan(v, g, d, chosen);
  } catch (const Unsupported& e) {
    row.note = user_message(e);
    return row;
  } catch (const Error& e) {
    row.status = Status::failed;
    row.note = user_message(e);
    return row;
  }
  if (v == Variant::automatic) (row.backend += '=') += conv::to_string(chosen);
  if (plan->memory() == conv::Memory::device) {
    const auto device = conv::current_cuda_device();
    row.device = device ? device->name : "CUDA device";
  } else {
    row.device = conv::describe(conv::host_cpu());
  }

  try {
    // One buffer size for inputs and outputs: the larger (a pattern's P outputs per group against its Q
    // inputs); the inputs beyond the plan's are never read.
    const std::size_t elements = std::max(g.input_size(), g.output_size());
    const std::size_t set_bytes = 2 * elements * sizeof(std::complex<Real>);
    conv::BufferSets<Real> buffers(plan->memory(), elements, conv::rotation_count(plan->memory(), set_bytes));
    std::vector<std::complex<Real>> padded(d.in);
    padded.resize(elements);
    buffers.fill_inputs(padded);
    row.timing = conv::time_execute(*plan, buffers, s.timing);

    if (d.expect.empty()) {
      row.status = Status::failed;
      row.note = "no reference: " + d.reference;
      return row;
    }
    // Every output written while timing, block by block against the reference.
    const int written = std::min(buffers.count(), s.timing.warmup + s.timing.repeats);
    const std::size_t n = g.field_size();
    std::vector<std::complex<Real>> out(elements);
    for (int set = 0; set < written; ++set) {
      buffers.read_output(set, out);
      for (std::size_t b = 0; b < g.output_blocks(); ++b) {
        double diff = 0, ref = 0;
        for (std::size_t i = b * n; i < (b + 1) * n; ++i) {
          diff += std::norm(std::complex<double>(out[i]) - d.expect[i]);
          ref += std::norm(d.expect[i]);
        }
        const double error = ref > 0 ? std::sqrt(diff / ref) : INFINITY;
        row.max_rel_error = std::isnan(error) ? INFINITY : std::max(row.max_rel_error, error);
      }
    }
    const bool ok = row.max_rel_error <= tolerance(row.precision);
    row.status = ok ? Status::verified : Status::failed;
    if (!ok) row.note = "output differs from the reference beyond " + scientific(tolerance(row.precision));
  } catch (const Unsupported& e) {
    row.status = Status::unavailable;
    row.note = user_message(e);
  } catch (const Error& e) {  // a CUDA failure in one backend: reported, the others still run
    row.status = Status::failed;
    row.note = user_message(e);
  }
  return row;
}

std::string_view status_name(Status s) {
  switch (s) {
    case Status::verified: return "yes";
    case Status::failed: return "FAILED";
    default: return "unavailable";
  }
}

void print_header_row() {
  std::printf("  %-24s %-9s %11s %11s %11s %9s %9s %10s %-9s %s\n", "backend", "precision", "median_us", "min_us",
              "max_us", "x_floor", "vs_cufft", "max_error", "verified", "device");
}

void print_row(const Row& r) {
  if (!r.timing) {
    std::printf("  %-24s %-9s %s: %s\n", r.backend.c_str(), std::string(conv::to_string(r.precision)).c_str(),
                std::string(status_name(r.status)).c_str(), r.note.c_str());
    return;
  }
  const conv::Timing& t = *r.timing;
  std::printf("  %-24s %-9s %11.2f %11.2f %11.2f %9.1f %9s %10s %-9s %s\n", r.backend.c_str(),
              std::string(conv::to_string(r.precision)).c_str(), t.median_us(), t.min_us(), t.max_us(),
              t.median_us() / r.floor_us, r.speedup_vs_cufft ? fixed(*r.speedup_vs_cufft, 2).c_str() : "-",
              scientific(r.max_rel_error).c_str(), std::string(status_name(r.status)).c_str(), r.device.c_str());
  if (!r.note.empty()) std::printf("      %s\n", r.note.c_str());
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + '"';
}

void write_csv(const std::string& file, const std::vector<Row>& rows) {
  std::ofstream out(file, std::ios::trunc);
  // shape last, so that the columns of the scalar-only format keep their places.
  out << "case,backend,precision,device,median_us,min_us,max_us,floor_us,ratio_to_floor,speedup_vs_cufft,"
         "max_rel_error,verified,shape\n";
  for (const Row& r : rows) {
    out << r.case_number << ',' << csv_field(r.backend) << ',' << conv::to_string(r.precision) << ','
        << csv_field(r.device) << ',';
    if (r.timing)
      out << fixed(r.timing->median_us(), 3) << ',' << fixed(r.timing->min_us(), 3) << ','
          << fixed(r.timing->max_us(), 3) << ',';
    else
      out << ",,,";
    out << significant(r.floor_us) << ',' << (r.timing ? significant(r.timing->median_us() / r.floor_us) : "") << ','
        << (r.speedup_vs_cufft ? significant(*r.speedup_vs_cufft) : "") << ','
        << (r.timing ? scientific(r.max_rel_error) : "") << ',' << status_name(r.status) << ',' << name_of(r.shape)
        << '\n';
  }
  out.close();
  if (!out) throw Error("cannot write " + file);
}

template <class Real>
std::vector<Row> bench_case(const ProblemCase& c, Shape shape, const Settings& s) {
  const Problem g = problem_of(c, shape);
  const Precision p = conv::precision_of<Real>();
  const CaseData<Real> data =
      make_case_data<Real>(g, s.seed + 2 * std::uint64_t(2 * c.number + int(p)) + 1000 * std::uint64_t(shape));
  if (shape == Shape::scalar)
    std::printf("\ncase %d, %s: N %dx%d, L %dx%d, %d slices x %d fields = %zu convolutions; floor %.2f us; "
                "reference %s\n",
                c.number, std::string(conv::to_string(p)).c_str(), g.n1, g.n2, g.l1, g.l2, g.slices, g.per_slice,
                g.input_blocks(), floor_us(g, p, s.bandwidth), data.reference.c_str());
  else
    std::printf("\ncase %d, normal-vector, %s: N %dx%d, L %dx%d, %d slices x %d groups (K %d, Q %d, P %d, %zu terms) "
                "= %zu input and %zu output blocks; floor %.2f us; reference %s\n",
                c.number, std::string(conv::to_string(p)).c_str(), g.n1, g.n2, g.l1, g.l2, g.slices, g.per_slice,
                g.kernels, g.inputs, g.outputs, g.pattern.size(), g.input_blocks(), g.output_blocks(),
                floor_us(g, p, s.bandwidth), data.reference.c_str());
  print_header_row();
  std::vector<Row> rows;
  for (Variant v : s.variants) rows.push_back(measure(v, c, shape, data, s));

  const auto timed = [&](std::string_view name) -> std::optional<double> {
    for (const Row& r : rows)
      if (r.backend == name && r.timing) return r.timing->median_us();
    return std::nullopt;
  };
  const auto cufft = timed("gpu-cufft");
  for (Row& r : rows) {
    if (cufft && r.timing) r.speedup_vs_cufft = *cufft / r.timing->median_us();
    print_row(r);
  }
  if (const auto pruned = timed("cpu-fftw"), unpruned = timed("cpu-fftw-unpruned"); pruned && unpruned)
    std::printf("  zero-row pruning: cpu-fftw is %.2fx faster than cpu-fftw-unpruned\n", *unpruned / *pruned);
  return rows;
}

constexpr OptionSpec bench_options[] = {
    {"case", "LIST|all", "problem cases of convolution.md Table 1, e.g. 1 or 3,4 (default all)"},
    {"backend", "LIST|all|auto",
     "comma-separated backends (gpu-cufft, gpu-fused, gpu-direct, cpu-fftw, cpu-direct, auto); cpu-fftw brings "
     "the cpu-fftw-unpruned comparison row; default all but cpu-direct; all adds cpu-direct"},
    {"precision", "single|double|both", "complex64, complex128 or both (default both)"},
    {"shape", "scalar|normal-vector|both",
     "the scalar batch (default) and/or the 2D normal-vector pattern: K 7, Q 3, P 5, 16 groups per slice"},
    {"repeats", "N", "timed executions per row (default 30)"},
    {"warmup", "N", "untimed executions first (default 3)"},
    {"bandwidth", "GB/s", "memory bandwidth of the floor (default 3000, the H100 copy bandwidth)"},
    {"seed", "N", "random seed of kernels and fields (default: fresh)"},
    {"csv", "FILE", "also write the rows to FILE as CSV"},
};

Settings parse_settings(const Options& o) {
  Settings s;
  s.cases = select_cases(o.value("case"), std::span<const ProblemCase>(problem_cases));

  const auto backends = o.value("backend");
  if (!backends) {
    s.variants.assign(std::begin(default_variants), std::end(default_variants));
  } else if (*backends == "all") {
    s.variants.assign(std::begin(all_variants), std::end(all_variants));
  } else {
    for (std::string_view name : split_list("backend", *backends)) {
      const auto it = std::find_if(std::begin(variant_names), std::end(variant_names),
                                   [&](const auto& entry) { return entry.second == name; });
      if (it == std::end(variant_names))
        throw UsageError("--backend: unknown backend '" + std::string(name) +
                         "' (expected gpu-cufft, gpu-fused, gpu-direct, cpu-fftw, cpu-fftw-unpruned, cpu-direct, "
                         "auto or all)");
      s.variants.push_back(it->first);
      if (it->first == Variant::cpu_fftw) s.variants.push_back(Variant::cpu_fftw_unpruned);
    }
    // Canonical order (gpu-cufft first), each once.
    std::sort(s.variants.begin(), s.variants.end());
    s.variants.erase(std::unique(s.variants.begin(), s.variants.end()), s.variants.end());
  }

  s.precisions = parse_precisions(o.value("precision").value_or("both"));
  const std::string_view shape = o.value("shape").value_or("scalar");
  if (shape == "scalar" || shape == "both") s.shapes.push_back(Shape::scalar);
  if (shape == "normal-vector" || shape == "both") s.shapes.push_back(Shape::normal_vector);
  if (s.shapes.empty())
    throw UsageError("--shape: expected scalar, normal-vector or both, got '" + std::string(shape) + "'");

  if (const auto v = o.value("repeats")) s.timing.repeats = parse_int("repeats", *v, 1, 1000000);
  if (const auto v = o.value("warmup")) s.timing.warmup = parse_int("warmup", *v, 0, 1000000);
  if (const auto v = o.value("bandwidth")) s.bandwidth = 1e9 * parse_positive("bandwidth", *v);
  s.seed = std::random_device{}() & 0x7fffffff;  // within what --seed accepts
  if (const auto v = o.value("seed")) s.seed = std::uint64_t(parse_int("seed", *v, 0, 2147483647));
  if (const auto v = o.value("csv")) s.csv = std::string(*v);
  return s;
}

int run_bench_conv(const Options& options) {
  const Settings s = [&] {
    try {
      return parse_settings(options);
    } catch (const UsageError& e) {
      throw UsageError(std::string("gratingsim bench conv: ") + e.what() + " (see 'gratingsim bench conv --help')");
    }
  }();

  const auto gpu = conv::current_cuda_device();
  std::printf("gratingsim bench conv: %d timed executions after %d warm-up per row, rotating buffer sets\n",
              s.timing.repeats, s.timing.warmup);
  std::printf("memory floor: s*(2*N1*N2 + L1*L2/per_slice)*batch / B (scalar), "
              "s*[(Q + P)*N1*N2*groups + K*L1*L2*slices] / B (normal-vector: K 7, Q 3, P 5, %d groups per slice), "
              "s = 8 (single) or 16 (double) bytes, B = %.0f GB/s\n",
              normal_vector_groups_per_slice, s.bandwidth / 1e9);
  std::printf("verified: every timed output, relative l2 per block <= 1e-4 (single), 1e-10 (double)\n");
  if (gpu)
    std::printf("GPU: %s, %d SMs, peak SM clock %d MHz, peak memory clock %d MHz\n", gpu->name.c_str(), gpu->multiprocessors,
                gpu->sm_clock_mhz, gpu->memory_clock_mhz);
  else
    std::printf("GPU: none (%s)\n", conv::cuda_report().problem.c_str());
  std::printf("CPU: %s\nseed: %llu (--seed to replay)\n", conv::describe(conv::host_cpu()).c_str(),
              static_cast<unsigned long long>(s.seed));

  std::vector<Row> rows;
  for (Shape shape : s.shapes)
    for (const ProblemCase* c : s.cases)
      for (Precision p : s.precisions) {
        auto part = p == Precision::single ? bench_case<float>(*c, shape, s) : bench_case<double>(*c, shape, s);
        rows.insert(rows.end(), part.begin(), part.end());
      }

  if (s.csv) {
    write_csv(*s.csv, rows);
    std::printf("\nwrote %s\n", s.csv->c_str());
  }
  const auto failed = std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.status == Status::failed; });
  if (failed) {
    std::printf("\n%td row(s) FAILED\n", failed);
    return 1;
  }
  return 0;
}

}  // namespace

const Command gratingsim_bench_conv{
    .name = "conv",
    .summary = "time the convolution backends on the four problem cases, verify every output",
    .usage =
        "gratingsim bench conv [--case LIST|all] [--backend LIST|all|auto] [--precision single|double|both] "
        "[--shape scalar|normal-vector|both] [--repeats N] [--warmup N] [--bandwidth GB/s] [--seed N] [--csv FILE]",
    .description =
        "Times the batched convolution backends on the problem cases of convolution.md (Table 1) with fresh "
        "random kernels and fields: median/min/max over rotating buffer sets after warm-up (GPU: CUDA events; "
        "CPU: steady clock). Every timed output is checked against a complex128 reference on the same inputs "
        "(cpu-direct for cases 1-2, cpu-fftw for 3-4; relative l2 per block <= 1e-4 single, 1e-10 double); a row that fails is marked FAILED and the exit status is 1. "
        "Reports the ratio to the memory floor and the speed-up over gpu-cufft measured in the same run. Floor: "
        "scalar s*(2*N1*N2 + L1*L2/per_slice)*batch/B; normal-vector (--shape: K 7 kernels per slice, Q 3 "
        "inputs and P 5 outputs per group, 16 groups per slice = 8 angles x 2 polarisations) "
        "s*[(Q + P)*N1*N2*groups + K*L1*L2*slices]/B (read inputs, write outputs, read each spectrum once per "
        "slice). Backends this machine or build lacks, or that cannot serve a shape, are reported unavailable.",
    .options = bench_options,
    .run = run_bench_conv};

}  // namespace gratingsim::app
