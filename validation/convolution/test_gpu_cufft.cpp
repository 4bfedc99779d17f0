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
  const Problem g{.n1 = 15, .n2 = 15, .slices = 3, .per_slice = 6};
  const auto kernels = test::random_kernels<TestType>(g);
  auto plan = conv::make_convolution<TestType>(Backend::gpu_cufft, g, kernels);
  const test::TestStream stream;
  // Two executes queued without a host wait between them share the workspace: stream order must hold.
  const auto in_a = test::random_complex<TestType>(g.input_size());
  const auto in_b = test::random_complex<TestType>(g.input_size());
  std::vector<std::complex<TestType>> out_a(in_a.size(), test::poison<TestType>()), out_b = out_a;
  DeviceBuffer<std::complex<TestType>> d_in_a(in_a.size()), d_in_b(in_b.size()), d_out_a(in_a.size()),
      d_out_b(in_b.size());
  d_in_a.upload(in_a);
  d_in_b.upload(in_b);
  d_out_a.upload(out_a);
  d_out_b.upload(out_b);
  plan->execute(d_in_a.data(), d_out_a.data(), stream.get());
  plan->execute(d_in_b.data(), d_out_b.data(), stream.get());
  GS_CUDA_TRY(cudaMemcpyAsync(out_a.data(), d_out_a.data(), d_out_a.bytes(), cudaMemcpyDeviceToHost, stream.get()));
  GS_CUDA_TRY(cudaMemcpyAsync(out_b.data(), d_out_b.data(), d_out_b.bytes(), cudaMemcpyDeviceToHost, stream.get()));
  GS_CUDA_TRY(cudaStreamSynchronize(stream.get()));
  CHECK(test::worst_error_against_direct<TestType>(g, kernels, in_a, out_a) <= test::backend_tolerance<TestType>());
  CHECK(test::worst_error_against_direct<TestType>(g, kernels, in_b, out_b) <= test::backend_tolerance<TestType>());
}

TEMPLATE_TEST_CASE("gpu-cufft set_kernels replaces the spectra", "[convolution][gpu-cufft]", float, double) {
  const Problem g{.n1 = 7, .n2 = 9, .slices = 4, .per_slice = 3};
  const auto first = test::random_kernels<TestType>(g), second = test::random_kernels<TestType>(g);
  auto plan = conv::make_convolution<TestType>(Backend::gpu_cufft, g, first);
  const test::TestStream stream;
  const auto in = test::random_complex<TestType>(g.input_size());
  const auto out_first = test::run_on_stream(*plan, in, stream.get());
  CHECK(test::worst_error_against_direct<TestType>(g, first, in, out_first) <= test::backend_tolerance<TestType>());
  plan->set_kernels(second);
  const auto out_second = test::run_on_stream(*plan, in, stream.get());
  CHECK(test::worst_error_against_direct<TestType>(g, second, in, out_second) <= test::backend_tolerance<TestType>());
  CHECK(test::worst_error_against_direct<TestType>(g, first, in, out_second) > 0.1);  // really the new kernels
}

TEMPLATE_TEST_CASE("gpu-cufft on shapes beyond the harness", "[convolution][gpu-cufft]", float, double) {
  const std::vector<test::NamedGeometry> shapes{
      {"non-power-of-two L (7 x 5 -> 13 x 15)", {.n1 = 7, .n2 = 5, .l1 = 13, .l2 = 15, .slices = 3, .per_slice = 4}},
      {"prime L (3 x 11 -> 7 x 23)", {.n1 = 3, .n2 = 11, .l1 = 7, .l2 = 23, .slices = 2, .per_slice = 3}},
      {"1D grating with L2 > 1 (21 x 1 -> 64 x 4)", {.n1 = 21, .n2 = 1, .l1 = 64, .l2 = 4, .slices = 2, .per_slice = 3}},
      {"N1 = 1, long axis 2 (1 x 63)", {.n1 = 1, .n2 = 63, .slices = 2, .per_slice = 3}},
      {"batch beyond the grid's y limit (3 x 3, 80000 blocks)", {.n1 = 3, .n2 = 3, .slices = 2, .per_slice = 40000}},
  };
  for (const auto& c : shapes) {
    INFO(c.name);
    const auto kernels = test::random_kernels<TestType>(c.geometry);
    auto plan = conv::make_convolution<TestType>(Backend::gpu_cufft, c.geometry, kernels);
    const auto in = test::random_complex<TestType>(c.geometry.input_size());
    std::vector<std::complex<TestType>> out;
    test::run_on_host(*plan, in, out);
    CHECK(test::worst_error_against_direct<TestType>(c.geometry, kernels, in, out) <=
          test::backend_tolerance<TestType>());
  }
}

TEMPLATE_TEST_CASE("gpu-cufft shifts a field by a delta kernel", "[convolution][gpu-cufft]", float, double) {
  // χ = δ(n − s): out(m) = in(m − s) inside the block, 0 where m − s leaves it. Independent of cpu-direct.
  const Problem g{.n1 = 9, .n2 = 7, .slices = 2, .per_slice = 3};
  const double tolerance = 10 * test::backend_tolerance<TestType>();
  for (auto [s1, s2] : {std::pair{0, 0}, {2, -1}, {-8, 6}, {5, 0}}) {
    auto plan = conv::make_convolution<TestType>(Backend::gpu_cufft, g, test::delta_kernels(g, s1, s2));
    const auto in = test::random_complex<TestType>(g.input_size());
    std::vector<std::complex<TestType>> out;
    test::run_on_host(*plan, in, out);
    const auto expect = test::shifted_fields(g, in, s1, s2);
    for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(std::abs(out[i] - expect[i]) <= tolerance);
  }
}

TEST_CASE("gpu-cufft rejects bad arguments", "[convolution][gpu-cufft]") {
  const Problem g{.n1 = 5, .n2 = 5, .slices = 2, .per_slice = 2};
  auto plan = conv::make_convolution<float>(Backend::gpu_cufft, g, test::random_kernels<float>(g));
  DeviceBuffer<std::complex<float>> buffer(2 * g.input_size());
  buffer.upload(test::random_complex<float>(buffer.size()));
  CHECK_THROWS_AS(plan->execute(nullptr, buffer.data()), InvalidArgument);
  CHECK_THROWS_AS(plan->execute(buffer.data(), buffer.data() + g.input_size() / 2), InvalidArgument);  // overlap
  CHECK_THROWS_AS(plan->set_kernels(std::vector<std::complex<double>>(g.kernels_total() - 1)), InvalidArgument);
  CHECK_NOTHROW(plan->execute(buffer.data(), buffer.data() + g.input_size()));
  GS_CUDA_TRY(cudaDeviceSynchronize());
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
