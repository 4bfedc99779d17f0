// gpu-fused: the whole FFT convolution of the batch in one kernel launch (docs/convolution.md §4),
// for the scalar problem and for any pattern. This file is the plan: kernel spectra, launch
// configuration, can_implement, workspace_bytes, the factory. The kernels and their shared-memory
// layout are in gpu_fused/kernel.cuh (instantiated in gpu_fused/*_kernels_*.cu), the FFT building
// blocks in gpu_fused/fft_primitives.cuh.
//
// Limits: L1, L2 powers of two ≤ 128 (templates), and the shared memory of one round: one field (scalar)
// or one group of one output set (patterns: max(P_s, Q_s) blocks of H1·(L2 + 1) values, so at least
// max(1, inputs read by an output) blocks). Patterns also need every output to read at most
// max_set_inputs = 4 inputs and at most max_sets = 8 output sets. can_implement names the limit a
// problem exceeds.
// execute() enqueues one launch on the caller's stream and allocates nothing; set_kernels() computes
// the spectra on the device in double precision (a separable DFT, exact up to rounding) and
// synchronises with the device.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "convolution/backends.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "convolution/gpu_fused/kernel.cuh"

namespace gratingsim::conv::detail {
namespace fused {
namespace {

constexpr bool power_of_two(int l) { return l >= 1 && (l & (l - 1)) == 0; }
constexpr std::size_t round16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

std::string precision_name(std::size_t real_bytes) { return real_bytes == 4 ? "single" : "double"; }

/// Opt-in shared memory per block of the current device.
int shared_memory_limit() {
  int device = 0, shared_max = 0;
  GS_CUDA_TRY(cudaGetDevice(&device));
  GS_CUDA_TRY(cudaDeviceGetAttribute(&shared_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return shared_max;
}

/// Dynamic shared memory per block with which two blocks fit on one SM of the current device (each
/// block also takes the device's reserved shared memory per block).
int shared_memory_two_per_sm() {
  int device = 0, per_sm = 0, reserved = 0;
  GS_CUDA_TRY(cudaGetDevice(&device));
  GS_CUDA_TRY(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  GS_CUDA_TRY(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  return std::min(shared_memory_limit(), per_sm / 2 - reserved);
}

/// Offsets (bytes) into the dynamic shared memory of a kernel and its size.
struct SharedLayout {
  std::size_t buf_offset = 0, stage_offset = 0, twiddle_offset = 0, bytes = 0;
  std::size_t spectra_offset = 0;  // patterns
};

template <class Real>
std::size_t twiddle_bytes(const Problem& g) {
  return std::size_t(twiddle_table_size<Real>(g.l1) + twiddle_table_size<Real>(g.l2)) * sizeof(Cx<Real>);
}
/// One buf block: H1 rows of L2 + 1 values.
template <class Real>
std::size_t block_bytes(const Problem& g) {
  return std::size_t(axis_shape<Real>(g.l1).h) * (g.l2 + 1) * sizeof(Cx<Real>);
}

/// The scalar kernel running `fields` fields per round, with or without input staging.
template <class Real>
SharedLayout scalar_layout(const Problem& g, int fields, bool stage) {
  const int width = spectrum_width<Real>(g.l1);
  const std::size_t spectrum =
      spectrum_in_shared<Real>(g.l1, g.l2)
          ? round16(std::size_t(g.l2) * (g.l1 + spectrum_column_pad<Real>(g.l1) * width) * sizeof(Cx<Real>))
          : 0;
  const std::size_t buf = round16(std::size_t(fields) * block_bytes<Real>(g));
  const std::size_t staged = stage ? round16(std::size_t(fields) * g.field_size() * sizeof(Cx<Real>)) : 0;
  return {spectrum, spectrum + buf, spectrum + buf + staged, spectrum + buf + staged + twiddle_bytes<Real>(g)};
}

/// One spectrum in shared memory: L2 columns of L1 values, padded as the scalar kernel's.
template <class Real>
std::size_t shared_spectrum_bytes(const Problem& g) {
  return std::size_t(g.l2) * (g.l1 + spectrum_column_pad<Real>(g.l1) * spectrum_width<Real>(g.l1)) * sizeof(Cx<Real>);
}

/// The pattern kernel running `groups` groups per round of `slots` buf blocks, staging `inputs` blocks
/// per group or none, with `spectra` spectra in shared memory; its output set at offset 0.
template <class Real>
SharedLayout pattern_layout(const Problem& g, int groups, int slots, int inputs, bool stage, int spectra) {
  const std::size_t set = round16(sizeof(OutputSet));
  const std::size_t staged_spectra = round16(std::size_t(spectra) * shared_spectrum_bytes<Real>(g));
  const std::size_t buf = round16(std::size_t(groups) * slots * block_bytes<Real>(g));
  const std::size_t staged =
      stage ? round16(std::size_t(groups) * inputs * g.field_size() * sizeof(Cx<Real>)) : 0;
  const std::size_t b = set + staged_spectra;
  return {b, b + buf, b + buf + staged, b + buf + staged + twiddle_bytes<Real>(g), set};
}

/// Groups per round the pattern kernel aims at: two columns per team (as fields per round of the
/// scalar kernel), at most per_slice.
template <class Real>
int target_groups(const Problem& g) {
  const AxisShape a1 = axis_shape<Real>(g.l1);
  const bool paired = a1.a == 1 && a1.h == 16;  // threads on one column: a team, or two (one per parity)
  return std::clamp(2 * pattern_block_threads / (g.l2 * (paired ? 2 : a1.a)), 1, g.per_slice);
}

/// The outputs split into output sets (kernel.cuh), or why the pattern cannot be served.
struct SetPlan {
  std::vector<OutputSet> sets;
  int slots = 0;    // buf blocks per group: the largest max(P_s, Q_s)
  int inputs = 0;   // the largest Q_s
  int spectra = 0;  // the most spectra of a set in shared memory (0: spectra read from global memory)
  int reads = 0;    // input blocks read per group: Σ_s Q_s
  std::string refusal;
};

/// Greedy: outputs ordered by the set of inputs they read (outputs reading the same inputs side by
/// side), each added to the current set while its inputs stay ≤ max_set_inputs, its outputs
/// ≤ max_set_outputs and the set fits in `shared_max` bytes: max(P_s, Q_s) blocks of one group; with
/// `shared_spectra`, its spectra too, beside target_groups() groups and their staged inputs.
template <class Real>
SetPlan plan_output_sets(const Problem& g, std::size_t shared_max, bool shared_spectra) {
  SetPlan plan;
  const std::string shape = "L1 = " + std::to_string(g.l1) + ", L2 = " + std::to_string(g.l2) + " in " +
                            precision_name(sizeof(Real)) + " precision";
  int max_slots = 0;
  while (pattern_layout<Real>(g, 1, max_slots + 1, 0, false, 0).bytes <= shared_max) ++max_slots;
  const auto slots_bytes = [&](int slots) { return pattern_layout<Real>(g, 1, slots, 0, false, 0).bytes; };
  const int groups = target_groups<Real>(g);
  // Distinct kernels of the terms of `outputs`.
  const auto kernels_of = [&](const std::vector<int>& outputs) {
    std::vector<int> k;
    for (const Term& t : g.pattern)
      if (std::find(outputs.begin(), outputs.end(), t.output) != outputs.end() &&
          std::find(k.begin(), k.end(), t.kernel) == k.end())
        k.push_back(t.kernel);
    return k;
  };
  // Whether a set of these outputs reading `inputs` inputs fits.
  const auto fits = [&](const std::vector<int>& outputs, int inputs) {
    const int slots = std::max(int(outputs.size()), inputs);
    if (inputs > max_set_inputs || int(outputs.size()) > max_set_outputs || slots > max_slots) return false;
    if (!shared_spectra) return true;
    const int spectra = int(kernels_of(outputs).size());
    return spectra <= max_set_spectra &&
           pattern_layout<Real>(g, groups, slots, inputs, true, spectra).bytes <= shared_max;
  };

  std::vector<std::uint64_t> reads(g.outputs, 0);  // bit q: output o reads input q
  for (const Term& t : g.pattern)
    if (t.input < 64) reads[t.output] |= std::uint64_t(1) << t.input;
  for (const Term& t : g.pattern)
    if (t.input >= 64) {
      plan.refusal = "serves outputs reading at most " + std::to_string(max_set_inputs) +
                     " inputs (the column spectra one thread holds); output " + std::to_string(t.output) +
                     " reads input " + std::to_string(t.input);
      return plan;
    }
  std::vector<int> order(g.outputs);
  for (int o = 0; o < g.outputs; ++o) order[o] = o;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return reads[a] < reads[b]; });

  std::vector<std::vector<int>> members;  // outputs of each set
  std::vector<std::uint64_t> set_reads;
  for (int o : order) {
    const int own = std::popcount(reads[o]);
    if (own > max_set_inputs) {
      plan.refusal = "serves outputs reading at most " + std::to_string(max_set_inputs) +
                     " inputs (the column spectra one thread holds); output " + std::to_string(o) + " reads " +
                     std::to_string(own);
      return plan;
    }
    if (std::max(1, own) > max_slots) {
      plan.refusal = "needs " + std::to_string(slots_bytes(std::max(1, own))) +
                     " bytes of shared memory per block for output " + std::to_string(o) + ", which reads " +
                     std::to_string(own) + " inputs (one row-spectrum block of " +
                     std::to_string(block_bytes<Real>(g)) + " bytes each) at " + shape + "; the device allows " +
                     std::to_string(shared_max);
      return plan;
    }
    if (shared_spectra && !fits({o}, own)) {
      plan.refusal = "cannot hold output " + std::to_string(o) + "'s spectra in shared memory";
      return plan;
    }
    if (!members.empty()) {
      const std::uint64_t joined = set_reads.back() | reads[o];
      std::vector<int> outputs = members.back();
      outputs.push_back(o);
      if (fits(outputs, std::popcount(joined))) {
        members.back() = outputs;
        set_reads.back() = joined;
        continue;
      }
    }
    members.push_back({o});
    set_reads.push_back(reads[o]);
  }
  if (int(members.size()) > max_sets) {
    plan.refusal = "needs " + std::to_string(members.size()) + " output sets at " + shape + " (at most " +
                   std::to_string(max_sets) + " per launch; each holds at most " + std::to_string(max_set_outputs) +
                   " outputs and " + std::to_string(max_slots) + " blocks of shared memory)";
    return plan;
  }
  for (std::size_t s = 0; s < members.size(); ++s) {
    OutputSet set{};
    set.outputs = int(members[s].size());
    for (int q = 0; q < g.inputs; ++q)
      if (set_reads[s] >> q & 1) set.input[set.inputs++] = q;
    const std::vector<int> kernels = kernels_of(members[s]);
    if (shared_spectra) {
      set.spectra = int(kernels.size());
      std::copy(kernels.begin(), kernels.end(), set.spectrum);
    }
    for (int o = 0; o < set.outputs; ++o) {
      set.output[o] = members[s][o];
      for (int q = 0; q < max_set_inputs; ++q) set.kernel[o][q] = -1;
      for (const Term& t : g.pattern)
        if (t.output == set.output[o])
          for (int q = 0; q < set.inputs; ++q)
            if (set.input[q] == t.input)  // the staged spectrum's index, or the kernel itself
              set.kernel[o][q] = shared_spectra ? int(std::find(kernels.begin(), kernels.end(), t.kernel) -
                                                      kernels.begin())
                                                : t.kernel;
    }
    plan.sets.push_back(set);
    plan.slots = std::max({plan.slots, set.inputs, set.outputs});
    plan.inputs = std::max(plan.inputs, set.inputs);
    plan.spectra = std::max(plan.spectra, set.spectra);
    plan.reads += set.inputs;
  }
  return plan;
}

/// The spectra in shared memory where every set's fit beside target_groups() groups and the sets read
/// each input at most twice on average (case 3 in complex64: 5 reads of 3 inputs); else from global
/// memory (L2) with the fewest sets that fit.
template <class Real>
SetPlan plan_pattern_sets(const Problem& g, std::size_t shared_max) {
  SetPlan shared = plan_output_sets<Real>(g, shared_max, true);
  if (shared.refusal.empty()) {
    std::uint64_t used = 0;
    for (const Term& t : g.pattern) used |= std::uint64_t(1) << (t.input % 64);
    // One launch's layout holds the largest set's slots and the largest set's spectra at once.
    const bool one_layout_fits =
        pattern_layout<Real>(g, 1, shared.slots, shared.inputs, false, shared.spectra).bytes <= shared_max;
    if (shared.reads <= 2 * std::popcount(used) && one_layout_fits) return shared;
  }
  return plan_output_sets<Real>(g, shared_max, false);
}

/// Whether the kernels can serve the (resolved) problem in Real on the current device, and why not.
template <class Real>
Support check_problem(const Problem& g) {
  for (int l : {g.l1, g.l2})
    if (!power_of_two(l) || l > max_fft_length)
      return unsupported("needs FFT lengths that are powers of two up to " + std::to_string(max_fft_length) +
                         ", got L1 = " + std::to_string(g.l1) + ", L2 = " + std::to_string(g.l2));
  const std::size_t shared_max = std::size_t(shared_memory_limit());
  if (g.scalar()) {
    const std::size_t bytes = scalar_layout<Real>(g, 1, false).bytes;
    if (bytes > shared_max)
      return unsupported("needs " + std::to_string(bytes) + " bytes of shared memory per block for L1 = " +
                         std::to_string(g.l1) + ", L2 = " + std::to_string(g.l2) + " in " +
                         precision_name(sizeof(Real)) + " precision; the device allows " + std::to_string(shared_max));
    return {};
  }
  const SetPlan plan = plan_pattern_sets<Real>(g, shared_max);
  if (!plan.refusal.empty()) return unsupported(plan.refusal);
  return {};
}

template <class Real>
class GpuFused final : public Convolution<Real> {
 public:
  using typename Convolution<Real>::Complex;
  using C = Cx<Real>;

  GpuFused(const Problem& geometry, Kernels kernels) : Convolution<Real>(geometry) {
    const Problem& g = this->problem_;
    const Support support = check_problem<Real>(g);
    GS_SUPPORTS(support.ok, "gpu-fused " + support.reason);
    if (g.scalar()) plan_scalar(select_kernel<Real>(g.l1, g.l2));
    else plan_pattern();
    chi_ = DeviceBuffer<double2>(g.kernels_total());
    spectra_ = DeviceBuffer<C>(std::size_t(g.slices) * g.kernels * g.l1 * g.l2);
    set_kernels(kernels);
  }

  /// Runs on the calling thread's default stream and waits for it (the new spectra are complete on
  /// return); executes in flight that read the old spectra must have been waited for by the caller.
  void set_kernels(Kernels kernels) override {
    const Problem& g = this->problem_;
    check_kernels(g, kernels);
    static_assert(sizeof(double2) == sizeof(std::complex<double>));
    chi_.upload(std::span(reinterpret_cast<const double2*>(kernels.data()), kernels.size()));
    const SpectraParams p{g.n1,  g.n2, g.l1, g.l2, axis_shape<Real>(g.l1), axis_shape<Real>(g.l2),
                          spectrum_width<Real>(g.l1)};
    spectra_kernel<Real><<<g.slices * g.kernels * g.l2, 128, 0, cudaStreamPerThread>>>(chi_.data(), spectra_.data(), p);
    GS_CUDA_CHECK_LAUNCH();
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));
  }

  void execute(const Complex* in, Complex* out, Stream stream) override {
    const Problem& g = this->problem_;
    check_execute_buffers(g, backend(), in, out, sizeof(Complex));
    if (g.scalar()) {
      FusedParams<Real> p = scalar_params_;
      p.in = reinterpret_cast<const C*>(in);
      p.out = reinterpret_cast<C*>(out);
      p.spectra = spectra_.data();
      launch_after_previous(scalar_kernel_, grid_, threads_, shared_bytes_, stream, p);
    } else {
      PatternParams<Real> p = pattern_params_;
      p.in = reinterpret_cast<const C*>(in);
      p.out = reinterpret_cast<C*>(out);
      p.spectra = spectra_.data();
      launch_after_previous(pattern_kernel_, grid_, threads_, shared_bytes_, stream, p);
    }
  }

  [[nodiscard]] Backend backend() const override { return Backend::gpu_fused; }
  /// One kernel launch on `stream`, arguments fixed by the plan and the buffers (convolution.hpp).
  [[nodiscard]] bool capturable() const override { return true; }

 private:
  /// Blocks of `ctas_per_slice` CTAs per slice (all output sets), checked against the grid limit.
  void set_grid(long ctas_per_slice) {
    const long ctas = long(this->problem_.slices) * ctas_per_slice;
    GS_SUPPORTS(ctas <= 0x7fffffffL, "gpu-fused: too many slices for one launch");
    grid_ = unsigned(ctas);
  }

  /// Rounds per CTA: fewest waves × rounds, each CTA costing about half a round to start (its spectrum,
  /// its twiddles). A spectrum read from L2 is shared by at least 4 CTAs of its slice running side by
  /// side, so that the slices in flight keep their spectra in the L2 cache (one per CTA would not fit).
  int rounds_per_cta(int rounds_total, int ctas_per_round_set, bool spectrum_shared, int kernel_per_sm) const {
    const long slots = long(sms_) * kernel_per_sm;
    const int max_rounds = spectrum_shared ? rounds_total : std::max(1, rounds_total / 4);
    int best_rounds = max_rounds;
    double best_cost = 1e300;
    for (int rounds = max_rounds; rounds >= 1; --rounds) {
      const long ctas = long(this->problem_.slices) * ctas_per_round_set * ((rounds_total + rounds - 1) / rounds);
      const double cost = double((ctas + slots - 1) / slots) * (rounds + 0.5);
      if (cost < best_cost) best_cost = cost, best_rounds = rounds;
    }
    return best_rounds;
  }

  void query_device() {
    int device = 0;
    GS_CUDA_TRY(cudaGetDevice(&device));
    GS_CUDA_TRY(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
    shared_max_ = shared_memory_limit();
  }

  /// Lets `kernel` use the device's shared memory and returns how many of its CTAs (threads_ threads,
  /// shared_bytes_ bytes) fit on one SM; refuses the plan when none does.
  template <class Kernel>
  int ctas_per_sm(Kernel kernel) const {
    GS_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_max_));
    int per_sm = 0;
    GS_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads_, shared_bytes_));
    GS_SUPPORTS(per_sm > 0, "gpu-fused: no CTA of " + std::to_string(threads_) + " threads and " +
                             std::to_string(shared_bytes_) + " bytes of shared memory fits on this device");
    return per_sm;
  }

