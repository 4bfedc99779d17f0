#pragma once
// Timing a plan's execute(): warm-up, then many repetitions, each on the next of several buffer sets
// so that an execution does not find its inputs in cache from the previous one. Used by the benchmark
// and by the `auto` backend choice; knows nothing of physics.
//
// GPU plans are timed with a pair of CUDA events around each execute() on a private non-blocking
// stream; the host waits once, on the stream, after the last repetition. CPU plans are timed with
// std::chrono::steady_clock around each (synchronous) execute().
#include <complex>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "convolution/convolution.hpp"

namespace gratingsim::conv {

struct TimingOptions {
  int warmup = 3;    ///< untimed executions first (plan caches, clocks, page faults)
  int repeats = 30;  ///< timed executions, one sample each
};

/// One sample per timed execution, in microseconds, in the order taken.
struct Timing {
  std::vector<double> samples_us;
  [[nodiscard]] double median_us() const;
  [[nodiscard]] double min_us() const;
  [[nodiscard]] double max_us() const;
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

  /// Copies the same host data into every set's input (so one reference checks every output).
  /// Synchronous: the data is in place when this returns.
  void fill_inputs(std::span<const Complex> host);
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

/// Times plan.execute(buffers.input(i % k), buffers.output(i % k)) (buffers of at least the plan's
/// input and output sizes: a pattern's output may be larger than its input) for options.warmup untimed and
/// options.repeats timed executions i = 0, 1, ..., k = buffers.count(); so the outputs of sets
/// 0 .. min(k, warmup + repeats) − 1 are written. Allocates events and a stream for GPU plans, and
/// waits for all of its device work before returning.
template <class Real>
Timing time_execute(Convolution<Real>& plan, BufferSets<Real>& buffers, const TimingOptions& options);

/// n complex values with real and imaginary parts uniform in [−1, 1), each rounded to Real and
/// returned in complex128 (the form kernels are passed in, and what a reference should see).
template <class Real>
std::vector<std::complex<double>> random_complex(std::size_t n, std::uint64_t seed);

}  // namespace gratingsim::conv
