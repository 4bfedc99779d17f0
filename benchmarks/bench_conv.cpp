// gratingsim bench conv: every backend on the four problem cases of docs/convolution.md §5
// (Table 1), as the scalar problem (Laurent's rule) and/or with the 2D normal-vector pattern, timed with
// the timing utility (stream time, and on a GPU graph time), every timed output checked against a
// complex128 reference of its own buffer set's input, reported against the largest of the memory and
// arithmetic floors and against the two cuFFT baselines, gpu-cufft (the plain pipeline) and
// gpu-cufft-callbacks (pad, products and extraction in cuFFT's callbacks, the strongest; its route in the row's note).
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

#include "benchmarks/bench_common.hpp"
#include "benchmarks/benchmarks.hpp"
#include "convolution/autotune.hpp"
#include "convolution/convolution.hpp"
#include "convolution/cpu_fftw.hpp"
#include "convolution/devices.hpp"
#include "convolution/problem_cases.hpp"
#include "convolution/timing.hpp"
#include "physics/normal_field.hpp"

namespace gratingsim::app {
namespace {

using conv::Backend;
using conv::Problem;

/// Table 1 (convolution/problem_cases.hpp): 8 angles × 3 field components = 24 convolutions share each
/// slice's spectrum; the batch is the table's (99, 195, 387, 771 convolutions per angle) × 8, i.e. 33,
/// 65, 129, 257 slices (the layers + 1).
using conv::ProblemCase;
using conv::problem_cases;

/// The problem a case is run as: the scalar batch above, or the 2D normal-vector pattern (K = 7 kernels
/// per slice, Q = 3 inputs F_x, F_y, F_z and P = 5 outputs J_x, J_y, J_z, D_x, D_y per group; physics'
/// normal_field.hpp) with one group per right-hand side: 8 angles × 2 polarisations = 16 groups per
/// slice, as the solver sets up Table 1's 8 angles (per_slice = 2 · incidences).
enum class Shape { scalar, normal_vector };
constexpr int normal_vector_groups_per_slice = 16;

std::string_view name_of(Shape shape) { return shape == Shape::scalar ? "scalar" : "normal-vector"; }

Problem problem_of(const ProblemCase& c, Shape shape) {
  Problem g = shape == Shape::scalar ? Problem{} : physics::normal_vector_problem(false);
  g.n1 = g.n2 = c.n();
  g.l1 = g.l2 = c.fft_size;
  g.slices = c.slices();
  g.per_slice = shape == Shape::scalar ? conv::fields_per_slice : normal_vector_groups_per_slice;
  return g;
}

/// What a row measures: a backend, the unpruned FFTW pipeline, or the `auto` choice.
enum class Variant {
  gpu_cufft,
  gpu_cufft_callbacks,
  gpu_fused,
  gpu_direct,
  cpu_fftw,
  cpu_fftw_unpruned,
  cpu_direct,
  automatic
};
constexpr std::pair<Variant, std::string_view> variant_names[] = {
    {Variant::gpu_cufft, "gpu-cufft"},   {Variant::gpu_cufft_callbacks, "gpu-cufft-callbacks"},
    {Variant::gpu_fused, "gpu-fused"},
    {Variant::gpu_direct, "gpu-direct"}, {Variant::cpu_fftw, "cpu-fftw"},
    {Variant::cpu_fftw_unpruned, "cpu-fftw-unpruned"}, {Variant::cpu_direct, "cpu-direct"},
    {Variant::automatic, "auto"},
};
constexpr Variant default_variants[] = {Variant::gpu_cufft, Variant::gpu_cufft_callbacks, Variant::gpu_fused,
                                        Variant::gpu_direct, Variant::cpu_fftw, Variant::cpu_fftw_unpruned};
constexpr Variant all_variants[] = {Variant::gpu_cufft, Variant::gpu_cufft_callbacks, Variant::gpu_fused,
                                    Variant::gpu_direct, Variant::cpu_fftw, Variant::cpu_fftw_unpruned,
                                    Variant::cpu_direct};

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
  double bandwidth = 3.0e12;  ///< bytes per second for the memory floor (the H100's measured copy bandwidth)
  double fp32_flops = 67e12;  ///< FP32 peak, non-tensor (H100 SXM: 132 SMs · 128 lanes · 2 · 1.98 GHz)
  double fp64_flops = 34e12;  ///< FP64 peak, non-tensor (H100 SXM: 132 SMs · 64 lanes · 2 · 1.98 GHz)
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
  double memory_floor_us = 0, arithmetic_floor_us = 0;
  double max_rel_error = 0;
  /// The row's speed-up over the two cuFFT baselines measured in the same run: gpu-cufft's time over the
  /// row's, and gpu-cufft-callbacks'; stream time and graph time.
  std::optional<double> speedup_vs_cufft, graph_speedup_vs_cufft;
  std::optional<double> speedup_vs_callbacks, graph_speedup_vs_callbacks;

