#pragma once
// Timing a plan's execute(): a time-based warm-up, then many repetitions, each on the next of several
// buffer sets so that an execution does not find its inputs in cache from the previous one; every
// timed output poisoned before its execution and (given a check) checked after it, outside the timed
// region. Used by the benchmark and by the `auto` backend choice; knows nothing of physics.
//
// Two clocks (docs/convolution.md §7):
// - stream time, per execution: CPU plans, std::chrono::steady_clock around each (synchronous)
//   execute(); GPU plans, a pair of CUDA events around each execute() on a private non-blocking
//   stream, the executions of a round (one per buffer set) enqueued without a host wait, so a sample
//   includes the launch gaps when the host enqueues slower than the device runs (as in real use);
// - graph time (GPU plans only), per execution: the executions of all buffer sets captured once in a
//   CUDA graph; each replay is enqueued behind a host gate (the stream holds until the replay and its
//   events are enqueued), so the events around it measure device time only, divided by the sets.
#include <complex>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"

namespace gratingsim::conv {

struct TimingOptions {
  /// Untimed executions until this much wall time has passed (and at least min_warmup): module
  /// loading, plan caches, page faults, and the GPU's clocks ramping up from idle.
  double warmup_ms = 200;
  int min_warmup = 1;
  int repeats = 30;    ///< timed executions (stream time), and timed graph replays on a GPU
  bool graph = true;   ///< GPU plans: also take the graph time
};

/// Samples in microseconds, in the order taken, and their order statistics.
struct Samples {
  std::vector<double> us;
  [[nodiscard]] bool empty() const { return us.empty(); }
  /// Linear interpolation between order statistics (q = 0.5: the median; 0.25, 0.75: the quartiles).
  [[nodiscard]] double quantile(double q) const;
  [[nodiscard]] double median() const { return quantile(0.5); }
  [[nodiscard]] double min() const { return quantile(0); }
  [[nodiscard]] double max() const { return quantile(1); }
};

/// What time_execute measured and what it verified.
struct Timing {
  Samples stream;           ///< per execution: host clock (CPU) or CUDA events on a stream (GPU)
  Samples graph;            ///< GPU: per execution, graph replay time / buffer sets; empty otherwise
  std::string graph_note;   ///< why a GPU plan has no graph time (capture refused, or not asked)
  int graph_executions = 0; ///< executions per graph replay (the buffer sets)
  int warmup_runs = 0;
  double warmup_ms = 0;
  /// Timed executions (stream samples + graph replays × graph_executions), and how many of their
  /// outputs the check saw (all of them when a check was given, else 0).
  long long timed_executions = 0, checked_outputs = 0;
  double max_error = 0;  ///< largest value the check returned; +inf for NaN
};

/// `count` pairs of input and output buffers of `elements` each, in host or device memory, allocated
/// once. Outputs start as NaN, so one that no execution wrote fails any comparison.
template <class Real>
class BufferSets {
 public:
  using Complex = std::complex<Real>;
  BufferSets(Memory memory, std::size_t elements, int count);
  ~BufferSets();
  BufferSets(const BufferSets&) = delete;
  BufferSets& operator=(const BufferSets&) = delete;

  [[nodiscard]] Memory memory() const { return memory_; }
  [[nodiscard]] std::size_t elements() const { return elements_; }
  [[nodiscard]] int count() const { return count_; }
  [[nodiscard]] const Complex* input(int set) const { return base_ + std::size_t(2 * set) * elements_; }
  [[nodiscard]] Complex* output(int set) { return base_ + std::size_t(2 * set + 1) * elements_; }

  /// Copies the same host data into every set's input. Synchronous.
  void fill_inputs(std::span<const Complex> host);
  /// Copies host data into one set's input (distinct inputs per set: each needs its own reference).
  /// Synchronous.
  void fill_input(int set, std::span<const Complex> host);
  /// Copies one set's output to the host; synchronous (cudaMemcpy on the legacy default stream, which
  /// waits for the device work ordered before it; time_execute has already waited for its stream).
  void read_output(int set, std::span<Complex> host) const;

 private:
  Memory memory_;
  std::size_t elements_;
  int count_;
  Complex* base_ = nullptr;  // 2·count·elements: input 0, output 0, input 1, output 1, ...
};

/// How many buffer sets of `set_bytes` to rotate through: enough that together they are at least
/// twice the last-level cache in front of that memory (GPU L2; host L3 up to 64 MiB), so an
/// execution reads inputs evicted since they were last touched (at least 1).
int rotation_count(Memory memory, std::size_t set_bytes);

/// Checks one output after its timed execution, outside the timed region: `set` is the buffer set the
/// execution wrote, `output` its buffer copied to the host. Returns an error measure (the benchmark:
/// the largest relative l2 error per block against the reference of that set's input); NaN counts as
/// +inf.
template <class Real>
using OutputCheck = std::function<double(int set, std::span<const std::complex<Real>> output)>;

/// Times plan.execute(buffers.input(s), buffers.output(s)) (buffers of at least the plan's input and
/// output sizes: a pattern's output may be larger than its input):
/// - warm-up: executions on sets 0, 1, ... until options.warmup_ms have passed and at least
///   options.min_warmup ran;
/// - stream time: options.repeats executions in rounds of one per set (0, 1, ..., k − 1, 0, ...);
///   the round's outputs poisoned (NaN) before the round (GPU: memsets enqueued before its first start
///   event), each output read and checked after its execution (GPU: after the round);
/// - graph time (GPU plans, options.graph, at most 4096 sets): a graph of one execution per set,
///   replayed options.repeats times, all outputs poisoned before and checked after every replay.
/// So with a check, every timed execution's output is checked. Allocates events, a stream and a
/// graph for GPU plans, and waits for all of its device work before returning.
template <class Real>
Timing time_execute(Convolution<Real>& plan, BufferSets<Real>& buffers, const TimingOptions& options,
                    const OutputCheck<Real>& check = {});

/// Timestamps of work enqueued on one stream (or run on the host), read after the work: for timing
/// the stages of a real solve without a host wait per stage. GPU (Memory::device): a CUDA event per
/// mark, recorded on `stream`, so the times are the device's timeline (including any time the device
/// waits for the host); host: steady clock.
class Timeline {
 public:
  Timeline(Memory memory, Stream stream, int capacity);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  /// Records a timestamp now (host) or when the stream reaches it (GPU); returns its index.
  /// Throws InvalidArgument beyond `capacity` marks.
  int mark();
  /// µs from mark `from` to mark `to`; on a GPU the first read waits for the stream.
  [[nodiscard]] double elapsed_us(int from, int to);
  [[nodiscard]] int count() const { return count_; }
  void reset() { count_ = 0, synchronized_ = false; }

 private:
  struct Events;
  Memory memory_;
  Stream stream_;
  int capacity_, count_ = 0;
  bool synchronized_ = false;
  std::vector<double> host_us_;
  std::unique_ptr<Events> events_;
};

/// n complex values with real and imaginary parts uniform in [−1, 1), each rounded to Real and
/// returned in complex128 (the form kernels are passed in, and what a reference should see).
template <class Real>
std::vector<std::complex<double>> random_complex(std::size_t n, std::uint64_t seed);

}  // namespace gratingsim::conv
