// The timing utility on GPU plans (convolution/timing.hpp): stream time and graph time both taken,
// every timed output checked in both, so a fault injected into any one timed execution (a corrupted or
// an unwritten output) is caught, whether it happens in a stream round or inside the captured graph.
#include <cmath>
#include <complex>
#include <vector>

#include "core/cuda_check.hpp"
#include "convolution/timing.hpp"
#include "validation/convolution/faulty_convolution.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using Fault = test::FaultyConvolution<float>::Fault;

TEST_CASE("GPU time_execute: every timed output checked, a fault in any execution caught", "[timing][gpu]") {
  const conv::Problem g{.n1 = 7, .n2 = 7, .slices = 3, .per_slice = 5};
  const auto kernels = conv::random_complex<float>(g.kernels_total(), test::rng()());
  const int sets = 2, repeats = 3, warmup = 2;
  // Distinct inputs per set, each with its complex128 cpu-direct reference.
  auto reference = conv::make_convolution<double>(conv::Backend::cpu_direct, g, kernels);
  std::vector<std::vector<std::complex<float>>> inputs;
  std::vector<std::vector<std::complex<double>>> expects;
  for (int s = 0; s < sets; ++s) {
    const auto wide = conv::random_complex<float>(g.input_size(), test::rng()());
    inputs.emplace_back(wide.begin(), wide.end());
    expects.emplace_back(g.output_size());
    reference->execute(wide.data(), expects.back().data());
  }
  const conv::OutputCheck<float> check = [&](int set, std::span<const std::complex<float>> out) {
    return test::relative_l2<float, double>(out.first(g.output_size()), expects[std::size_t(set)]);
  };
  const double tolerance = 1e-5;
  const long long stream_calls = warmup + repeats, all_calls = stream_calls + sets;  // then the graph capture

  for (const conv::Backend backend : {conv::Backend::gpu_cufft, conv::Backend::gpu_cufft_callbacks,
                                      conv::Backend::gpu_fused, conv::Backend::gpu_direct}) {
    if (!conv::backend_available(backend)) continue;
    for (const Fault fault : {Fault::corrupt, Fault::skip}) {
      // Call 0 never happens: the control, which must pass. Calls warmup+1 .. stream_calls are the
      // stream rounds; the last `sets` calls are captured into the graph and so happen in every replay.
      for (long long call = 0; call <= all_calls; call = call == 0 ? warmup + 1 : call + 1) {
        CAPTURE(conv::to_string(backend), int(fault), call);
        test::FaultyConvolution<float> plan(conv::make_convolution<float>(backend, g, kernels), call, fault,
                                            [&](std::complex<float>* out, Stream stream) {
                                              GS_CUDA_TRY(cudaMemsetAsync(out + g.output_size() / 2, 0,
                                                                       sizeof(std::complex<float>), stream));
                                            });
        conv::BufferSets<float> buffers(Memory::device, g.input_size(), sets);
        for (int s = 0; s < sets; ++s) buffers.fill_input(s, inputs[std::size_t(s)]);
        const conv::Timing t = conv::time_execute<float>(
            plan, buffers, {.warmup_ms = 0, .min_warmup = warmup, .repeats = repeats, .graph = true}, check);
        REQUIRE(t.warmup_runs == warmup);
        REQUIRE(t.graph_note.empty());
        CHECK(plan.calls() == all_calls);
        CHECK(t.graph_executions == sets);
        CHECK(t.stream.us.size() == std::size_t(repeats));
        CHECK(t.graph.us.size() == std::size_t(repeats));
        CHECK(t.graph.min() > 0);
        CHECK(t.timed_executions == repeats + repeats * sets);
        CHECK(t.checked_outputs == t.timed_executions);
        if (call == 0)
          CHECK(t.max_error <= tolerance);
        else
          CHECK(t.max_error > tolerance);
      }
    }
  }
}

TEST_CASE("GPU timeline: event marks on a stream around executions", "[timing][gpu]") {
  cudaStream_t stream = nullptr;
  GS_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const conv::Problem g{.n1 = 31, .n2 = 31, .slices = 8, .per_slice = 24};
  auto plan = conv::make_convolution<float>(conv::Backend::gpu_cufft, g, conv::random_complex<float>(g.kernels_total(), 1));
  conv::BufferSets<float> buffers(Memory::device, g.input_size(), 1);
  conv::Timeline timeline(Memory::device, reinterpret_cast<Stream>(stream), 3);
  const int start = timeline.mark();
  plan->execute(buffers.input(0), buffers.output(0), reinterpret_cast<Stream>(stream));
  const int middle = timeline.mark();
  plan->execute(buffers.input(0), buffers.output(0), reinterpret_cast<Stream>(stream));
  const int stop = timeline.mark();
  const double whole = timeline.elapsed_us(start, stop);
  CHECK(whole > 0);
  CHECK(whole < 1e6);
  CHECK(timeline.elapsed_us(start, middle) > 0);
  // Event times resolve about 0.5 µs.
  CHECK(std::abs(timeline.elapsed_us(start, middle) + timeline.elapsed_us(middle, stop) - whole) < 2.0);
  CHECK_THROWS(timeline.mark());
  GS_CUDA_TRY(cudaStreamDestroy(stream));
}