  [[nodiscard]] double floor_us() const { return std::max(memory_floor_us, arithmetic_floor_us); }
  /// The time the floor ratio is taken of: device time (graph) where there is one, else stream time.
  [[nodiscard]] std::optional<double> device_us() const {
    if (!timing) return std::nullopt;
    return timing->graph.empty() ? timing->stream.median() : timing->graph.median();
  }
};

/// The fewest bytes the batch must move, s·[(Q + P)·N1·N2·groups + K·L1·L2·slices] (read inputs, write
/// outputs, read each spectrum once per slice; scalar: s·(2·N1·N2 + L1·L2/per_slice)·batch), at
/// `bandwidth` bytes/s; in µs.
double memory_floor_us(const Problem& g, Precision p, double bandwidth) {
  const double s = p == Precision::single ? 8 : 16;
  const double fields = double(g.inputs + g.outputs) * double(g.field_size()) * double(g.groups());
  const double spectra = double(g.kernels) * g.l1 * g.l2 * double(g.slices);
  return 1e6 * s * (fields + spectra) / bandwidth;
}

/// Real floating-point operations of the pruned FFT route per execution, counting 5·n·log2(n) per
/// complex FFT of length n and 6 per complex product, 2 per complex addition: per group,
///   transforms  5·(Q + P)·(N1·L2·log2 L2 + L2·L1·log2 L1)   (rows: only the N1 data/kept rows;
///                                                          columns: all L2)
///   products    L1·L2·(8·T − 2·P)                          (T terms: a product each, summed per output)
/// (kernel spectra are made at plan time, not counted). Scalar: 10·(N1·L2·log2 L2 + L2·L1·log2 L1) + 6·L1·L2.
double pruned_fft_flops(const Problem& g) {
  const double rows = double(g.n1) * g.l2 * std::log2(double(g.l2));
  const double columns = double(g.l2) * g.l1 * std::log2(double(g.l1));
  const double transforms = 5.0 * double(g.inputs + g.outputs) * (rows + columns);
  const double products = double(g.l1) * g.l2 * (8.0 * double(g.pattern.size()) - 2.0 * g.outputs);
  return double(g.groups()) * (transforms + products);
}

/// That arithmetic at the precision's peak rate (a lower bound: the peak counts every operation as half
/// of a fused multiply-add; an FFT's additions mostly are not); in µs.
double arithmetic_floor_us(const Problem& g, Precision p, const Settings& s) {
  return 1e6 * pruned_fft_flops(g) / (p == Precision::single ? s.fp32_flops : s.fp64_flops);
}

/// The reference is cpu-direct (the defining sum, complex128 accumulation, independent of every FFT
/// backend) where it is cheap, cases 1 and 2 (scalar); else cpu-fftw in complex128.
constexpr double direct_reference_limit = 1e8;

/// Inputs of one case and precision: kernels, and a distinct random input per buffer set (made on
/// demand, up to the most sets a row rotates through), each with its reference output in complex128
/// computed from exactly the rounded values the plans see.
template <class Real>
class CaseData {
 public:
  CaseData(const Problem& g, std::uint64_t seed) : g_(g), seed_(seed) {
    kernels = conv::random_complex<Real>(g.kernels_total(), seed);
    try {
      if (direct_multiply_adds(g) <= direct_reference_limit) {
        reference_plan_ = conv::make_convolution<double>(Backend::cpu_direct, g, kernels);
        reference = "cpu-direct (double)";
      } else {
        reference_plan_ = conv::make_convolution<double>(Backend::cpu_fftw, g, kernels);
        reference = "cpu-fftw (double)";
      }
    } catch (const Unsupported& e) {
      reference = "none (cpu-fftw unavailable: " + user_message(e) + ")";
    }
  }
  [[nodiscard]] bool has_reference() const { return reference_plan_ != nullptr; }

