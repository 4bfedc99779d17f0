#include "convolution/timing.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "convolution/devices.hpp"
#include "core/error.hpp"
#include "core/config.hpp"
#if GRATINGSIM_HAVE_CUDA
#include "core/cuda_check.hpp"
#endif

namespace gratingsim::conv {

double Samples::quantile(double q) const {
  GS_EXPECTS(!us.empty(), "no timing samples");
  GS_EXPECTS(q >= 0 && q <= 1, "quantile " + std::to_string(q) + " outside [0, 1]");
  std::vector<double> s = us;
  std::sort(s.begin(), s.end());
  const double position = q * double(s.size() - 1);
  const std::size_t below = std::size_t(position);
  if (below + 1 >= s.size()) return s.back();
  return s[below] + (position - double(below)) * (s[below + 1] - s[below]);
}

template <class Real>
BufferSets<Real>::BufferSets(Memory memory, std::size_t elements, int count)
    : memory_(memory), elements_(elements), count_(count) {
  GS_EXPECTS(count >= 1, "need at least one buffer set, got " + std::to_string(count));
  const std::size_t total = 2 * std::size_t(count) * elements;
  if (memory == Memory::host) {
    base_ = new Complex[total];
    const Real nan = std::numeric_limits<Real>::quiet_NaN();
    std::fill(base_, base_ + total, Complex(nan, nan));
    return;
  }
#if GRATINGSIM_HAVE_CUDA
  GS_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&base_), total * sizeof(Complex)));
  // All-ones bytes are a NaN in float and double. cudaMemset may return before it completes, hence
  // the wait: the plans' streams do not order after the legacy default stream's work.
  const cudaError_t poisoned = cudaMemset(base_, 0xff, total * sizeof(Complex));
  const cudaError_t synced = cudaDeviceSynchronize();
  if (poisoned != cudaSuccess || synced != cudaSuccess) {
    cudaFree(base_);
    GS_CUDA_TRY(poisoned);
    GS_CUDA_TRY(synced);
  }
#else
  GS_SUPPORTS(false, "device buffers need a build with CUDA");
#endif
}

template <class Real>
BufferSets<Real>::~BufferSets() {
  if (memory_ == Memory::host) {
    delete[] base_;
    return;
  }
#if GRATINGSIM_HAVE_CUDA
  cudaFree(base_);  // no throw from a destructor; a failure here means a dead context
#endif
}

template <class Real>
void BufferSets<Real>::fill_inputs(std::span<const Complex> host) {
  for (int set = 0; set < count_; ++set) fill_input(set, host);
}

