// gpu-cufft-callbacks (cuFFT with the pad as a load callback, the pattern's products as the inverse's load
// callback and the extraction as its store callback, by whichever route works here: LTO or legacy) beyond the shared harness (test_gpu_backends.cpp): every harness geometry alone, an explicit
// non-blocking stream with two executes in flight (the output pointer the store callback reads is set
// on the device per execute), the caller's input left unchanged and nothing written beyond the caller's
// output, kernels replaced, shapes the harness lacks (non-power-of-two and prime L, 1D with L2 > 1, a
// batch beyond the grid's y limit), an analytic shift, argument errors and the N = 1 refusal; problems
// with patterns (the normal-vector patterns and random ones, on a stream, kernels replaced).
#include <complex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "validation/convolution/gpu_test_support.hpp"
#include "validation/convolution/pattern_cases.hpp"

using namespace gratingsim;
using conv::Backend;
using conv::Problem;

namespace {
constexpr Backend callbacks = Backend::gpu_cufft_callbacks;
}  // namespace

TEMPLATE_TEST_CASE("gpu-cufft-callbacks equals cpu-direct on every harness geometry",
                   "[convolution][gpu-cufft-callbacks]", float, double) {
  for (const auto& c : test::backend_test_geometries()) test::check_backend_against_direct<TestType>(callbacks, c);
}

TEMPLATE_TEST_CASE("gpu-cufft-callbacks on a non-blocking stream: two executes in flight, input kept, nothing "
                   "written beyond the output",
                   "[convolution][gpu-cufft-callbacks]", float, double) {
  test::check_two_executes_in_flight<TestType>(callbacks, {.n1 = 15, .n2 = 9, .slices = 3, .per_slice = 6});
}

TEMPLATE_TEST_CASE("gpu-cufft-callbacks set_kernels replaces the spectra", "[convolution][gpu-cufft-callbacks]", float,
                   double) {
  const Problem g{.n1 = 7, .n2 = 9, .slices = 4, .per_slice = 3};
  const test::TestStream stream;
  test::check_stream_and_new_kernels<TestType>(callbacks, g, stream.get());
}

TEMPLATE_TEST_CASE("gpu-cufft-callbacks on shapes beyond the harness", "[convolution][gpu-cufft-callbacks]", float,
                   double) {
  test::check_shapes_beyond_harness<TestType>(callbacks);
}

TEMPLATE_TEST_CASE("gpu-cufft-callbacks shifts a field by a delta kernel", "[convolution][gpu-cufft-callbacks]", float,
                   double) {
  test::check_delta_shifts<TestType>(callbacks);
}

TEST_CASE("gpu-cufft-callbacks rejects bad arguments and refuses N1 = N2 = 1", "[convolution][gpu-cufft-callbacks]") {
  test::check_bad_arguments_refused(callbacks);

  const Problem g{.n1 = 5, .n2 = 5, .slices = 2, .per_slice = 2};
  const Problem one = conv::resolve(Problem{.n1 = 1, .n2 = 1, .slices = 2, .per_slice = 2});
  for (auto precision : {Precision::single, Precision::double_}) {
    const conv::Support s = conv::traits(callbacks).can_implement(one, precision);
    CHECK_FALSE(s.ok);
    CHECK_THAT(s.reason, Catch::Contains("N1 = N2 = 1"));
    CHECK(conv::traits(callbacks).can_implement(conv::resolve(g), precision).ok);  // one route links here
    const std::string route = conv::cufft_callbacks_route(precision);
    INFO("route: " << route);
    CHECK((route == "LTO callbacks (nvJitLink)" || route == "legacy callbacks (static cuFFT)"));
  }
  CHECK_THROWS_AS(conv::make_convolution<double>(callbacks, one, test::random_kernels<double>(one)), Unsupported);
}

TEMPLATE_TEST_CASE("gpu-cufft-callbacks pattern problems equal cpu-direct",
                   "[convolution][gpu-cufft-callbacks][pattern]", float, double) {
  test::check_patterns_against_direct<TestType>(callbacks);
}

TEMPLATE_TEST_CASE("gpu-cufft-callbacks pattern on a non-blocking stream, kernels replaced, shapes beyond the harness",
                   "[convolution][gpu-cufft-callbacks][pattern]", float, double) {
  test::check_patterns_on_stream_beyond_harness<TestType>(callbacks);
}

TEST_CASE("gpu-cufft-callbacks pattern: buffers of P and Q blocks, overlap refused",
          "[convolution][gpu-cufft-callbacks][pattern]") {
  test::check_pattern_overlap_refused(callbacks);
}
