// cpu-direct against independent references: analytic kernels (identity, shift) and a
// brute-force sum written in harmonic indices (m, m'), not array offsets.
#include <complex>
#include <vector>

#include "convolution/convolution.hpp"
#include "core/error.hpp"
#include "validation/convolution/backend_cases.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"
#include "validation/support/run_convolution.hpp"

using namespace gratingsim;
using conv::Backend;
using conv::Problem;

TEMPLATE_TEST_CASE("cpu-direct shifts a field by a delta kernel", "[convolution][cpu-direct]", float, double) {
  const Problem g{.n1 = 7, .n2 = 5, .slices = 2, .per_slice = 3};
  for (auto [s1, s2] : {std::pair{0, 0}, {1, 0}, {0, -2}, {-3, 4}, {6, -4}}) {
    auto plan = conv::make_convolution<TestType>(Backend::cpu_direct, g, test::delta_kernels(g, s1, s2));
    const auto in = test::random_complex<TestType>(g.input_size());
    std::vector<std::complex<TestType>> out;
    test::run_on_host(*plan, in, out);
    const auto expect = test::shifted_fields(g, in, s1, s2);
    for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == expect[i]);
  }
}

TEST_CASE("cpu-direct equals the convolution sum in harmonic indices", "[convolution][cpu-direct]") {
  const Problem g{.n1 = 5, .n2 = 3, .slices = 3, .per_slice = 2};
  const int m1 = 2, m2 = 1, k2 = 2 * g.n2 - 1;
  const auto kernels = test::random_complex<double>(g.kernels_total());
  const auto in = test::random_complex<double>(g.input_size());
  auto plan = conv::make_convolution<double>(Backend::cpu_direct, g, kernels);
  std::vector<std::complex<double>> out;
  test::run_on_host(*plan, in, out);
  REQUIRE(test::l2_norm<double>(out) > 0);
  for (int slice = 0; slice < g.slices; ++slice)
    for (int r = 0; r < g.per_slice; ++r) {
      const std::size_t b = slice * g.per_slice + r;
      const auto chi = [&](int n1, int n2) { return kernels[slice * g.kernel_size() + (n1 + 2 * m1) * k2 + n2 + 2 * m2]; };
      const auto field = [&](int q1, int q2) { return in[b * g.field_size() + (q1 + m1) * g.n2 + q2 + m2]; };
      for (int a1 = -m1; a1 <= m1; ++a1)
        for (int a2 = -m2; a2 <= m2; ++a2) {
          std::complex<double> sum = 0;
          for (int q1 = -m1; q1 <= m1; ++q1)
            for (int q2 = -m2; q2 <= m2; ++q2) sum += chi(a1 - q1, a2 - q2) * field(q1, q2);
          REQUIRE(std::abs(out[b * g.field_size() + (a1 + m1) * g.n2 + a2 + m2] - sum) <= 1e-13 * (1 + std::abs(sum)));
        }
    }
}

TEST_CASE("geometry errors name the offending value", "[convolution]") {
  const std::vector<std::complex<double>> k(1);
  CHECK_THROWS_AS(conv::resolve(Problem{.n1 = 4}), InvalidArgument);
  CHECK_THROWS_AS(conv::resolve(Problem{.n1 = 7, .l1 = 8}), InvalidArgument);
  CHECK_THROWS_AS(conv::resolve(Problem{.slices = 0}), InvalidArgument);
  CHECK_THROWS_AS(conv::make_convolution<double>(Backend::cpu_direct, Problem{.n1 = 3}, k), InvalidArgument);
  CHECK_THROWS_AS(conv::parse_backend("gpu-fast"), InvalidArgument);
  CHECK(conv::resolve(Problem{.n1 = 63, .n2 = 1}).l1 == 128);
  CHECK(conv::resolve(Problem{.n1 = 63, .n2 = 1}).l2 == 1);
  CHECK(conv::resolve(Problem{.n1 = 7, .n2 = 15}).l2 == 32);
}