  /// Makes the inputs and reference outputs of sets 0 .. count − 1 (each input `elements` long: the
  /// plan reads its first input_size()).
  void ensure_sets(int count, std::size_t elements) {
    while (int(inputs.size()) < count) {
      const std::uint64_t set = inputs.size();
      const auto wide = conv::random_complex<Real>(g_.input_size(), mix(seed_, set + 1));
      inputs.emplace_back(wide.begin(), wide.end());
      inputs.back().resize(elements, std::complex<Real>(0));
      expects.emplace_back(g_.output_size());
      if (reference_plan_) reference_plan_->execute(wide.data(), expects.back().data());
    }
  }

  std::vector<std::complex<double>> kernels;
  std::vector<std::vector<std::complex<Real>>> inputs;
  std::vector<std::vector<std::complex<double>>> expects;
  std::string reference;  ///< which backend computes the references, or why none

 private:
  /// splitmix64 of (seed, n): independent streams for the kernels and each set's input.
  static std::uint64_t mix(std::uint64_t seed, std::uint64_t n) {
    std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (n + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  Problem g_;
  std::uint64_t seed_;
  std::unique_ptr<conv::Convolution<double>> reference_plan_;
};

template <class Real>
std::unique_ptr<conv::Convolution<Real>> make_plan(Variant v, const Problem& g, const CaseData<Real>& d,
                                                   Backend& chosen) {
  switch (v) {
    case Variant::cpu_fftw_unpruned:
      chosen = Backend::cpu_fftw;
      return conv::make_fftw_convolution<Real>(g, d.kernels, {.prune_zero_rows = false, .planning = {}});
    case Variant::automatic:
      chosen = conv::select_backend(g, precision_of<Real>(), conv::default_backend_cache());
      break;
    case Variant::cpu_direct:
      GS_SUPPORTS(direct_multiply_adds(g) <= direct_limit,
               "cpu-direct declines this case: " + scientific(direct_multiply_adds(g)) +
                   " complex multiply-adds per execution (limit 1e9; it is O(N1^2 N2^2) per block)");
      chosen = Backend::cpu_direct;
      break;
    default: chosen = conv::parse_backend(name_of(v));
  }
  return conv::make_convolution<Real>(chosen, g, d.kernels);
}

/// The benchmark's check of one output: the largest relative l2 error per output block against the
/// reference of its set's input (NaN, an unwritten element, gives +inf).
template <class Real>
double worst_block_error(const Problem& g, std::span<const std::complex<Real>> out,
                         const std::vector<std::complex<double>>& expect) {
  const std::size_t n = g.field_size();
  const auto blocks = std::ptrdiff_t(g.output_blocks());
  double worst = 0;
  // Threads over blocks: case 4's outputs are up to 1.3 GB, checked after every timed execution.
#pragma omp parallel for reduction(max : worst) schedule(static)
  for (std::ptrdiff_t b = 0; b < blocks; ++b) {
    double diff = 0, ref = 0;
    for (std::size_t i = std::size_t(b) * n; i < std::size_t(b + 1) * n; ++i) {
      diff += std::norm(std::complex<double>(out[i]) - expect[i]);
      ref += std::norm(expect[i]);
    }
    const double error = ref > 0 ? std::sqrt(diff / ref) : INFINITY;
    worst = std::max(worst, std::isnan(error) ? INFINITY : error);
  }
  return worst;
}

template <class Real>
Row measure(Variant v, const ProblemCase& c, Shape shape, CaseData<Real>& d, const Settings& s) {
  const Problem g = problem_of(c, shape);
  Row row;
  row.case_number = c.number;
  row.shape = shape;
  row.backend = std::string(name_of(v));
  row.precision = precision_of<Real>();
  row.memory_floor_us = memory_floor_us(g, row.precision, s.bandwidth);
  row.arithmetic_floor_us = arithmetic_floor_us(g, row.precision, s);

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
  if (plan->memory() == Memory::device) {
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
    d.ensure_sets(buffers.count(), elements);
    for (int set = 0; set < buffers.count(); ++set) buffers.fill_input(set, d.inputs[std::size_t(set)]);
    conv::OutputCheck<Real> check;
    if (d.has_reference())
      check = [&](int set, std::span<const std::complex<Real>> out) {
        return worst_block_error<Real>(g, out, d.expects[std::size_t(set)]);
      };
    row.timing = conv::time_execute(*plan, buffers, s.timing, check);
    if (!d.has_reference()) {
      row.status = Status::failed;
      row.note = "no reference: " + d.reference;
      return row;
    }
    row.max_rel_error = row.timing->max_error;
    const bool every = row.timing->checked_outputs == row.timing->timed_executions;
    const bool ok = every && row.max_rel_error <= tolerance(row.precision);
    row.status = ok ? Status::verified : Status::failed;
    if (!every) row.note = "not every timed output was checked";
    if (row.max_rel_error > tolerance(row.precision))
      row.note = "output differs from the reference beyond " + scientific(tolerance(row.precision));
    if (v == Variant::gpu_cufft_callbacks)
      row.note += (row.note.empty() ? "" : "; ") + conv::cufft_callbacks_route(row.precision);
    if (plan->memory() == Memory::device && row.timing->graph.empty())
      row.note += (row.note.empty() ? "" : "; ") + std::string("no graph time: ") + row.timing->graph_note;
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
  std::printf("  %-24s %-9s %10s %10s %10s %10s %10s %10s %8s %8s %9s %8s %9s %10s %-13s %-9s %s\n", "backend",
              "precision", "stream_us", "s_min", "s_max", "graph_us", "g_min", "g_max", "x_floor", "vs_cufft",
              "vs_cufft_g", "vs_cb", "vs_cb_g", "max_error", "checked", "verified", "device");
}

/// "median min max" of samples, or dashes.
std::string three_columns(const conv::Samples& t) {
  char buffer[64];
  if (t.empty()) {
    std::snprintf(buffer, sizeof buffer, "%10s %10s %10s", "-", "-", "-");
  } else {
    std::snprintf(buffer, sizeof buffer, "%10.2f %10.2f %10.2f", t.median(), t.min(), t.max());
  }
  return buffer;
}

void print_row(const Row& r) {
  if (!r.timing) {
    std::printf("  %-24s %-9s %s: %s\n", r.backend.c_str(), std::string(to_string(r.precision)).c_str(),
                std::string(status_name(r.status)).c_str(), r.note.c_str());
    return;
  }
  const conv::Timing& t = *r.timing;
  const std::string checked = std::to_string(t.checked_outputs) + "/" + std::to_string(t.timed_executions);
  const auto ratio = [](const std::optional<double>& v) { return v ? fixed(*v, 2) : std::string("-"); };
  std::printf("  %-24s %-9s %s %s %8.1f %8s %9s %8s %9s %10s %-13s %-9s %s\n", r.backend.c_str(),
              std::string(to_string(r.precision)).c_str(), three_columns(t.stream).c_str(),
              three_columns(t.graph).c_str(), *r.device_us() / r.floor_us(), ratio(r.speedup_vs_cufft).c_str(),
              ratio(r.graph_speedup_vs_cufft).c_str(), ratio(r.speedup_vs_callbacks).c_str(),
              ratio(r.graph_speedup_vs_callbacks).c_str(), scientific(r.max_rel_error).c_str(), checked.c_str(),
              std::string(status_name(r.status)).c_str(), r.device.c_str());
  if (!r.note.empty()) std::printf("      %s\n", r.note.c_str());
}

void write_csv(const std::string& file, const std::vector<Row>& rows) {
  std::ofstream out(file, std::ios::trunc);
  out << "case,shape,backend,precision,device,stream_median_us,stream_q1_us,stream_q3_us,stream_min_us,stream_max_us,"
         "graph_median_us,graph_q1_us,graph_q3_us,graph_min_us,graph_max_us,graph_executions,warmup_runs,warmup_ms,"
         "memory_floor_us,arithmetic_floor_us,ratio_to_floor,speedup_vs_cufft,graph_speedup_vs_cufft,"
         "speedup_vs_cufft_callbacks,graph_speedup_vs_cufft_callbacks,max_rel_error,checked_outputs,timed_executions,"
         "verified,note\n";
  const auto samples = [&](const conv::Samples& t) {
    if (t.empty()) return std::string(",,,,");
    return fixed(t.median(), 3) + ',' + fixed(t.quantile(0.25), 3) + ',' + fixed(t.quantile(0.75), 3) + ',' +
           fixed(t.min(), 3) + ',' + fixed(t.max(), 3);
  };
  const auto optional = [](const std::optional<double>& v) { return v ? significant(*v) : std::string(); };
  for (const Row& r : rows) {
    out << r.case_number << ',' << name_of(r.shape) << ',' << csv_field(r.backend) << ','
        << to_string(r.precision) << ',' << csv_field(r.device) << ',';
    if (r.timing)
      out << samples(r.timing->stream) << ',' << samples(r.timing->graph) << ',' << r.timing->graph_executions << ','
          << r.timing->warmup_runs << ',' << fixed(r.timing->warmup_ms, 1) << ',';
    else
      out << ",,,,,,,,,,,,,";
    out << significant(r.memory_floor_us) << ',' << significant(r.arithmetic_floor_us) << ','
        << (r.timing ? significant(*r.device_us() / r.floor_us()) : "") << ',' << optional(r.speedup_vs_cufft) << ','
        << optional(r.graph_speedup_vs_cufft) << ',' << optional(r.speedup_vs_callbacks) << ','
        << optional(r.graph_speedup_vs_callbacks) << ',' << (r.timing ? scientific(r.max_rel_error) : "") << ','
        << (r.timing ? std::to_string(r.timing->checked_outputs) : "") << ','
        << (r.timing ? std::to_string(r.timing->timed_executions) : "") << ',' << status_name(r.status) << ','
        << csv_field(r.note) << '\n';
  }
  out.close();
  if (!out) throw Error("cannot write " + file);
}

template <class Real>
std::vector<Row> bench_case(const ProblemCase& c, Shape shape, const Settings& s) {
  const Problem g = problem_of(c, shape);
  const Precision p = precision_of<Real>();
  CaseData<Real> data(g, s.seed + 2 * std::uint64_t(2 * c.number + int(p)) + 1000 * std::uint64_t(shape));
  const double memory = memory_floor_us(g, p, s.bandwidth), arithmetic = arithmetic_floor_us(g, p, s);
  if (shape == Shape::scalar)
    std::printf("\ncase %d, %s: N %dx%d, L %dx%d, %d slices x %d fields = %zu convolutions; reference %s\n", c.number,
                std::string(to_string(p)).c_str(), g.n1, g.n2, g.l1, g.l2, g.slices, g.per_slice,
                g.input_blocks(), data.reference.c_str());
  else
    std::printf("\ncase %d, normal-vector, %s: N %dx%d, L %dx%d, %d slices x %d groups (K %d, Q %d, P %d, %zu terms) "
                "= %zu input and %zu output blocks; reference %s\n",
                c.number, std::string(to_string(p)).c_str(), g.n1, g.n2, g.l1, g.l2, g.slices, g.per_slice,
                g.kernels, g.inputs, g.outputs, g.pattern.size(), g.input_blocks(), g.output_blocks(),
                data.reference.c_str());
  std::printf("  floors: memory %.2f us, %s arithmetic %.2f us (%.3g flop); x_floor against the %s floor\n", memory,
              p == Precision::single ? "FP32" : "FP64", arithmetic, pruned_fft_flops(g),
              memory >= arithmetic ? "memory" : "arithmetic");
  print_header_row();
  std::vector<Row> rows;
  for (Variant v : s.variants) rows.push_back(measure(v, c, shape, data, s));

  const auto timed = [&](std::string_view name) -> const Row* {
    for (const Row& r : rows)
      if (r.backend == name && r.timing) return &r;
    return nullptr;
  };
  // Speed-ups over a baseline row: its median over the row's, in stream and (both having one) graph time.
  const auto speedups = [](const Row* baseline, const Row& r, std::optional<double>& stream,
                           std::optional<double>& graph) {
    if (!baseline || !r.timing) return;
    stream = baseline->timing->stream.median() / r.timing->stream.median();
    if (!baseline->timing->graph.empty() && !r.timing->graph.empty())
      graph = baseline->timing->graph.median() / r.timing->graph.median();
  };
  const Row *cufft = timed("gpu-cufft"), *callbacks = timed("gpu-cufft-callbacks");
  for (Row& r : rows) {
    speedups(cufft, r, r.speedup_vs_cufft, r.graph_speedup_vs_cufft);
    speedups(callbacks, r, r.speedup_vs_callbacks, r.graph_speedup_vs_callbacks);
    print_row(r);
  }
  // gpu-fused against both cuFFT baselines, in one line (device time: graph; stream time in brackets).
  if (const Row* fused = timed("gpu-fused"); fused && (cufft || callbacks)) {
    const auto against = [](const char* name, const std::optional<double>& graph,
                            const std::optional<double>& stream) {
      if (!stream) return std::string();
      return std::string(", ") + (graph ? fixed(*graph, 2) : std::string("-")) + "x over " + name + " (stream " +
             fixed(*stream, 2) + "x)";
    };
    std::printf("  gpu-fused speed-up, graph time%s%s\n",
                against("gpu-cufft", fused->graph_speedup_vs_cufft, fused->speedup_vs_cufft).c_str(),
                against("gpu-cufft-callbacks", fused->graph_speedup_vs_callbacks, fused->speedup_vs_callbacks).c_str());
  }
  if (const Row *pruned = timed("cpu-fftw"), *unpruned = timed("cpu-fftw-unpruned"); pruned && unpruned)
    std::printf("  zero-row pruning: cpu-fftw takes %.2fx cpu-fftw-unpruned's median time\n",
                pruned->timing->stream.median() / unpruned->timing->stream.median());
  std::fflush(stdout);
  return rows;
}

constexpr OptionSpec bench_options[] = {
    {"case", "LIST|all", "problem cases of docs/convolution.md §5 (Table 1), e.g. 1 or 3,4 (default all)"},
    {"backend", "LIST|all|auto",
     "comma-separated backends (gpu-cufft, gpu-cufft-callbacks, gpu-fused, gpu-direct, cpu-fftw, cpu-direct, auto); "
     "cpu-fftw brings the cpu-fftw-unpruned comparison row; default all but cpu-direct; all adds cpu-direct"},
    bench_option::precision,
    {"shape", "scalar|normal-vector|both",
     "the scalar batch (default) and/or the 2D normal-vector pattern: K 7, Q 3, P 5, 16 groups per slice"},
    bench_option::repeats("timed executions per row, and timed graph replays per GPU row (default 30)"),
    bench_option::warmup_ms("untimed executions first, for at least this long (default 200)"),
    bench_option::bandwidth,
    {"fp32", "TFLOP/s", "FP32 rate of the arithmetic floor (default 67, H100 SXM non-tensor peak)"},
    {"fp64", "TFLOP/s", "FP64 rate of the arithmetic floor (default 34, H100 SXM non-tensor peak)"},
    {"seed", "N", "random seed of kernels and fields (default: fresh)"},
    bench_option::csv,
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
                         "' (expected gpu-cufft, gpu-cufft-callbacks, gpu-fused, gpu-direct, cpu-fftw, "
                         "cpu-fftw-unpruned, cpu-direct, "
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
  if (const auto v = o.value("warmup-ms")) s.timing.warmup_ms = parse_int("warmup-ms", *v, 0, 1000000);
  if (const auto v = o.value("bandwidth")) s.bandwidth = 1e9 * parse_positive("bandwidth", *v);
  if (const auto v = o.value("fp32")) s.fp32_flops = 1e12 * parse_positive("fp32", *v);
  if (const auto v = o.value("fp64")) s.fp64_flops = 1e12 * parse_positive("fp64", *v);
  s.seed = std::random_device{}() & 0x7fffffff;  // within what --seed accepts
  if (const auto v = o.value("seed")) s.seed = std::uint64_t(parse_int("seed", *v, 0, 2147483647));
  if (const auto v = o.value("csv")) s.csv = std::string(*v);
  return s;
}

int run_bench_conv(const Options& options) {
  const Settings s = parse_settings(options);

  const auto gpu = conv::current_cuda_device();
  std::printf("gratingsim bench conv: per row, warm-up of at least %.0f ms, then %d timed executions (stream time: "
              "GPU events per execution, CPU steady clock) and on a GPU %d timed replays of a graph of one execution "
              "per buffer set (graph time: device only, per execution); distinct random inputs per buffer set, sets "
              "rotated\n",
              s.timing.warmup_ms, s.timing.repeats, s.timing.repeats);
  std::printf("memory floor: s*(2*N1*N2 + L1*L2/per_slice)*batch / B (scalar), "
              "s*[(Q + P)*N1*N2*groups + K*L1*L2*slices] / B (normal-vector: K 7, Q 3, P 5, %d groups per slice), "
              "s = 8 (single) or 16 (double) bytes, B = %.0f GB/s (measured H100 copy bandwidth; HBM3 peak 3350)\n",
              normal_vector_groups_per_slice, s.bandwidth / 1e9);
  std::printf("arithmetic floor: flops per group 5*(Q + P)*(N1*L2*log2 L2 + L2*L1*log2 L1) + L1*L2*(8*terms - 2*P) "
              "(pruned FFTs, 5 n log2 n per length-n FFT; products and sums) at FP32 %.1f / FP64 %.1f TFLOP/s "
              "(H100 SXM non-tensor peaks: 132 SMs x 128 / 64 lanes x 2 x 1.98 GHz)\n",
              s.fp32_flops / 1e12, s.fp64_flops / 1e12);
  std::printf("x_floor: graph time (GPU) or stream time (CPU) over the larger floor\n");
  std::printf("verified: every timed output (stream and graph) poisoned before and checked after its execution, "
              "relative l2 per block <= 1e-4 (single), 1e-10 (double); 'checked' = outputs checked / timed "
              "executions\n");
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

  return finish_bench(s.csv, rows, write_csv, [](const Row& r) { return r.status == Status::failed; });
}

}  // namespace

const Command gratingsim_bench_conv{
    .name = "conv",
    .summary = "time the convolution backends on the four problem cases, verify every output",
    .usage =
        "gratingsim bench conv [--case LIST|all] [--backend LIST|all|auto] [--precision single|double|both] "
        "[--shape scalar|normal-vector|both] [--repeats N] [--warmup-ms MS] [--bandwidth GB/s] [--fp32 TFLOP/s] "
        "[--fp64 TFLOP/s] [--seed N] [--csv FILE]",
    .description =
        "Times the batched convolution backends on the problem cases of docs/convolution.md §5 (Table 1) with fresh "
        "random kernels and a distinct random input per buffer set (sets rotated so that together they are twice "
        "the last-level cache). After a warm-up of at least --warmup-ms: stream time, per execution (GPU: CUDA "
        "events around each execute() on a stream, one round of one execution per set enqueued without a host "
        "wait; CPU: steady clock); on a GPU also graph time, device time only (one CUDA graph of one execution per "
        "set, replayed behind a host gate, events around each replay, divided by the sets). Median, min and max "
        "(CSV: quartiles too). Every timed output, in both, is poisoned (NaN) before its execution and checked "
        "after it, outside the timed region, against a complex128 reference of its set's input (cpu-direct for "
        "scalar cases 1-2, cpu-fftw otherwise; relative l2 per block <= 1e-4 single, 1e-10 double); 'checked' "
        "counts checked outputs / timed executions; a row that fails is marked FAILED and the exit status is 1. "
        "Floors: memory, scalar s*(2*N1*N2 + L1*L2/per_slice)*batch/B and normal-vector (--shape: K 7 kernels per "
        "slice, Q 3 inputs and P 5 outputs per group, 16 groups per slice = 8 angles x 2 polarisations) "
        "s*[(Q + P)*N1*N2*groups + K*L1*L2*slices]/B (read inputs, write outputs, read each spectrum once per "
        "slice); arithmetic, the pruned FFT route's flops per group 5*(Q + P)*(N1*L2*log2 L2 + L2*L1*log2 L1) + "
        "L1*L2*(8*terms - 2*P) at the FP32 or FP64 peak. x_floor: graph time (GPU) or stream time (CPU) over the "
        "larger floor. vs_cufft: gpu-cufft's stream time over the row's, vs_cufft_g the same in graph time; vs_cb, "
        "vs_cb_g: the same against gpu-cufft-callbacks (cuFFT with pad, products and extraction as callbacks, LTO or legacy, the "
        "strongest cuFFT baseline); all measured in the same run, and gpu-fused's against both summed up in one "
        "line per case. No floor from instruction counts is computed (docs/convolution.md section 6 says why). "
        "Backends this machine or build lacks, or that cannot serve a shape, are reported unavailable.",
    .options = bench_options,
    .run = run_bench_conv};

}  // namespace gratingsim::app
