// gpu-cufft beyond the shared harness (test_gpu_backends.cpp): an explicit non-blocking stream, kernels
// replaced between runs, shapes the harness lacks (non-power-of-two L, a 1D grating with L2 > 1, a batch
// beyond the grid's y limit of 65535), an analytic shift, and argument errors; problems with patterns (the
// NV patterns and random ones on 1D and 2D shapes, on a stream, kernels replaced, a large batch).
#include <complex>
#include <string>
#include <vector>

#include "convolution/cufft_plans.hpp"
#include "core/error.hpp"
#include "validation/convolution/gpu_test_support.hpp"
#include "validation/convolution/pattern_cases.hpp"

using namespace gratingsim;
using conv::Backend;
using conv::Problem;

TEMPLATE_TEST_CASE("gpu-cufft equals cpu-direct on every harness geometry", "[convolution][gpu-cufft]", float, double) {
  // The shared harness runs all GPU backends in one test case; this one does not depend on the others.
  for (const auto& c : test::backend_test_geometries()) test::check_backend_against_direct<TestType>(Backend::gpu_cufft, c);
}

TEMPLATE_TEST_CASE("gpu-cufft runs on a non-blocking stream, twice back to back", "[convolution][gpu-cufft]", float,
                   double) {
  test::check_two_executes_in_flight<TestType>(Backend::gpu_cufft, {.n1 = 15, .n2 = 15, .slices = 3, .per_slice = 6});
}

TEMPLATE_TEST_CASE("gpu-cufft set_kernels replaces the spectra", "[convolution][gpu-cufft]", float, double) {
  const Problem g{.n1 = 7, .n2 = 9, .slices = 4, .per_slice = 3};
  const test::TestStream stream;
  test::check_stream_and_new_kernels<TestType>(Backend::gpu_cufft, g, stream.get());
}

TEMPLATE_TEST_CASE("gpu-cufft on shapes beyond the harness", "[convolution][gpu-cufft]", float, double) {
  test::check_shapes_beyond_harness<TestType>(Backend::gpu_cufft);
}

TEMPLATE_TEST_CASE("gpu-cufft shifts a field by a delta kernel", "[convolution][gpu-cufft]", float, double) {
  test::check_delta_shifts<TestType>(Backend::gpu_cufft);
}

TEST_CASE("gpu-cufft rejects bad arguments", "[convolution][gpu-cufft]") {
  test::check_bad_arguments_refused(Backend::gpu_cufft);
}

TEMPLATE_TEST_CASE("gpu-cufft pattern problems equal cpu-direct", "[convolution][gpu-cufft][pattern]", float, double) {
  test::check_patterns_against_direct<TestType>(Backend::gpu_cufft);
}

TEMPLATE_TEST_CASE("gpu-cufft pattern on a non-blocking stream, kernels replaced, shapes beyond the harness",
                   "[convolution][gpu-cufft][pattern]", float, double) {
  test::check_patterns_on_stream_beyond_harness<TestType>(Backend::gpu_cufft);
}

TEST_CASE("gpu-cufft pattern: buffers of P and Q blocks, overlap refused", "[convolution][gpu-cufft][pattern]") {
  test::check_pattern_overlap_refused(Backend::gpu_cufft);
}

TEMPLATE_TEST_CASE("gpu-cufft takes the cuFFT plans a finished backend of its shape left, and computes with them",
                   "[convolution][gpu-cufft]", float, double) {
  using conv::detail::cufft_plan_counts;
  const Problem g{.n1 = 11, .n2 = 13, .slices = 3, .per_slice = 4};
  const test::TestStream stream;
  for (int round = 0; round < 2; ++round) {
    INFO("backend " << round + 1 << " of this shape");
    const conv::detail::CufftPlanCounts before = cufft_plan_counts();
    const auto kernels = test::random_kernels<TestType>(g);
    const auto in = test::random_complex<TestType>(g.input_size());
    auto plan = conv::make_convolution<TestType>(Backend::gpu_cufft, g, kernels);
    const conv::detail::CufftPlanCounts during = cufft_plan_counts();
    // A scalar problem has two plans: the spectra's (slices transforms) and the fields' (both directions).
    CHECK(during.made + during.reused == before.made + before.reused + 2);
    if (round == 1) CHECK(during.made == before.made);  // both from the first backend
    CHECK(test::worst_error_against_direct(g, kernels, in, test::run_on_stream(*plan, in, stream.get())) <
          test::backend_tolerance<TestType>());
  }
}

TEST_CASE("the idle cuFFT plans are bounded", "[convolution][gpu-cufft]") {
  // Backends of more distinct shapes than the pool keeps, one after another: each leaves a plan of its own shape
  // (the fields' transforms, per_slice of them) besides the spectra's, which the next one takes again.
  for (int per_slice = 1; per_slice <= int(conv::detail::idle_cufft_plans_kept); ++per_slice) {
    const Problem g{.n1 = 5, .n2 = 1, .slices = 1, .per_slice = per_slice};
    auto plan = conv::make_convolution<float>(Backend::gpu_cufft, g, test::random_kernels<float>(g));
  }
  CHECK(conv::detail::cufft_plan_counts().idle == conv::detail::idle_cufft_plans_kept);
}