  /// Fields per round, threads, fields per CTA and grid; the shared-memory attribute of the kernel.
  void plan_scalar(KernelChoice<Real> choice) {
    const Problem& g = this->problem_;
    const AxisShape a1 = axis_shape<Real>(g.l1);
    scalar_kernel_ = choice.kernel;
    query_device();

    // Fields per round: two columns per team (then the N1 ≈ L1/2 rows give one row per team), within
    // the shared memory.
    // Threads on one column: a team, or two (one per parity).
    const bool paired = a1.a == 1 && a1.h == 16;
    const int column_threads = g.l2 * (paired ? 2 : a1.a);
    int fields = std::clamp(2 * choice.threads / column_threads, 1, g.per_slice);
    bool stage = true;
    SharedLayout layout = scalar_layout<Real>(g, fields, stage);
    while (fields > 1 && layout.bytes > std::size_t(shared_max_)) layout = scalar_layout<Real>(g, --fields, stage);
    if (layout.bytes > std::size_t(shared_max_)) layout = scalar_layout<Real>(g, fields, stage = false);
    GS_SUPPORTS(layout.bytes <= std::size_t(shared_max_),
             "gpu-fused needs " + std::to_string(layout.bytes) + " bytes of shared memory per block for L1 = " +
                 std::to_string(g.l1) + ", L2 = " + std::to_string(g.l2) + " in " + precision_name(sizeof(Real)) +
                 " precision; the device allows " + std::to_string(shared_max_));
    // Half a column's threads per field, in whole warps: at least one warp (a lone 1x1 field too).
    threads_ = std::min(choice.threads, std::max(32, (fields * column_threads / 2 + 31) / 32 * 32));
    shared_bytes_ = layout.bytes;
    const int per_sm = ctas_per_sm(scalar_kernel_);

    const int rounds_total = (g.per_slice + fields - 1) / fields;
    const int rounds = rounds_per_cta(rounds_total, 1, spectrum_in_shared<Real>(g.l1, g.l2), per_sm);
    FusedParams<Real> p{};
    p.buf_offset = unsigned(layout.buf_offset);
    p.stage_offset = unsigned(layout.stage_offset);
    p.twiddle_offset = unsigned(layout.twiddle_offset);
    p.stage = stage ? 1 : 0;
    p.fields_per_round = fields;
    p.n1 = g.n1;
    p.n2 = g.n2;
    p.per_slice = g.per_slice;
    p.fields_per_cta = rounds * fields;
    p.ctas_per_slice = (g.per_slice + p.fields_per_cta - 1) / p.fields_per_cta;
    set_grid(p.ctas_per_slice);
    scalar_params_ = p;
  }

