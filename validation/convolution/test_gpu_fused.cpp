// gpu-fused beyond the shared harness: its limits (Unsupported naming them), every compile-time
// FFT-length pair, rounds and CTAs that split a slice's fields, a non-default stream, set_kernels
// between executes, and the full problem batches against cpu-direct on a subset of slices.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"
#include "convolution/cuda_check.hpp"
#include "convolution/device_buffer.hpp"
#include "convolution/error.hpp"
#include "validation/convolution/backend_cases.hpp"

using namespace gratingsim;
using conv::Backend;
using conv::Problem;

namespace {

template <class Real>
using Complex = std::complex<Real>;

/// Worst per-block ‖out − ref‖/‖ref‖ over blocks [first, first + count) of two batches.
template <class Real>
double worst_block_error(const Problem& g, const std::vector<Complex<Real>>& out,
                         const std::vector<std::complex<double>>& ref, std::size_t out_first, std::size_t ref_first,
                         std::size_t count) {
  const auto n = g.field_size();
  double worst = 0;
  for (std::size_t b = 0; b < count; ++b)
    worst = std::max(worst, test::relative_l2<Real, double>(std::span(out).subspan((out_first + b) * n, n),
                                                            std::span(ref).subspan((ref_first + b) * n, n)));
  return worst;
}

/// cpu-direct (complex128) on the same kernels (already rounded to Real) and fields.
template <class Real>
std::vector<std::complex<double>> direct(const Problem& g, const std::vector<std::complex<double>>& kernels,
                                         const std::vector<Complex<Real>>& in) {
  auto plan = conv::make_convolution<double>(Backend::cpu_direct, g, kernels);
  const std::vector<std::complex<double>> wide(in.begin(), in.end());
  std::vector<std::complex<double>> out;
  test::run_on_host(*plan, wide, out);
  return out;
}

template <class Real>
std::vector<std::complex<double>> rounded_kernels(const Problem& g) {
  const auto k = test::random_complex<Real>(g.kernels_total());
  return {k.begin(), k.end()};
}

template <class Real>
void check_against_direct(const Problem& g) {
  INFO("N " << g.n1 << "x" << g.n2 << ", L " << g.l1 << "x" << g.l2 << ", " << g.slices << " slices x "
            << g.per_slice);
  const auto kernels = rounded_kernels<Real>(g);
  const auto in = test::random_complex<Real>(g.input_size());
  auto plan = conv::make_convolution<Real>(Backend::gpu_fused, g, kernels);
  std::vector<Complex<Real>> out;
  test::run_on_host(*plan, in, out);
  REQUIRE(test::l2_norm<Real>(out) > 0);
  const double worst = worst_block_error<Real>(g, out, direct<Real>(g, kernels, in), 0, 0, g.input_blocks());
  INFO("worst block relative error " << worst);
  CHECK(worst <= test::backend_tolerance<Real>());
}

/// Largest odd N with 2N − 1 ≤ L.
int largest_harmonics(int l) {
  int n = (l + 1) / 2;
  return n % 2 == 1 ? n : n - 1;
}

}  // namespace

