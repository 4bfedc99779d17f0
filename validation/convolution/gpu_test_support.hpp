#pragma once
// Helpers of the backend-specific GPU tests (test_gpu_*.cpp): runs on an explicit stream and the
// comparison with cpu-direct (complex128) on the same, rounded inputs.
#include <algorithm>
#include <complex>
#include <span>
#include <utility>
#include <vector>

#include "convolution/convolution.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/error.hpp"
#include "validation/convolution/backend_cases.hpp"
#include "validation/convolution/pattern_cases.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"
#include "validation/support/run_convolution.hpp"

namespace gratingsim::test {

/// Fresh random kernels, rounded to Real so that the complex128 reference sees what the backend sees.
template <class Real>
std::vector<std::complex<double>> random_kernels(const conv::Problem& g) {
  const auto rounded = random_complex<Real>(g.kernels_total());
  return {rounded.begin(), rounded.end()};
}

/// Runs plan on `stream` (uploads before, download after on the same stream) with NaN-poisoned output.
template <class Real>
std::vector<std::complex<Real>> run_on_stream(conv::Convolution<Real>& plan, const std::vector<std::complex<Real>>& in,
                                              cudaStream_t stream) {
  std::vector<std::complex<Real>> out(plan.problem().output_size(), poison<Real>());
  DeviceBuffer<std::complex<Real>> d_in(in.size()), d_out(out.size());
  d_in.upload(in);
  d_out.upload(out);
  plan.execute(d_in.data(), d_out.data(), stream);
  GS_CUDA_TRY(cudaMemcpyAsync(out.data(), d_out.data(), d_out.bytes(), cudaMemcpyDeviceToHost, stream));
  GS_CUDA_TRY(cudaStreamSynchronize(stream));
  return out;
}

/// The worst block-relative L2 error of `out` against cpu-direct on (kernels, in); fails on a zero output.
template <class Real>
double worst_error_against_direct(const conv::Problem& g, std::span<const std::complex<double>> kernels,
                                  const std::vector<std::complex<Real>>& in, const std::vector<std::complex<Real>>& out) {
  REQUIRE(l2_norm<Real>(out) > 0);
  auto reference = conv::make_convolution<double>(conv::Backend::cpu_direct, g, kernels);
  const std::vector<std::complex<double>> in_wide(in.begin(), in.end());
  std::vector<std::complex<double>> expect;
  run_on_host(*reference, in_wide, expect);
  return worst_block_error(g, out, expect);
}

/// An explicit non-blocking stream (no implicit synchronisation with the legacy stream), destroyed at scope end.
class TestStream {
 public:
  TestStream() { GS_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  ~TestStream() { cudaStreamDestroy(stream_); }
  [[nodiscard]] cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// A pattern plan (normal-vector pattern: 3 input and 5 output blocks per group) refuses input and
/// output buffers that overlap, either way round, and accepts adjacent ones.
inline void check_pattern_overlap_refused(conv::Backend backend) {
  const conv::Problem g = with_pattern({.n1 = 5, .n2 = 5, .slices = 2, .per_slice = 2}, normal_vector_pattern());
  auto plan = conv::make_convolution<float>(backend, g, random_kernels<float>(g));
  DeviceBuffer<std::complex<float>> buffer(g.input_size() + g.output_size());
  buffer.upload(random_complex<float>(buffer.size()));
  // The output (5 blocks per group) starting inside the input (3 per group) overlaps it, and vice versa.
  CHECK_THROWS_AS(plan->execute(buffer.data(), buffer.data() + g.input_size() - 1), gratingsim::InvalidArgument);
  CHECK_THROWS_AS(plan->execute(buffer.data() + g.output_size() - 1, buffer.data()), gratingsim::InvalidArgument);
  CHECK_NOTHROW(plan->execute(buffer.data(), buffer.data() + g.input_size()));
  CHECK_NOTHROW(plan->execute(buffer.data() + g.output_size(), buffer.data()));
  GS_CUDA_TRY(cudaDeviceSynchronize());
}

/// A plan of `backend` run on `stream` equals cpu-direct, then again after set_kernels() with new
/// kernels (and no longer matches the old ones: the new kernels are really used).
template <class Real>
void check_stream_and_new_kernels(conv::Backend backend, const conv::Problem& g, cudaStream_t stream) {
  const auto first = random_kernels<Real>(g), second = random_kernels<Real>(g);
  auto plan = conv::make_convolution<Real>(backend, g, first);
  const auto in = random_complex<Real>(g.input_size());
  const auto out_first = run_on_stream(*plan, in, stream);  // poisoned before the run
  CHECK(worst_error_against_direct<Real>(g, first, in, out_first) <= backend_tolerance<Real>());
  plan->set_kernels(second);
  const auto out_second = run_on_stream(*plan, in, stream);
  CHECK(worst_error_against_direct<Real>(g, second, in, out_second) <= backend_tolerance<Real>());
  CHECK(worst_error_against_direct<Real>(g, first, in, out_second) > 0.1);
}

/// execute() refuses a null buffer and overlapping input and output, set_kernels() a kernel span of the
/// wrong size, and execute() accepts adjacent buffers (a scalar float plan).
inline void check_bad_arguments_refused(conv::Backend backend) {
  const conv::Problem g{.n1 = 5, .n2 = 5, .slices = 2, .per_slice = 2};
  auto plan = conv::make_convolution<float>(backend, g, random_kernels<float>(g));
  DeviceBuffer<std::complex<float>> buffer(2 * g.input_size());
  buffer.upload(random_complex<float>(buffer.size()));
  CHECK_THROWS_AS(plan->execute(nullptr, buffer.data()), gratingsim::InvalidArgument);
  CHECK_THROWS_AS(plan->execute(buffer.data(), buffer.data() + g.input_size() / 2), gratingsim::InvalidArgument);
  CHECK_THROWS_AS(plan->set_kernels(std::vector<std::complex<double>>(g.kernels_total() - 1)),
                  gratingsim::InvalidArgument);
  CHECK_NOTHROW(plan->execute(buffer.data(), buffer.data() + g.input_size()));
  GS_CUDA_TRY(cudaDeviceSynchronize());
}

/// Two executes of one plan of `backend` queued back to back on a non-blocking stream, no host wait
/// between them: both equal cpu-direct, the inputs are left unchanged, and nothing is written beyond
/// either output.
template <class Real>
void check_two_executes_in_flight(conv::Backend backend, const conv::Problem& g) {
  using Complex = std::complex<Real>;
  const auto kernels = random_kernels<Real>(g);
  auto plan = conv::make_convolution<Real>(backend, g, kernels);
  const TestStream stream;
  // Each output buffer has a guard of one L1×L2 block beyond output_size(), filled with a sentinel: only
  // the kept N1×N2 outputs of each block are written, never past the last one.
  const std::size_t guard = std::size_t(plan->problem().l1) * plan->problem().l2;
  const Complex sentinel(Real(1234.5), Real(-6789.25));
  const auto in_a = random_complex<Real>(g.input_size());
  const auto in_b = random_complex<Real>(g.input_size());
  std::vector<Complex> out_a(g.output_size() + guard, poison<Real>()), out_b;
  std::fill(out_a.begin() + std::ptrdiff_t(g.output_size()), out_a.end(), sentinel);
  out_b = out_a;
  DeviceBuffer<Complex> d_in_a(in_a.size()), d_in_b(in_b.size()), d_out_a(out_a.size()), d_out_b(out_b.size());
  d_in_a.upload(in_a);
  d_in_b.upload(in_b);
  d_out_a.upload(out_a);
  d_out_b.upload(out_b);
  // Queued without a host wait between them: the workspaces (and gpu-cufft-callbacks' output pointer)
  // are the plan's, so stream order must keep the two executes apart.
  plan->execute(d_in_a.data(), d_out_a.data(), stream.get());
  plan->execute(d_in_b.data(), d_out_b.data(), stream.get());
  std::vector<Complex> kept_a(in_a.size()), kept_b(in_b.size());
  GS_CUDA_TRY(cudaMemcpyAsync(out_a.data(), d_out_a.data(), d_out_a.bytes(), cudaMemcpyDeviceToHost, stream.get()));
  GS_CUDA_TRY(cudaMemcpyAsync(out_b.data(), d_out_b.data(), d_out_b.bytes(), cudaMemcpyDeviceToHost, stream.get()));
  GS_CUDA_TRY(cudaMemcpyAsync(kept_a.data(), d_in_a.data(), d_in_a.bytes(), cudaMemcpyDeviceToHost, stream.get()));
  GS_CUDA_TRY(cudaMemcpyAsync(kept_b.data(), d_in_b.data(), d_in_b.bytes(), cudaMemcpyDeviceToHost, stream.get()));
  GS_CUDA_TRY(cudaStreamSynchronize(stream.get()));
  // The caller's input is only read (gpu-cufft-callbacks: the forward transform's load callback).
  CHECK(kept_a == in_a);
  CHECK(kept_b == in_b);
  for (const auto* out : {&out_a, &out_b})
    for (std::size_t i = g.output_size(); i < out->size(); ++i) REQUIRE((*out)[i] == sentinel);
  out_a.resize(g.output_size());
  out_b.resize(g.output_size());
  CHECK(worst_error_against_direct<Real>(g, kernels, in_a, out_a) <= backend_tolerance<Real>());
  CHECK(worst_error_against_direct<Real>(g, kernels, in_b, out_b) <= backend_tolerance<Real>());
}

/// Scalar problems the shared harness lacks (non-power-of-two and prime L, 1D with L2 > 1, N1 = 1, more
/// blocks than the grid's y limit) equal cpu-direct.
template <class Real>
void check_shapes_beyond_harness(conv::Backend backend) {
  const std::vector<NamedGeometry> shapes{
      {"non-power-of-two L (7 x 5 -> 13 x 15)", {.n1 = 7, .n2 = 5, .l1 = 13, .l2 = 15, .slices = 3, .per_slice = 4}},
      {"prime L (3 x 11 -> 7 x 23)", {.n1 = 3, .n2 = 11, .l1 = 7, .l2 = 23, .slices = 2, .per_slice = 3}},
      {"1D grating with L2 > 1 (21 x 1 -> 64 x 4)", {.n1 = 21, .n2 = 1, .l1 = 64, .l2 = 4, .slices = 2, .per_slice = 3}},
      {"N1 = 1, long axis 2 (1 x 63)", {.n1 = 1, .n2 = 63, .slices = 2, .per_slice = 3}},
      {"batch beyond the grid's y limit (3 x 3, 80000 blocks)", {.n1 = 3, .n2 = 3, .slices = 2, .per_slice = 40000}},
  };
  for (const auto& c : shapes) {
    INFO(c.name);
    const auto kernels = random_kernels<Real>(c.geometry);
    auto plan = conv::make_convolution<Real>(backend, c.geometry, kernels);
    const auto in = random_complex<Real>(c.geometry.input_size());
    std::vector<std::complex<Real>> out;
    run_on_host(*plan, in, out);
    CHECK(worst_error_against_direct<Real>(c.geometry, kernels, in, out) <= backend_tolerance<Real>());
  }
}

/// χ = δ(n − s) shifts each field: out(m) = in(m − s) inside the block, 0 where m − s leaves it, to 10× the
/// backend tolerance (an FFT route rounds). Independent of cpu-direct.
template <class Real>
void check_delta_shifts(conv::Backend backend) {
  const conv::Problem g{.n1 = 9, .n2 = 7, .slices = 2, .per_slice = 3};
  const double tolerance = 10 * backend_tolerance<Real>();
  for (auto [s1, s2] : {std::pair{0, 0}, {2, -1}, {-8, 6}, {5, 0}}) {
    auto plan = conv::make_convolution<Real>(backend, g, delta_kernels(g, s1, s2));
    const auto in = random_complex<Real>(g.input_size());
    std::vector<std::complex<Real>> out;
    run_on_host(*plan, in, out);
    const auto expect = shifted_fields(g, in, s1, s2);
    for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(std::abs(out[i] - expect[i]) <= tolerance);
  }
}

/// check_stream_and_new_kernels on one non-blocking stream for every pattern (the normal-vector ones and a
/// random one) on shapes the shared harness lacks: non-power-of-two L, 1D with L2 > 1, and more output
/// blocks than the grid's y limit.
template <class Real>
void check_patterns_on_stream_beyond_harness(conv::Backend backend) {
  const std::vector<NamedGeometry> shapes{
      {"9 x 7", {.n1 = 9, .n2 = 7, .slices = 3, .per_slice = 4}},
      {"non-power-of-two L (5 x 7 -> 11 x 15)", {.n1 = 5, .n2 = 7, .l1 = 11, .l2 = 15, .slices = 2, .per_slice = 3}},
      {"1D with L2 > 1 (13 x 1 -> 32 x 2)", {.n1 = 13, .n2 = 1, .l1 = 32, .l2 = 2, .slices = 2, .per_slice = 2}},
      {"output blocks beyond the grid's y limit (3 x 3, 16000 groups)", {.n1 = 3, .n2 = 3, .slices = 2, .per_slice = 8000}},
  };
  const TestStream stream;
  for (const Pattern& pattern : {normal_vector_pattern(), normal_vector_1d_pattern(), random_pattern()})
    for (const auto& shape : shapes) {
      const conv::Problem g = with_pattern(shape.geometry, pattern);
      INFO(pattern.name << ", " << shape.name);
      check_stream_and_new_kernels<Real>(backend, g, stream.get());
    }
}

}  // namespace gratingsim::test