  /// Output sets, groups per round, threads, groups per CTA and grid (CTAs of a slice: every set's
  /// CTAs, set-major); the kernel instantiation and its shared-memory attribute.
  ///
  /// Threads: one team per column of the round's groups (at most pattern_block_threads). CTAs per SM:
  /// in complex64, two (the 128-register instantiation) where the whole plan, output sets included,
  /// fits in half an SM's shared memory and L1 ≠ 32, else one. Measured on an H100 (bench conv, the
  /// normal-vector shape, graph time, session 10): case 3 (L 64×64) complex64 one CTA of 256 threads
  /// (2 groups per round, 3 output sets, spectra in shared memory) 404 µs; two CTAs of 256 threads
  /// (1 group, 1 set of 5 slots, spectra from L2) 332 µs, of 128 threads 467 µs; the 128-register
  /// instantiation at one CTA per SM 548 µs (its spills alone). Case 1 (L 16) 16.5 → 12.6 µs with two
  /// CTAs, but case 2 (L 32, whose columns take two threads, one per parity) 55.5 → 66.0 µs: L1 = 32
  /// keeps one. complex128 (one CTA, 1 group): case 3 with 128 threads 1101 µs, 256 threads 711 µs
  /// (case 2: 138 → 99 µs); two CTAs of 128 registers 845 µs (128 threads) and 921 µs (256):
  /// complex128 keeps one CTA per SM.
  void plan_pattern() {
    const Problem& g = this->problem_;
    const AxisShape a1 = axis_shape<Real>(g.l1);
    query_device();
    const bool paired = a1.a == 1 && a1.h == 16;
    const int column_threads = g.l2 * (paired ? 2 : a1.a);
    struct Plan {
      SetPlan sets;
      int groups = 0;
      bool stage = true;
      SharedLayout layout;
      bool fits = false;
    };
    const auto plan_within = [&](std::size_t budget) {
      Plan plan;
      plan.sets = plan_pattern_sets<Real>(g, budget);
      if (!plan.sets.refusal.empty()) return plan;
      plan.groups = target_groups<Real>(g);
      const auto layout_of = [&] {
        return pattern_layout<Real>(g, plan.groups, plan.sets.slots, plan.sets.inputs, plan.stage, plan.sets.spectra);
      };
      plan.layout = layout_of();
      while (plan.groups > 1 && plan.layout.bytes > budget) --plan.groups, plan.layout = layout_of();
      if (plan.layout.bytes > budget) plan.stage = false, plan.layout = layout_of();
      plan.fits = plan.layout.bytes <= budget;
      return plan;
    };
    Plan plan;
    if constexpr (std::is_same_v<Real, float>) {
      if (g.l1 != 32) {
        plan = plan_within(std::size_t(shared_memory_two_per_sm()));
        if (plan.fits) pattern_kernel_ = select_pattern_kernel<Real, 2>(g.l1, g.l2);
      }
    }
    if (!plan.fits) {
      plan = plan_within(std::size_t(shared_max_));
      GS_SUPPORTS(plan.sets.refusal.empty(), "gpu-fused " + plan.sets.refusal);
      GS_SUPPORTS(plan.fits, "gpu-fused: the pattern's shared memory exceeds the device's");
      pattern_kernel_ = select_pattern_kernel<Real, 1>(g.l1, g.l2);
    }
    const SetPlan& sets = plan.sets;
    const int groups = plan.groups;
    const bool stage = plan.stage;
    const SharedLayout& layout = plan.layout;
    threads_ = std::min(pattern_block_threads, std::max(32, (groups * column_threads + 31) / 32 * 32));
    shared_bytes_ = layout.bytes;
    const int per_sm = ctas_per_sm(pattern_kernel_);

    const int set_count = int(sets.sets.size());
    const int rounds_total = (g.per_slice + groups - 1) / groups;
    const int rounds = rounds_per_cta(rounds_total, set_count, sets.spectra > 0, per_sm);
    PatternParams<Real> p{};
    p.n1 = g.n1;
    p.n2 = g.n2;
    p.per_slice = g.per_slice;
    p.kernels = g.kernels;
    p.inputs = g.inputs;
    p.outputs = g.outputs;
    p.sets = set_count;
    p.groups_per_round = groups;
    p.groups_per_cta = rounds * groups;
    p.ctas_per_set = (g.per_slice + p.groups_per_cta - 1) / p.groups_per_cta;
    p.slots = sets.slots;
    p.stage = stage ? 1 : 0;
    p.spectra_shared = sets.spectra > 0 ? 1 : 0;
    p.spectra_offset = unsigned(layout.spectra_offset);
    p.buf_offset = unsigned(layout.buf_offset);
    p.stage_offset = unsigned(layout.stage_offset);
    p.twiddle_offset = unsigned(layout.twiddle_offset);
    std::copy(sets.sets.begin(), sets.sets.end(), p.set);
    set_grid(long(set_count) * p.ctas_per_set);
    pattern_params_ = p;
  }