TEST_CASE("gpu-fused declines FFT lengths beyond its templates, naming the limit", "[convolution][gpu-fused]") {
  const auto expect_unsupported = [](const Problem& g, const std::string& needle) {
    const std::vector<std::complex<double>> kernels(conv::resolve(g).kernels_total(), {0.5, -0.25});
    try {
      (void)conv::make_convolution<float>(Backend::gpu_fused, g, kernels);
      FAIL("expected Unsupported");
    } catch (const Unsupported& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  expect_unsupported({.n1 = 65, .n2 = 3, .slices = 1, .per_slice = 1}, "up to 128");   // L1 = 256
  expect_unsupported({.n1 = 3, .n2 = 101, .slices = 1, .per_slice = 1}, "L2 = 256");
  expect_unsupported({.n1 = 7, .n2 = 7, .l1 = 48, .l2 = 16, .slices = 1, .per_slice = 1}, "L1 = 48");
}

TEMPLATE_TEST_CASE("gpu-fused equals cpu-direct for every pair of FFT lengths", "[convolution][gpu-fused]", float,
                   double) {
  for (int l1 = 1; l1 <= 128; l1 *= 2)
    for (int l2 = 1; l2 <= 128; l2 *= 2) {
      // Largest admissible N, and a smaller one (non-minimal L, N < H: zero inputs inside the half).
      const int n1 = largest_harmonics(l1), n2 = largest_harmonics(l2);
      check_against_direct<TestType>({.n1 = n1, .n2 = n2, .l1 = l1, .l2 = l2, .slices = 2, .per_slice = 2});
      check_against_direct<TestType>(
          {.n1 = std::max(1, n1 / 3 | 1), .n2 = std::max(1, n2 / 2 | 1), .l1 = l1, .l2 = l2, .slices = 1, .per_slice = 3});
    }
}

TEMPLATE_TEST_CASE("gpu-fused splits a slice's fields into rounds and CTAs", "[convolution][gpu-fused]", float,
                   double) {
  // per_slice larger than one round and not a multiple of it, so the last round and CTA are partial.
  check_against_direct<TestType>({.n1 = 7, .n2 = 7, .slices = 3, .per_slice = 71});
  check_against_direct<TestType>({.n1 = 15, .n2 = 13, .slices = 3, .per_slice = 37});
  check_against_direct<TestType>({.n1 = 31, .n2 = 31, .slices = 2, .per_slice = 29});
  check_against_direct<TestType>({.n1 = 63, .n2 = 63, .slices = 1, .per_slice = 7});
  check_against_direct<TestType>({.n1 = 63, .n2 = 1, .slices = 3, .per_slice = 200});
}

TEMPLATE_TEST_CASE("gpu-fused runs on a non-default stream and follows set_kernels", "[convolution][gpu-fused]",
                   float, double) {
  using Real = TestType;
  const Problem g{.n1 = 15, .n2 = 15, .slices = 3, .per_slice = 24};
  const auto first = rounded_kernels<Real>(g), second = rounded_kernels<Real>(g);
  const auto in = test::random_complex<Real>(g.input_size());
  auto plan = conv::make_convolution<Real>(Backend::gpu_fused, g, first);

  cudaStream_t stream = nullptr;
  CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  conv::DeviceBuffer<Complex<Real>> d_in(in.size()), d_out(in.size());
  d_in.upload(in);
  std::vector<Complex<Real>> out(in.size());
  const auto run = [&] {
    std::fill(out.begin(), out.end(), test::poison<Real>());
    d_out.upload(out);
    plan->execute(d_in.data(), d_out.data(), stream);
    CUDA_TRY(cudaStreamSynchronize(stream));
    d_out.download(out);
  };
  const auto expect_first = direct<Real>(g, first, in), expect_second = direct<Real>(g, second, in);
  for (const auto* kernels : {&first, &second, &first}) {
    plan->set_kernels(*kernels);
    for (int repeat = 0; repeat < 2; ++repeat) {
      run();
      const double worst =
          worst_block_error<Real>(g, out, kernels == &first ? expect_first : expect_second, 0, 0, g.input_blocks());
      INFO("worst block relative error " << worst);
      CHECK(worst <= test::backend_tolerance<Real>());
    }
  }
  CUDA_TRY(cudaStreamDestroy(stream));
}

TEMPLATE_TEST_CASE("gpu-fused on the full problem batches, checked on a subset of slices",
                   "[convolution][gpu-fused][full]", float, double) {
  using Real = TestType;
  struct Case {
    int n, slices, checked_slices;
  };
  for (const Case c : {Case{7, 32, 32}, Case{15, 64, 64}, Case{31, 128, 6}, Case{63, 256, 2}}) {
    const Problem g{.n1 = c.n, .n2 = c.n, .slices = c.slices, .per_slice = 24};
    INFO("N " << c.n << ", " << c.slices << " slices x 24");
    const auto kernels = rounded_kernels<Real>(g);
    const auto in = test::random_complex<Real>(g.input_size());
    auto plan = conv::make_convolution<Real>(Backend::gpu_fused, g, kernels);
    std::vector<Complex<Real>> out;
    test::run_on_host(*plan, in, out);
    REQUIRE(std::none_of(out.begin(), out.end(), [](auto z) { return std::isnan(z.real()) || std::isnan(z.imag()); }));

    // Slices spread over the batch (first, last and between), each with all its fields.
    const Problem sub{.n1 = c.n, .n2 = c.n, .slices = 1, .per_slice = 24};
    for (int i = 0; i < c.checked_slices; ++i) {
      const int slice = c.checked_slices == 1 ? 0 : int(std::size_t(i) * (c.slices - 1) / (c.checked_slices - 1));
      const auto k0 = kernels.begin() + std::ptrdiff_t(slice) * g.kernel_size();
      const std::vector<std::complex<double>> sub_kernels(k0, k0 + g.kernel_size());
      const auto f0 = in.begin() + std::ptrdiff_t(slice) * 24 * g.field_size();
      const std::vector<Complex<Real>> sub_in(f0, f0 + 24 * g.field_size());
      const double worst = worst_block_error<Real>(g, out, direct<Real>(sub, sub_kernels, sub_in),
                                                   std::size_t(slice) * 24, 0, 24);
      INFO("slice " << slice << ", worst block relative error " << worst);
      CHECK(worst <= test::backend_tolerance<Real>());
    }
  }
}