template <class Real>
void BufferSets<Real>::fill_input(int set, std::span<const Complex> host) {
  GS_EXPECTS(set >= 0 && set < count_, "no buffer set " + std::to_string(set));
  GS_EXPECTS(host.size() == elements_, "input has " + std::to_string(host.size()) + " elements, buffer sets hold " +
                                        std::to_string(elements_));
  Complex* in = base_ + std::size_t(2 * set) * elements_;
  if (memory_ == Memory::host) {
    std::copy(host.begin(), host.end(), in);
    return;
  }
#if GRATINGSIM_HAVE_CUDA
  // From pageable memory cudaMemcpy may return before the copy lands, on the legacy default stream, which the
  // plans' streams do not follow: wait for it.
  GS_CUDA_TRY(cudaMemcpy(in, host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  GS_CUDA_TRY(cudaDeviceSynchronize());
#endif
}

template <class Real>
void BufferSets<Real>::read_output(int set, std::span<Complex> host) const {
  GS_EXPECTS(set >= 0 && set < count_, "no buffer set " + std::to_string(set));
  GS_EXPECTS(host.size() == elements_, "output has " + std::to_string(host.size()) + " elements, buffer sets hold " +
                                        std::to_string(elements_));
  const Complex* out = base_ + std::size_t(2 * set + 1) * elements_;
  if (memory_ == Memory::host) {
    std::copy(out, out + elements_, host.begin());
    return;
  }
#if GRATINGSIM_HAVE_CUDA
  GS_CUDA_TRY(cudaMemcpy(host.data(), out, host.size_bytes(), cudaMemcpyDeviceToHost));
#endif
}

int rotation_count(Memory memory, std::size_t set_bytes) {
  GS_EXPECTS(set_bytes > 0, "rotation_count needs a positive set size");
  std::size_t cache = 0;
  if (memory == Memory::device) {
    if (const auto device = current_cuda_device()) cache = device->l2_cache_bytes;
  } else {
    // glibc; 0 or −1 where the kernel does not say. Some CPUs report the sum over L3 slices a core
    // cannot all use (AMD: 32 MiB per core complex), hence the 64 MiB cap.
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    cache = l3 > 0 ? std::min(std::size_t(l3), std::size_t(64) << 20) : std::size_t(32) << 20;
  }
  if (cache == 0) cache = std::size_t(32) << 20;
  return static_cast<int>(std::max<std::size_t>(1, (2 * cache + set_bytes - 1) / set_bytes));
}

namespace {
double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// NaN (an unwritten or corrupted output) counts as the worst error.
double worst(double a, double b) { return std::isnan(b) ? INFINITY : std::max(a, b); }

/// Reads one set's output into `host` and records the check's verdict.
template <class Real>
void check_output(BufferSets<Real>& buffers, int set, std::vector<std::complex<Real>>& host,
                  const OutputCheck<Real>& check, Timing& timing) {
  if (!check) return;
  buffers.read_output(set, host);
  timing.max_error = worst(timing.max_error, check(set, host));
  ++timing.checked_outputs;
}

template <class Real>
void poison_on_host(BufferSets<Real>& buffers, int set) {
  const Real nan = std::numeric_limits<Real>::quiet_NaN();
  std::fill(buffers.output(set), buffers.output(set) + buffers.elements(), std::complex<Real>(nan, nan));
}

template <class Real>
Timing time_on_host(Convolution<Real>& plan, BufferSets<Real>& buffers, const TimingOptions& options,
                    const OutputCheck<Real>& check) {
  const int k = buffers.count();
  Timing timing;
  const double warmup_start = now_us();
  while (timing.warmup_runs < options.min_warmup || now_us() - warmup_start < 1e3 * options.warmup_ms) {
    const int set = timing.warmup_runs++ % k;
    plan.execute(buffers.input(set), buffers.output(set));
  }
  timing.warmup_ms = 1e-3 * (now_us() - warmup_start);
  timing.graph_note = "host plan";
  std::vector<std::complex<Real>> host(check ? buffers.elements() : 0);
  // Rounds of one execution per set: the round's outputs poisoned first (so that, with several sets,
  // an output is not in cache from its poisoning when its execution writes it), each checked after
  // its execution.
  timing.stream.us.reserve(std::size_t(options.repeats));
  for (int first = 0; first < options.repeats; first += k) {
    const int round = std::min(k, options.repeats - first);
    for (int set = 0; set < round; ++set) poison_on_host(buffers, set);
    for (int set = 0; set < round; ++set) {
      const double start = now_us();
      plan.execute(buffers.input(set), buffers.output(set));
      timing.stream.us.push_back(now_us() - start);
      ++timing.timed_executions;
      check_output(buffers, set, host, check, timing);
    }
  }
  return timing;
}

#if GRATINGSIM_HAVE_CUDA
/// A stream with `pairs` timing event pairs, a host gate, and a graph, all released on every exit path.
class DeviceTimer {
 public:
  explicit DeviceTimer(int pairs) : events_(2 * std::size_t(pairs), nullptr) {
    GS_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (auto& e : events_) GS_CUDA_TRY(cudaEventCreate(&e));
  }
  ~DeviceTimer() {
    if (gate_closed_) open_gate();
    if (stream_) cudaStreamSynchronize(stream_);
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    for (auto e : events_)
      if (e) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
  }
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;

  [[nodiscard]] cudaStream_t stream() const { return stream_; }
  [[nodiscard]] cudaEvent_t start(int r) const { return events_[2 * std::size_t(r)]; }
  [[nodiscard]] cudaEvent_t stop(int r) const { return events_[2 * std::size_t(r) + 1]; }
  [[nodiscard]] double elapsed_us(int r) const {
    float ms = 0;
    GS_CUDA_TRY(cudaEventElapsedTime(&ms, start(r), stop(r)));
    return 1e3 * double(ms);
  }

  /// Holds the stream at a host function until open_gate(): work enqueued meanwhile then runs back
  /// to back, without gaps from the host's enqueueing. (The host function touches no CUDA API.)
  void close_gate() {
    gate_open_.store(false);
    GS_CUDA_TRY(cudaLaunchHostFunc(stream_, &wait_for_gate, &gate_open_));
    gate_closed_ = true;
  }
  void open_gate() {
    gate_open_.store(true);
    gate_closed_ = false;
  }

  /// Captures `enqueue` (work on stream()) as a graph; an empty string on success, else why not.
  std::string capture(const std::function<void()>& enqueue) {
    GS_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    std::string failure;
    try {
      enqueue();
    } catch (const Error& e) {
      failure = e.what();
    }
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph_);
    if (failure.empty() && ended != cudaSuccess) failure = std::string("stream capture: ") + cudaGetErrorString(ended);
    if (failure.empty()) {
      const cudaError_t made = cudaGraphInstantiate(&exec_, graph_, 0);
      if (made != cudaSuccess) failure = std::string("graph instantiation: ") + cudaGetErrorString(made);
    }
    if (!failure.empty()) (void)cudaGetLastError();  // the refusal is reported, not left for the next call
    return failure;
  }
  void replay() const { GS_CUDA_TRY(cudaGraphLaunch(exec_, stream_)); }

 private:
  static void CUDART_CB wait_for_gate(void* flag) {
    const auto* open = static_cast<std::atomic<bool>*>(flag);
    while (!open->load()) std::this_thread::yield();
  }
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::atomic<bool> gate_open_{true};
  bool gate_closed_ = false;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

/// A graph holds one execution per buffer set; tiny problems could ask for millions of sets.
constexpr int max_graph_executions = 4096;

template <class Real>
void poison_on_device(BufferSets<Real>& buffers, int set, cudaStream_t stream) {
  // All-ones bytes are a NaN in float and double.
  GS_CUDA_TRY(cudaMemsetAsync(buffers.output(set), 0xff, buffers.elements() * sizeof(std::complex<Real>), stream));
}

template <class Real>
Timing time_on_device(Convolution<Real>& plan, BufferSets<Real>& buffers, const TimingOptions& options,
                      const OutputCheck<Real>& check) {
  const int k = buffers.count();
  DeviceTimer timer(std::max(options.repeats, 1));
  const cudaStream_t stream = timer.stream();
  Timing timing;
  const double warmup_start = now_us();
  while (timing.warmup_runs < options.min_warmup || now_us() - warmup_start < 1e3 * options.warmup_ms) {
    const int set = timing.warmup_runs++ % k;
    plan.execute(buffers.input(set), buffers.output(set), stream);
    GS_CUDA_TRY(cudaStreamSynchronize(stream));  // so that the host clock sees the device's time
  }
  timing.warmup_ms = 1e-3 * (now_us() - warmup_start);
  std::vector<std::complex<Real>> host(check ? buffers.elements() : 0);

  // Stream time: rounds of one execution per set, enqueued without a host wait, then one wait and
  // the round's outputs checked (so no output is overwritten before it is checked).
  timing.stream.us.reserve(std::size_t(options.repeats));
  for (int first = 0; first < options.repeats; first += k) {
    const int round = std::min(k, options.repeats - first);
    for (int set = 0; set < round; ++set) poison_on_device(buffers, set, stream);  // ahead, as on the host
    for (int set = 0; set < round; ++set) {
      GS_CUDA_TRY(cudaEventRecord(timer.start(first + set), stream));
      plan.execute(buffers.input(set), buffers.output(set), stream);
      GS_CUDA_TRY(cudaEventRecord(timer.stop(first + set), stream));
    }
    GS_CUDA_TRY(cudaStreamSynchronize(stream));  // errors of the executes surface here
    for (int set = 0; set < round; ++set) {
      timing.stream.us.push_back(timer.elapsed_us(first + set));
      ++timing.timed_executions;
      check_output(buffers, set, host, check, timing);
    }
  }

  if (!options.graph) {
    timing.graph_note = "not asked";
    return timing;
  }
  // Graph time: one execution per set in one graph; every output poisoned, then the replay and its
  // events behind the gate, then every output checked.
  if (k > max_graph_executions) {
    timing.graph_note = std::to_string(k) + " buffer sets, more than the " + std::to_string(max_graph_executions) +
                        " executions a timing graph holds";
    return timing;
  }
  timing.graph_note = timer.capture([&] {
    for (int set = 0; set < k; ++set) plan.execute(buffers.input(set), buffers.output(set), stream);
  });
  if (!timing.graph_note.empty()) return timing;
  timing.graph_executions = k;
  timer.replay();  // the graph's first launch uploads it: not timed
  GS_CUDA_TRY(cudaStreamSynchronize(stream));
  timing.graph.us.reserve(std::size_t(options.repeats));
  for (int r = 0; r < options.repeats; ++r) {
    for (int set = 0; set < k; ++set) poison_on_device(buffers, set, stream);
    timer.close_gate();  // only the events and the replay behind it: nothing that could fill the queue
    GS_CUDA_TRY(cudaEventRecord(timer.start(r), stream));
    timer.replay();
    GS_CUDA_TRY(cudaEventRecord(timer.stop(r), stream));
    timer.open_gate();
    GS_CUDA_TRY(cudaStreamSynchronize(stream));
    timing.graph.us.push_back(timer.elapsed_us(r) / k);
    timing.timed_executions += k;
    for (int set = 0; set < k; ++set) check_output(buffers, set, host, check, timing);
  }
  return timing;
}
#endif
}  // namespace

template <class Real>
Timing time_execute(Convolution<Real>& plan, BufferSets<Real>& buffers, const TimingOptions& options,
                    const OutputCheck<Real>& check) {
  GS_EXPECTS(options.repeats >= 1 && options.min_warmup >= 0 && options.warmup_ms >= 0,
          "timing needs repeats >= 1, min_warmup >= 0 and warmup_ms >= 0, got " + std::to_string(options.repeats) +
              ", " + std::to_string(options.min_warmup) + " and " + std::to_string(options.warmup_ms));
  GS_EXPECTS(buffers.memory() == plan.memory(), "buffer sets are not in the memory the plan executes on");
  // One size for inputs and outputs: a pattern's P output blocks per group may outnumber its Q inputs.
  const std::size_t needed = std::max(plan.problem().input_size(), plan.problem().output_size());
  GS_EXPECTS(buffers.elements() >= needed, "buffer sets hold " + std::to_string(buffers.elements()) +
                                            " elements, the plan needs " + std::to_string(needed));
  if (plan.memory() == Memory::host) return time_on_host(plan, buffers, options, check);
#if GRATINGSIM_HAVE_CUDA
  return time_on_device(plan, buffers, options, check);
#else
  GS_SUPPORTS(false, "timing a GPU plan needs a build with CUDA");
#endif
}

struct Timeline::Events {
#if GRATINGSIM_HAVE_CUDA
  std::vector<cudaEvent_t> events;
  ~Events() {
    for (auto e : events)
      if (e) cudaEventDestroy(e);
  }
#endif
};

Timeline::Timeline(Memory memory, Stream stream, int capacity)
    : memory_(memory), stream_(stream), capacity_(capacity), events_(std::make_unique<Events>()) {
  GS_EXPECTS(capacity >= 1, "a timeline needs a capacity of at least 1, got " + std::to_string(capacity));
  if (memory == Memory::host) {
    host_us_.resize(std::size_t(capacity));
    return;
  }
#if GRATINGSIM_HAVE_CUDA
  events_->events.assign(std::size_t(capacity), nullptr);
  for (auto& e : events_->events) GS_CUDA_TRY(cudaEventCreate(&e));
#else
  GS_SUPPORTS(false, "timing device work needs a build with CUDA");
#endif
}

Timeline::~Timeline() = default;

int Timeline::mark() {
  GS_EXPECTS(count_ < capacity_, "timeline full: " + std::to_string(capacity_) + " marks");
  if (memory_ == Memory::host) {
    host_us_[std::size_t(count_)] = now_us();
  } else {
#if GRATINGSIM_HAVE_CUDA
    GS_CUDA_TRY(cudaEventRecord(events_->events[std::size_t(count_)], stream_));
#endif
  }
  synchronized_ = false;
  return count_++;
}

double Timeline::elapsed_us(int from, int to) {
  GS_EXPECTS(from >= 0 && to >= 0 && from < count_ && to < count_,
          "no marks " + std::to_string(from) + " and " + std::to_string(to) + " among " + std::to_string(count_));
  if (memory_ == Memory::host) return host_us_[std::size_t(to)] - host_us_[std::size_t(from)];
  double elapsed = 0;
#if GRATINGSIM_HAVE_CUDA
  if (!synchronized_) {
    GS_CUDA_TRY(cudaStreamSynchronize(stream_));
    synchronized_ = true;
  }
  float ms = 0;
  GS_CUDA_TRY(cudaEventElapsedTime(&ms, events_->events[std::size_t(from)], events_->events[std::size_t(to)]));
  elapsed = 1e3 * double(ms);
#endif
  return elapsed;
}

template <class Real>
std::vector<std::complex<double>> random_complex(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<std::complex<double>> v(n);
  for (auto& z : v) {
    const Real re = Real(u(engine)), im = Real(u(engine));
    z = {re, im};
  }
  return v;
}

template class BufferSets<float>;
template class BufferSets<double>;
template Timing time_execute<float>(Convolution<float>&, BufferSets<float>&, const TimingOptions&,
                                    const OutputCheck<float>&);
template Timing time_execute<double>(Convolution<double>&, BufferSets<double>&, const TimingOptions&,
                                     const OutputCheck<double>&);
template std::vector<std::complex<double>> random_complex<float>(std::size_t, std::uint64_t);
template std::vector<std::complex<double>> random_complex<double>(std::size_t, std::uint64_t);

}  // namespace gratingsim::conv
