// gpu-direct beyond the shared harness (test_gpu_backends.cpp): both forms with every tile on every
// harness geometry (the harness only sees the tile the rule picks), the N1·N2 limit declined with an
// Unsupported naming it, an explicit non-blocking stream, kernels replaced between runs, repeatability,
// an analytic shift, and argument errors; problems with patterns (the NV patterns and random ones on 1D
// and 2D shapes) through the rule's choice and through every form and tile.
#include <complex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "convolution/gpu_direct.hpp"
#include "validation/convolution/gpu_test_support.hpp"
#include "validation/convolution/pattern_cases.hpp"

using namespace gratingsim;
using conv::Backend;
using conv::Problem;
using conv::detail::DirectForm;
using conv::detail::DirectTiling;

namespace {
const std::vector<DirectTiling> all_tilings{
    {DirectForm::direct_sum, 1},       {DirectForm::direct_sum, 2},       {DirectForm::direct_sum, 4},
    {DirectForm::direct_sum, 8},       {DirectForm::toeplitz_product, 1}, {DirectForm::toeplitz_product, 2},
    {DirectForm::toeplitz_product, 4},
};

std::string describe(DirectTiling t) {
  return std::string(t.form == DirectForm::direct_sum ? "direct sum R = " : "Toeplitz product TM = ") +
         std::to_string(t.outputs_per_thread);
}

// A forced tile may need more shared memory than the device has (R = 8 on a 961 x 1 grating pads each
// χ row with 14 zeros): that plan is declined and skipped. The rule's own choice is never declined
// below the limit (the harness and the limit test check that through make_convolution).
template <class Real>
std::unique_ptr<conv::Convolution<Real>> make_or_decline(const Problem& g, const std::vector<std::complex<double>>& kernels,
                                                         DirectTiling tiling) {
  try {
    return conv::detail::make_gpu_direct<Real>(g, kernels, tiling);
  } catch (const Unsupported& e) {
    WARN(describe(tiling) << " declined: " << e.what());
    return nullptr;
  }
}

/// Every form and tile that serves `c` equals cpu-direct on one set of random kernels and fields.
template <class Real>
void check_every_tiling(const test::NamedGeometry& c) {
  const auto kernels = test::random_kernels<Real>(c.geometry);
  const auto in = test::random_complex<Real>(c.geometry.input_size());
  for (const auto tiling : all_tilings) {
    INFO(c.name << ", " << describe(tiling));
    auto plan = make_or_decline<Real>(c.geometry, kernels, tiling);
    if (!plan) continue;
    std::vector<std::complex<Real>> out;
    test::run_on_host(*plan, in, out);
    CHECK(test::worst_error_against_direct<Real>(c.geometry, kernels, in, out) <= test::backend_tolerance<Real>());
  }
}
}  // namespace

TEMPLATE_TEST_CASE("gpu-direct (its own choice of form) equals cpu-direct on every harness geometry",
                   "[convolution][gpu-direct]", float, double) {
  // The shared harness runs all GPU backends in one test case; this one does not depend on the others.
  for (const auto& c : test::backend_test_geometries()) test::check_backend_against_direct<TestType>(Backend::gpu_direct, c);
}

TEMPLATE_TEST_CASE("gpu-direct: every form and tile equals cpu-direct", "[convolution][gpu-direct]", float, double) {
  for (const auto& c : test::backend_test_geometries())
    if (c.geometry.field_size() <= std::size_t(conv::detail::gpu_direct_max_field_size))  // declined above it
      check_every_tiling<TestType>(c);
}

TEST_CASE("gpu-direct declines N1*N2 above its limit, naming it", "[convolution][gpu-direct]") {
  const std::string limit = std::to_string(conv::detail::gpu_direct_max_field_size);
  for (const Problem g : {Problem{.n1 = 63, .n2 = 63}, Problem{.n1 = 33, .n2 = 31}, Problem{.n1 = 963, .n2 = 1}}) {
    INFO(g.n1 << " x " << g.n2);
    const std::vector<std::complex<double>> kernels(g.kernels_total(), 1.0);
    try {
      conv::make_convolution<float>(Backend::gpu_direct, g, kernels);
      FAIL("gpu-direct accepted a shape above its limit");
    } catch (const Unsupported& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(limit) != std::string::npos);
    }
  }
  // The limit itself is served, square and 1D.
  for (const Problem g : {Problem{.n1 = 31, .n2 = 31}, Problem{.n1 = 961, .n2 = 1}, Problem{.n1 = 1, .n2 = 961}}) {
    INFO(g.n1 << " x " << g.n2);
    const std::vector<std::complex<double>> kernels(g.kernels_total(), 1.0);
    CHECK_NOTHROW(conv::make_convolution<double>(Backend::gpu_direct, g, kernels));
  }
}

