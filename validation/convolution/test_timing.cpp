// The timing utility (convolution/timing.hpp): order statistics, the time-based warm-up, rotation
// over buffer sets with distinct inputs, and that every timed execution's output is checked: a fault
// injected into any one timed execution (a corrupted or an unwritten output) is caught.
#include <chrono>
#include <cmath>
#include <complex>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "convolution/timing.hpp"
#include "validation/convolution/faulty_convolution.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;

namespace {

constexpr double tolerance = 1e-12;  // complex128 plans against a complex128 reference

/// Distinct random inputs for each of `sets` buffer sets and their outputs from cpu-direct
/// (complex128, the defining sum): a checker as the benchmark builds one.
struct Fixture {
  conv::Problem g{.n1 = 5, .n2 = 3, .slices = 3, .per_slice = 4};
  std::vector<std::complex<double>> kernels = conv::random_complex<double>(g.kernels_total(), test::rng()());
  std::vector<std::vector<std::complex<double>>> inputs, expects;

  explicit Fixture(int sets) {
    auto reference = conv::make_convolution<double>(conv::Backend::cpu_direct, g, kernels);
    for (int s = 0; s < sets; ++s) {
      inputs.push_back(conv::random_complex<double>(g.input_size(), test::rng()()));
      expects.emplace_back(g.output_size());
      reference->execute(inputs.back().data(), expects.back().data());
    }
  }
  void fill(conv::BufferSets<double>& buffers) const {
    for (int s = 0; s < buffers.count(); ++s) buffers.fill_input(s, inputs[std::size_t(s)]);
  }
  /// Relative l2 error of the whole output against the reference of its set's input.
  [[nodiscard]] conv::OutputCheck<double> check() const {
    return [this](int set, std::span<const std::complex<double>> out) {
      return test::relative_l2<double, double>(out.first(g.output_size()), expects[std::size_t(set)]);
    };
  }
};

}  // namespace

TEST_CASE("samples: quantiles interpolate between order statistics", "[timing]") {
  conv::Samples t{{4.0, 1.0, 3.0, 2.0}};
  CHECK(t.median() == 2.5);
  CHECK(t.min() == 1.0);
  CHECK(t.max() == 4.0);
  CHECK(t.quantile(0.25) == 1.75);
  CHECK(t.quantile(0.75) == 3.25);
  t.us.push_back(10.0);
  CHECK(t.median() == 3.0);
  CHECK_THROWS_AS(conv::Samples{}.median(), InvalidArgument);
  CHECK_THROWS_AS(t.quantile(1.5), InvalidArgument);
}

TEST_CASE("time_execute: distinct inputs per buffer set, every timed output checked", "[timing]") {
  const int sets = 3, repeats = 7;  // rounds of 3, 3, 1: sets 0 and 1 written three times, set 2 twice
  const Fixture f(sets);
  auto plan = conv::make_convolution<double>(conv::Backend::cpu_direct, f.g, f.kernels);
  conv::BufferSets<double> buffers(Memory::host, f.g.input_size(), sets);
  f.fill(buffers);
  std::vector<int> checked_sets;
  const auto check = f.check();
  const conv::Timing t = conv::time_execute<double>(
      *plan, buffers, {.warmup_ms = 0, .min_warmup = 2, .repeats = repeats},
      [&](int set, std::span<const std::complex<double>> out) {
        checked_sets.push_back(set);
        return check(set, out);
      });
  CHECK(t.warmup_runs == 2);
  REQUIRE(t.stream.us.size() == std::size_t(repeats));
  CHECK(t.graph.empty());  // a host plan has no graph time
  CHECK(t.stream.min() > 0);
  CHECK(t.timed_executions == repeats);
  CHECK(t.checked_outputs == repeats);
  CHECK(checked_sets == std::vector<int>{0, 1, 2, 0, 1, 2, 0});
  CHECK(t.max_error <= tolerance);

  // Without a check nothing is checked, and the count says so.
  const conv::Timing unchecked = conv::time_execute(*plan, buffers, {.warmup_ms = 0, .repeats = 3});
  CHECK(unchecked.checked_outputs == 0);
  CHECK(unchecked.timed_executions == 3);

  CHECK(conv::rotation_count(Memory::host, 1) >= 2);
  CHECK(conv::rotation_count(Memory::host, std::size_t(1) << 40) == 1);
}

