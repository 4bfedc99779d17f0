#include "convolution/timing.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>

#include "convolution/devices.hpp"
#include "convolution/error.hpp"
#ifdef GRATINGSIM_HAVE_CUDA
#include "convolution/cuda_check.hpp"
#endif

namespace gratingsim::conv {

double Timing::median_us() const {
  EXPECTS(!samples_us.empty(), "no timing samples");
  std::vector<double> s = samples_us;
  const std::size_t mid = s.size() / 2;
  std::nth_element(s.begin(), s.begin() + mid, s.end());
  if (s.size() % 2) return s[mid];
  return 0.5 * (s[mid] + *std::max_element(s.begin(), s.begin() + mid));
}
double Timing::min_us() const {
  EXPECTS(!samples_us.empty(), "no timing samples");
  return *std::min_element(samples_us.begin(), samples_us.end());
}
double Timing::max_us() const {
  EXPECTS(!samples_us.empty(), "no timing samples");
  return *std::max_element(samples_us.begin(), samples_us.end());
}

template <class Real>
BufferSets<Real>::BufferSets(Memory memory, std::size_t elements, int count)
    : memory_(memory), elements_(elements), count_(count) {
  EXPECTS(count >= 1, "need at least one buffer set, got " + std::to_string(count));
  const std::size_t total = 2 * std::size_t(count) * elements;
  if (memory == Memory::host) {
    base_ = new Complex[total];
    const Real nan = std::numeric_limits<Real>::quiet_NaN();
    std::fill(base_, base_ + total, Complex(nan, nan));
    return;
  }
#ifdef GRATINGSIM_HAVE_CUDA
  CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&base_), total * sizeof(Complex)));
  // All-ones bytes are a NaN in float and double. cudaMemset may return before it completes, hence
  // the wait: the plans' streams do not order after the legacy default stream's work.
  const cudaError_t poisoned = cudaMemset(base_, 0xff, total * sizeof(Complex));
  const cudaError_t synced = cudaDeviceSynchronize();
  if (poisoned != cudaSuccess || synced != cudaSuccess) {
    cudaFree(base_);
    CUDA_TRY(poisoned);
    CUDA_TRY(synced);
  }
#else
  SUPPORTS(false, "device buffers need a build with CUDA");
#endif
}

template <class Real>
BufferSets<Real>::~BufferSets() {
  if (memory_ == Memory::host) {
    delete[] base_;
    return;
  }
#ifdef GRATINGSIM_HAVE_CUDA
  cudaFree(base_);  // no throw from a destructor; a failure here means a dead context
#endif
}