TEST_CASE("gpu-direct's rule: direct sum on long rows, Toeplitz product on short ones", "[convolution][gpu-direct]") {
  using conv::detail::choose_direct_tiling;
  const DirectTiling case3 = choose_direct_tiling({.n1 = 31, .n2 = 31, .slices = 129, .per_slice = 24});
  CHECK(case3.form == DirectForm::direct_sum);
  CHECK(case3.outputs_per_thread == 8);
  CHECK(choose_direct_tiling({.n1 = 63, .n2 = 1, .slices = 40, .per_slice = 24}).form == DirectForm::toeplitz_product);
  const DirectTiling few_fields = choose_direct_tiling({.n1 = 63, .n2 = 1, .slices = 40, .per_slice = 3});
  CHECK(few_fields.form == DirectForm::direct_sum);
  CHECK(few_fields.outputs_per_thread == 1);
}

TEMPLATE_TEST_CASE("gpu-direct on shapes beyond the harness", "[convolution][gpu-direct]", float, double) {
  const std::vector<test::NamedGeometry> shapes{
      {"the limit, 1D (961 x 1)", {.n1 = 961, .n2 = 1, .slices = 1, .per_slice = 5}},
      {"the limit, square (31 x 31), one field per kernel", {.n1 = 31, .n2 = 31, .slices = 3, .per_slice = 1}},
      {"many fields per kernel (5 x 5 x 70)", {.n1 = 5, .n2 = 5, .slices = 2, .per_slice = 70}},
      {"a large batch (3 x 3, 80000 blocks)", {.n1 = 3, .n2 = 3, .slices = 2, .per_slice = 40000}},
  };
  for (const auto& c : shapes) check_every_tiling<TestType>(c);
}

TEMPLATE_TEST_CASE("gpu-direct on a non-blocking stream, with kernels replaced", "[convolution][gpu-direct]", float,
                   double) {
  const Problem g{.n1 = 15, .n2 = 13, .slices = 3, .per_slice = 5};
  const auto first = test::random_kernels<TestType>(g), second = test::random_kernels<TestType>(g);
  const test::TestStream stream;
  const auto in = test::random_complex<TestType>(g.input_size());
  for (const auto tiling : all_tilings) {
    INFO(describe(tiling));
    auto plan = conv::detail::make_gpu_direct<TestType>(g, first, tiling);
    const auto out_first = test::run_on_stream(*plan, in, stream.get());
    CHECK(test::worst_error_against_direct<TestType>(g, first, in, out_first) <= test::backend_tolerance<TestType>());
    CHECK(test::run_on_stream(*plan, in, stream.get()) == out_first);  // deterministic: same order of sums
    plan->set_kernels(second);
    const auto out_second = test::run_on_stream(*plan, in, stream.get());
    CHECK(test::worst_error_against_direct<TestType>(g, second, in, out_second) <= test::backend_tolerance<TestType>());
    CHECK(test::worst_error_against_direct<TestType>(g, first, in, out_second) > 0.1);
  }
}

TEMPLATE_TEST_CASE("gpu-direct: a plan still runs after a later plan of the same kernel needing less shared memory",
                   "[convolution][gpu-direct]", float, double) {
  // The dynamic shared-memory limit is an attribute of the kernel function, not of a plan: the Richardson
  // pair of a 1D solve (the same pattern on 80 and on 40 slices) once made the first plan's launches fail.
  // Many slices: one chunk of 4 fields per block; few: a block per field (to fill the SMs), less memory.
  Problem large{.n1 = 49, .n2 = 1, .slices = 600, .per_slice = 4}, small = large;
  small.slices = 10;
  const DirectTiling tiling{DirectForm::direct_sum, 1};
  const auto kernels = test::random_kernels<TestType>(large);
  const auto small_kernels = test::random_kernels<TestType>(small);
  const test::TestStream stream;
  auto first = conv::detail::make_gpu_direct<TestType>(large, kernels, tiling);
  auto second = conv::detail::make_gpu_direct<TestType>(small, small_kernels, tiling);
  const auto in = test::random_complex<TestType>(large.input_size());
  const auto out = test::run_on_stream(*first, in, stream.get());
  CHECK(test::worst_error_against_direct<TestType>(large, kernels, in, out) <= test::backend_tolerance<TestType>());
  const auto small_in = test::random_complex<TestType>(small.input_size());
  const auto small_out = test::run_on_stream(*second, small_in, stream.get());
  CHECK(test::worst_error_against_direct<TestType>(small, small_kernels, small_in, small_out) <=
        test::backend_tolerance<TestType>());
}

