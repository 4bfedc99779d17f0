// gpu-fused beyond the shared harness: its limits (Unsupported naming them), every compile-time
// FFT-length pair, rounds and CTAs that split a slice's fields, a non-default stream, set_kernels
// between executes, and the full problem batches against cpu-direct on a subset of slices. Problems
// with patterns (the NV patterns, random ones): against cpu-direct at every L of the problem cases in
// 2D, mixed L1 ≠ L2, 1D gratings, groups per slice that leave partial rounds, output sets split by
// shared memory; on a stream with kernels replaced; buffers of P and Q blocks; the refusals.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/error.hpp"
#include "validation/convolution/backend_cases.hpp"
#include "validation/convolution/gpu_test_support.hpp"
#include "validation/convolution/pattern_cases.hpp"

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
  GS_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DeviceBuffer<Complex<Real>> d_in(in.size()), d_out(in.size());
  d_in.upload(in);
  std::vector<Complex<Real>> out(in.size());
  const auto run = [&] {
    std::fill(out.begin(), out.end(), test::poison<Real>());
    d_out.upload(out);
    plan->execute(d_in.data(), d_out.data(), stream);
    GS_CUDA_TRY(cudaStreamSynchronize(stream));
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
  GS_CUDA_TRY(cudaStreamDestroy(stream));
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

namespace {

/// Shapes of the gpu-fused pattern tests: 2D at every L of the problem cases (16, 32, 64, 128), mixed
/// L1 ≠ L2, a non-minimal L, 1D gratings (N2 = 1), N = 1, one group per slice; groups per slice that
/// leave a partial last round (a round is 32, 8, 2, 1 groups in 2D at L 16, 32, 64, 128 in complex64).
const std::vector<test::NamedGeometry>& fused_pattern_shapes() {
  static const std::vector<test::NamedGeometry> shapes{
      {"2D 7 x 7 (L 16), 45 groups per slice", {.n1 = 7, .n2 = 7, .slices = 2, .per_slice = 45}},
      {"2D 15 x 15 (L 32), 11 groups per slice", {.n1 = 15, .n2 = 15, .slices = 2, .per_slice = 11}},
      {"2D 31 x 31 (L 64), 5 groups per slice", {.n1 = 31, .n2 = 31, .slices = 2, .per_slice = 5}},
      {"2D 63 x 63 (L 128), 2 groups per slice", {.n1 = 63, .n2 = 63, .slices = 1, .per_slice = 2}},
      {"2D mixed 5 x 9 (L 16 x 32)", {.n1 = 5, .n2 = 9, .slices = 3, .per_slice = 7}},
      {"2D mixed 11 x 3 (L 32 x 8)", {.n1 = 11, .n2 = 3, .slices = 2, .per_slice = 9}},
      {"2D mixed 21 x 45 (L 64 x 128)", {.n1 = 21, .n2 = 45, .slices = 1, .per_slice = 3}},
      {"2D non-minimal L (5 x 3 -> 16 x 16)", {.n1 = 5, .n2 = 3, .l1 = 16, .l2 = 16, .slices = 2, .per_slice = 3}},
      {"1D 15 x 1 (L 32)", {.n1 = 15, .n2 = 1, .slices = 3, .per_slice = 37}},
      {"1D 31 x 1 (L 64)", {.n1 = 31, .n2 = 1, .slices = 2, .per_slice = 70}},
      {"1D 63 x 1 (L 128)", {.n1 = 63, .n2 = 1, .slices = 2, .per_slice = 70}},
      {"N = 1", {.n1 = 1, .n2 = 1, .slices = 3, .per_slice = 2}},
      {"one group per slice (9 x 7)", {.n1 = 9, .n2 = 7, .slices = 4, .per_slice = 1}},
  };
  return shapes;
}

/// The most inputs one output of the pattern reads.
int most_inputs_per_output(const Problem& g) {
  std::vector<int> reads(g.outputs, 0);
  for (const conv::Term& t : g.pattern) ++reads[t.output];
  return *std::max_element(reads.begin(), reads.end());
}

/// Whether one output's inputs cannot fit: max(1, reads) row-spectrum blocks of H1·(L2 + 1) values
/// beyond the device's shared memory per block (the only refusal the shapes above may meet: complex128
/// at L 128 x 128, 132 KiB a block).
template <class Real>
bool one_output_exceeds_shared_memory(const Problem& g) {
  int device = 0, shared_max = 0;
  GS_CUDA_TRY(cudaGetDevice(&device));
  GS_CUDA_TRY(cudaDeviceGetAttribute(&shared_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const std::size_t block = std::size_t(g.l1 / 2) * (g.l2 + 1) * sizeof(Complex<Real>);
  return std::size_t(std::max(1, most_inputs_per_output(g))) * block > std::size_t(shared_max);
}

/// gpu-fused against cpu-direct for `patterns` on `shapes`; a refusal only where one output's inputs
/// exceed shared memory, and then naming it.
template <class Real>
void check_fused_patterns(const std::vector<test::Pattern>& patterns, const std::vector<test::NamedGeometry>& shapes) {
  for (const test::Pattern& pattern : patterns)
    for (const test::NamedGeometry& shape : shapes) {
      const Problem g = conv::resolve(test::with_pattern(shape.geometry, pattern));
      INFO("gpu-fused " << to_string(precision_of<Real>()) << ", " << pattern.name << ", " << shape.name);
      const auto support = conv::traits(Backend::gpu_fused).can_implement(g, precision_of<Real>());
      INFO("can_implement: " << support.reason);
      if (one_output_exceeds_shared_memory<Real>(g)) {
        CHECK_FALSE(support.ok);
        CHECK_THAT(support.reason, Catch::Contains("bytes of shared memory"));
        continue;
      }
      REQUIRE(support.ok);
      const auto data = test::pattern_data<Real>(g);
      auto plan = conv::make_convolution<Real>(Backend::gpu_fused, g, data.kernels);
      test::check_plan_against_direct(*plan, data);
    }
}

}  // namespace

TEMPLATE_TEST_CASE("gpu-fused pattern problems equal cpu-direct", "[convolution][gpu-fused][pattern]", float, double) {
  check_fused_patterns<TestType>(test::test_patterns(), fused_pattern_shapes());
}

TEMPLATE_TEST_CASE("gpu-fused pattern problems at every FFT length of the problem cases in small batches",
                   "[convolution][gpu-fused][pattern][sanitize]", float, double) {
  // Small enough for compute-sanitizer: the NV patterns and one random pattern, a partial round each.
  const std::vector<test::NamedGeometry> shapes{
      {"2D 7 x 7 (L 16)", {.n1 = 7, .n2 = 7, .slices = 2, .per_slice = 3}},
      {"2D 15 x 15 (L 32)", {.n1 = 15, .n2 = 15, .slices = 2, .per_slice = 3}},
      {"2D 31 x 31 (L 64)", {.n1 = 31, .n2 = 31, .slices = 1, .per_slice = 3}},
      {"2D 63 x 63 (L 128)", {.n1 = 63, .n2 = 63, .slices = 1, .per_slice = 1}},
      {"1D 63 x 1 (L 128)", {.n1 = 63, .n2 = 1, .slices = 2, .per_slice = 5}},
  };
  check_fused_patterns<TestType>({test::normal_vector_pattern(), test::normal_vector_1d_pattern(), test::random_pattern()},
                                 shapes);
}

TEMPLATE_TEST_CASE("gpu-fused pattern on a non-blocking stream, kernels replaced", "[convolution][gpu-fused][pattern]",
                   float, double) {
  const test::TestStream stream;
  for (const test::Pattern& pattern : {test::normal_vector_pattern(), test::normal_vector_1d_pattern(), test::random_pattern()}) {
    const Problem g = test::with_pattern({.n1 = 15, .n2 = 13, .slices = 3, .per_slice = 10}, pattern);
    INFO(pattern.name);
    test::check_stream_and_new_kernels<TestType>(Backend::gpu_fused, g, stream.get());
  }
}

TEMPLATE_TEST_CASE("gpu-fused on the problem cases with the 2D NV pattern, checked on a subset of slices",
                   "[convolution][gpu-fused][pattern][full]", float, double) {
  // The bench's pattern shape (16 groups per slice: 8 angles x 2 polarisations) at the sizes of Table 1
  // with fewer slices; complex128 at L 128 is refused (one output's two inputs exceed shared memory).
  using Real = TestType;
  struct Case {
    int n, slices;
  };
  for (const Case c : {Case{7, 8}, Case{15, 6}, Case{31, 3}, Case{63, 2}}) {
    const Problem g = conv::resolve(
        test::with_pattern({.n1 = c.n, .n2 = c.n, .slices = c.slices, .per_slice = 16}, test::normal_vector_pattern()));
    INFO("N " << c.n << ", " << c.slices << " slices x 16 groups");
    if (one_output_exceeds_shared_memory<Real>(g)) {
      CHECK_FALSE(conv::traits(Backend::gpu_fused).can_implement(g, precision_of<Real>()).ok);
      continue;
    }
    const auto data = test::pattern_data<Real>(g);
    auto plan = conv::make_convolution<Real>(Backend::gpu_fused, g, data.kernels);
    test::check_plan_against_direct(*plan, data);
  }
}

TEST_CASE("gpu-fused pattern: buffers of P and Q blocks, overlap refused", "[convolution][gpu-fused][pattern]") {
  test::check_pattern_overlap_refused(Backend::gpu_fused);
}

TEST_CASE("gpu-fused refuses patterns beyond its limits, naming them", "[convolution][gpu-fused][pattern]") {
  const auto reason = [](const Problem& g, Precision precision) {
    const auto s = conv::traits(Backend::gpu_fused).can_implement(conv::resolve(g), precision);
    CHECK_FALSE(s.ok);
    return s.reason;
  };
  // An output reading 5 inputs: more column spectra than a thread holds.
  Problem wide{.n1 = 7, .n2 = 7, .kernels = 1, .inputs = 5, .outputs = 1};
  wide.pattern = {{0, 0, 0}, {0, 1, 0}, {0, 2, 0}, {0, 3, 0}, {0, 4, 0}};
  CHECK_THAT(reason(wide, Precision::single), Catch::Contains("at most 4 inputs"));
  // Complex128 at L 128 x 128: one row-spectrum block is 64·129·16 = 132096 bytes; an output reading two
  // inputs needs two, beyond the 227 KiB of an H100 (or any device of up to 264 KiB).
  const Problem nv = test::with_pattern({.n1 = 63, .n2 = 63}, test::normal_vector_pattern());
  CHECK_THAT(reason(nv, Precision::double_), Catch::Contains("bytes of shared memory"));
  // Nine outputs each needing their own set (one block each in complex128 at L 128): beyond 8 sets.
  Problem many{.n1 = 63, .n2 = 63, .kernels = 1, .inputs = 1, .outputs = 9};
  many.pattern.clear();
  for (int o = 0; o < 9; ++o) many.pattern.push_back({o, 0, 0});
  CHECK_THAT(reason(many, Precision::double_), Catch::Contains("output sets"));
  // The same in complex64 fits (3 blocks of 66048 bytes per set: 3 sets).
  CHECK(conv::traits(Backend::gpu_fused).can_implement(conv::resolve(many), Precision::single).ok);
  // And make_convolution throws Unsupported with the reason.
  const std::vector<std::complex<double>> kernels(conv::resolve(nv).kernels_total(), {0.5, 0.25});
  CHECK_THROWS_AS(conv::make_convolution<double>(Backend::gpu_fused, nv, kernels), Unsupported);
}