  ScalarKernel<Real> scalar_kernel_ = nullptr;
  PatternKernel<Real> pattern_kernel_ = nullptr;
  FusedParams<Real> scalar_params_{};
  PatternParams<Real> pattern_params_{};
  unsigned grid_ = 0;
  int threads_ = 0;
  std::size_t shared_bytes_ = 0;
  int sms_ = 0, shared_max_ = 0;
  DeviceBuffer<double2> chi_;  // slices·K × K1×K2, the kernels as given (complex128), input of the spectra
  DeviceBuffer<C> spectra_;    // slices·K × L1·L2, Ŝ_{p,k} in the fused kernels' layout, 1/(L1 L2) folded in
};

}  // namespace
}  // namespace fused

// Scalar problems and any pattern, within the limits of gpu_fused.cu's header (checked here against
// the current device's shared memory).
Support can_implement_gpu_fused(const Problem& g, Precision precision) {
  if (!cuda_device_present()) return unsupported("needs a CUDA device, and none is present");
  return precision == Precision::single ? fused::check_problem<float>(g) : fused::check_problem<double>(g);
}
// Device bytes: the kernels as given (complex128) and their spectra (slices·K of L1·L2); the output
// sets travel in the launch parameters.
std::size_t workspace_gpu_fused(const Problem& g, Precision precision) {
  const std::size_t c = precision == Precision::single ? 8 : 16;
  return g.kernels_total() * 16 + g.slices * g.kernels * std::size_t(g.l1) * g.l2 * c;
}

template <class Real>
Plan<Real> make_gpu_fused(const Problem& g, Kernels kernels) {
  return std::make_unique<fused::GpuFused<Real>>(g, kernels);
}
template Plan<float> make_gpu_fused<float>(const Problem&, Kernels);
template Plan<double> make_gpu_fused<double>(const Problem&, Kernels);
}  // namespace gratingsim::conv::detail
