// gpu-cufft beyond the shared harness (test_gpu_backends.cpp): an explicit non-blocking stream, kernels
// replaced between runs, shapes the harness lacks (non-power-of-two L, a 1D grating with L2 > 1, a batch
// beyond the grid's y limit of 65535), an analytic shift, and argument errors; problems with patterns (the
// NV patterns and random ones on 1D and 2D shapes, on a stream, kernels replaced, a large batch).
#include <complex>
#include <string>
#include <vector>

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