TEMPLATE_TEST_CASE("gpu-direct shifts a field by a delta kernel exactly", "[convolution][gpu-direct]", float, double) {
  // χ = δ(n − s): out(m) = in(m − s) inside the block, 0 where m − s leaves it; a sum of exact zeros and
  // one product by 1, so the result is exact in any precision.
  const Problem g{.n1 = 9, .n2 = 7, .slices = 2, .per_slice = 5};
  for (auto [s1, s2] : {std::pair{0, 0}, {2, -1}, {-8, 6}, {5, 0}}) {
    const auto kernels = test::delta_kernels(g, s1, s2);
    const auto in = test::random_complex<TestType>(g.input_size());
    const auto expect = test::shifted_fields(g, in, s1, s2);
    for (const auto tiling : all_tilings) {
      INFO(describe(tiling) << ", shift " << s1 << ", " << s2);
      auto plan = conv::detail::make_gpu_direct<TestType>(g, kernels, tiling);
      std::vector<std::complex<TestType>> out;
      test::run_on_host(*plan, in, out);
      for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == expect[i]);
    }
  }
}

TEST_CASE("gpu-direct rejects bad arguments", "[convolution][gpu-direct]") {
  const Problem g{.n1 = 5, .n2 = 5, .slices = 2, .per_slice = 2};
  const auto kernels = test::random_kernels<float>(g);
  CHECK_THROWS_AS(conv::detail::make_gpu_direct<float>(g, kernels, {DirectForm::direct_sum, 3}), InvalidArgument);
  CHECK_THROWS_AS(conv::detail::make_gpu_direct<float>(g, kernels, {DirectForm::toeplitz_product, 8}), InvalidArgument);
  test::check_bad_arguments_refused(Backend::gpu_direct);
}

TEMPLATE_TEST_CASE("gpu-direct pattern problems (its own choice of form) equal cpu-direct",
                   "[convolution][gpu-direct][pattern]", float, double) {
  test::check_patterns_against_direct<TestType>(Backend::gpu_direct);
}

TEMPLATE_TEST_CASE("gpu-direct pattern problems: every form and tile equals cpu-direct",
                   "[convolution][gpu-direct][pattern]", float, double) {
  std::vector<test::NamedGeometry> shapes = test::pattern_test_shapes();
  // Enough groups per slice for full Toeplitz-product field tiles, and the limit with a pattern.
  shapes.push_back({"9 groups per slice (7 x 5)", {.n1 = 7, .n2 = 5, .slices = 2, .per_slice = 9}});
  shapes.push_back({"the limit, square (31 x 31)", {.n1 = 31, .n2 = 31, .slices = 1, .per_slice = 2}});
  for (const test::Pattern& pattern : test::test_patterns())
    for (const auto& shape : shapes) {
      const Problem g = test::with_pattern(shape.geometry, pattern);
      const auto data = test::pattern_data<TestType>(g);
      for (const auto tiling : all_tilings) {
        INFO(pattern.name << ", " << shape.name << ", " << describe(tiling));
        auto plan = make_or_decline<TestType>(g, data.kernels, tiling);
        if (!plan) continue;
        test::check_plan_against_direct(*plan, data);
      }
    }
}

TEST_CASE("gpu-direct serves patterns up to its N1*N2 limit", "[convolution][gpu-direct][pattern]") {
  const Problem at_limit = test::with_pattern({.n1 = 31, .n2 = 31}, test::normal_vector_pattern());
  const Problem above = test::with_pattern({.n1 = 33, .n2 = 31}, test::normal_vector_pattern());
  CHECK(conv::traits(Backend::gpu_direct).can_implement(conv::resolve(at_limit), Precision::double_).ok);
  const auto refused = conv::traits(Backend::gpu_direct).can_implement(conv::resolve(above), Precision::double_);
  CHECK_FALSE(refused.ok);
  CHECK_THAT(refused.reason, Catch::Contains(std::to_string(conv::detail::gpu_direct_max_field_size)));
  CHECK_THROWS_AS(conv::make_convolution<double>(Backend::gpu_direct, above,
                                                 std::vector<std::complex<double>>(above.kernels_total(), 1.0)),
                  Unsupported);
}