template <class Real>
void BufferSets<Real>::fill_inputs(std::span<const Complex> host) {
  EXPECTS(host.size() == elements_, "input has " + std::to_string(host.size()) + " elements, buffer sets hold " +
                                        std::to_string(elements_));
  for (int s = 0; s < count_; ++s) {
    Complex* in = base_ + std::size_t(2 * s) * elements_;
    if (memory_ == Memory::host) {
      std::copy(host.begin(), host.end(), in);
      continue;
    }
#ifdef GRATINGSIM_HAVE_CUDA
    CUDA_TRY(cudaMemcpy(in, host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
#endif
  }
}

template <class Real>
void BufferSets<Real>::read_output(int set, std::span<Complex> host) const {
  EXPECTS(set >= 0 && set < count_, "no buffer set " + std::to_string(set));
  EXPECTS(host.size() == elements_, "output has " + std::to_string(host.size()) + " elements, buffer sets hold " +
                                        std::to_string(elements_));
  const Complex* out = base_ + std::size_t(2 * set + 1) * elements_;
  if (memory_ == Memory::host) {
    std::copy(out, out + elements_, host.begin());
    return;
  }
#ifdef GRATINGSIM_HAVE_CUDA
  CUDA_TRY(cudaMemcpy(host.data(), out, host.size_bytes(), cudaMemcpyDeviceToHost));
#endif
}

int rotation_count(Memory memory, std::size_t set_bytes) {
  EXPECTS(set_bytes > 0, "rotation_count needs a positive set size");
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
template <class Real>
Timing time_on_host(Convolution<Real>& plan, BufferSets<Real>& buffers, const TimingOptions& options) {
  const int k = buffers.count();
  for (int i = 0; i < options.warmup; ++i) plan.execute(buffers.input(i % k), buffers.output(i % k));
  Timing timing;
  timing.samples_us.reserve(std::size_t(options.repeats));
  for (int r = 0; r < options.repeats; ++r) {
    const int set = (options.warmup + r) % k;
    const auto start = std::chrono::steady_clock::now();
    plan.execute(buffers.input(set), buffers.output(set));
    const auto stop = std::chrono::steady_clock::now();
    timing.samples_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  return timing;
}

#ifdef GRATINGSIM_HAVE_CUDA
/// A non-blocking stream and 2·repeats timing events, released on every exit path.
class EventTimer {
 public:
  explicit EventTimer(int repeats) : events_(2 * std::size_t(repeats), nullptr) {
    CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (auto& e : events_) CUDA_TRY(cudaEventCreate(&e));
  }
  ~EventTimer() {
    for (auto e : events_)
      if (e) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  [[nodiscard]] cudaStream_t stream() const { return stream_; }
  [[nodiscard]] cudaEvent_t start(int r) const { return events_[2 * std::size_t(r)]; }
  [[nodiscard]] cudaEvent_t stop(int r) const { return events_[2 * std::size_t(r) + 1]; }

 private:
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
};

template <class Real>
Timing time_on_device(Convolution<Real>& plan, BufferSets<Real>& buffers, const TimingOptions& options) {
  const int k = buffers.count();
  EventTimer timer(options.repeats);
  for (int i = 0; i < options.warmup; ++i) plan.execute(buffers.input(i % k), buffers.output(i % k), timer.stream());
  // Everything is enqueued without a host wait, so the device runs the repetitions back to back
  // whenever the host enqueues faster than the device executes. A sample is the device time between
  // its two events, launch gaps included when the host is the slower side (as in real use).
  for (int r = 0; r < options.repeats; ++r) {
    const int set = (options.warmup + r) % k;
    CUDA_TRY(cudaEventRecord(timer.start(r), timer.stream()));
    plan.execute(buffers.input(set), buffers.output(set), timer.stream());
    CUDA_TRY(cudaEventRecord(timer.stop(r), timer.stream()));
  }
  CUDA_TRY(cudaStreamSynchronize(timer.stream()));  // the one host wait; errors of the executes surface here
  Timing timing;
  timing.samples_us.reserve(std::size_t(options.repeats));
  for (int r = 0; r < options.repeats; ++r) {
    float ms = 0;
    CUDA_TRY(cudaEventElapsedTime(&ms, timer.start(r), timer.stop(r)));
    timing.samples_us.push_back(1e3 * double(ms));
  }
  return timing;
}
#endif
}  // namespace

template <class Real>
Timing time_execute(Convolution<Real>& plan, BufferSets<Real>& buffers, const TimingOptions& options) {
  EXPECTS(options.repeats >= 1 && options.warmup >= 0,
          "timing needs repeats >= 1 and warmup >= 0, got " + std::to_string(options.repeats) + " and " +
              std::to_string(options.warmup));
  EXPECTS(buffers.memory() == plan.memory(), "buffer sets are not in the memory the plan executes on");
  // One size for inputs and outputs: a pattern's P output blocks per group may outnumber its Q inputs.
  const std::size_t needed = std::max(plan.problem().input_size(), plan.problem().output_size());
  EXPECTS(buffers.elements() >= needed, "buffer sets hold " + std::to_string(buffers.elements()) +
                                            " elements, the plan needs " + std::to_string(needed));
  if (plan.memory() == Memory::host) return time_on_host(plan, buffers, options);
#ifdef GRATINGSIM_HAVE_CUDA
  return time_on_device(plan, buffers, options);
#else
  SUPPORTS(false, "timing a GPU plan needs a build with CUDA");
#endif
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
template Timing time_execute<float>(Convolution<float>&, BufferSets<float>&, const TimingOptions&);
template Timing time_execute<double>(Convolution<double>&, BufferSets<double>&, const TimingOptions&);
template std::vector<std::complex<double>> random_complex<float>(std::size_t, std::uint64_t);
template std::vector<std::complex<double>> random_complex<double>(std::size_t, std::uint64_t);

}  // namespace gratingsim::conv