TEST_CASE("time_execute: the warm-up lasts at least warmup_ms", "[timing]") {
  const Fixture f(1);
  auto plan = conv::make_convolution<double>(conv::Backend::cpu_direct, f.g, f.kernels);
  conv::BufferSets<double> buffers(Memory::host, f.g.input_size(), 1);
  f.fill(buffers);
  const conv::Timing t = conv::time_execute(*plan, buffers, {.warmup_ms = 30, .min_warmup = 1, .repeats = 2});
  CHECK(t.warmup_ms >= 30);
  CHECK(t.warmup_runs >= 1);
}

TEST_CASE("time_execute: a fault in any one timed execution is caught", "[timing]") {
  const int sets = 2, repeats = 5, warmup = 2;
  const Fixture f(sets);
  for (const conv::Backend backend : {conv::Backend::cpu_direct, conv::Backend::cpu_fftw}) {
    if (!conv::backend_available(backend)) continue;
    for (const auto fault : {test::FaultyConvolution<double>::Fault::corrupt, test::FaultyConvolution<double>::Fault::skip}) {
      // Call 0 never happens: the control run, which must pass (so the others can only fail for the fault).
      for (long long timed = -1; timed < repeats; ++timed) {
        const long long call = timed < 0 ? 0 : warmup + timed + 1;
        CAPTURE(conv::to_string(backend), int(fault), timed);
        test::FaultyConvolution<double> plan(conv::make_convolution<double>(backend, f.g, f.kernels), call, fault,
                                             [&](std::complex<double>* out, Stream) {
                                               out[f.g.output_size() / 2] += std::complex<double>(1e-3, 0);
                                             });
        conv::BufferSets<double> buffers(Memory::host, f.g.input_size(), sets);
        f.fill(buffers);
        // Every set written once before timing, so a skipped execution leaves a correct-looking
        // output behind unless the poison before each timed execution replaced it.
        for (int s = 0; s < sets; ++s) {
          auto clean = conv::make_convolution<double>(conv::Backend::cpu_direct, f.g, f.kernels);
          clean->execute(buffers.input(s), buffers.output(s));
        }
        const conv::Timing t =
            conv::time_execute<double>(plan, buffers, {.warmup_ms = 0, .min_warmup = warmup, .repeats = repeats}, f.check());
        REQUIRE(t.warmup_runs == warmup);
        CHECK(plan.calls() == warmup + repeats);
        CHECK(t.checked_outputs == repeats);
        if (timed < 0)
          CHECK(t.max_error <= tolerance);
        else
          CHECK(t.max_error > tolerance);
      }
    }
  }
}

TEST_CASE("timeline: host marks and the time between them, no more than its capacity", "[timing]") {
  conv::Timeline timeline(Memory::host, nullptr, 3);
  const int first = timeline.mark();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const int second = timeline.mark();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const int third = timeline.mark();
  CHECK(timeline.count() == 3);
  CHECK(timeline.elapsed_us(first, second) >= 3000);
  CHECK(timeline.elapsed_us(first, third) >= 6000);
  CHECK(std::abs(timeline.elapsed_us(first, second) + timeline.elapsed_us(second, third) - timeline.elapsed_us(first, third)) < 1e-3);
  CHECK(timeline.elapsed_us(first, third) < 1e6);
  CHECK_THROWS_AS(timeline.mark(), InvalidArgument);
  CHECK_THROWS_AS(timeline.elapsed_us(0, 3), InvalidArgument);
  timeline.reset();
  CHECK(timeline.count() == 0);
}
