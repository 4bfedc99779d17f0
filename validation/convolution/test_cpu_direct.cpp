// cpu-direct against independent references: analytic kernels (identity, shift) and a
// brute-force sum written in harmonic indices (m, m'), not array offsets.
#include <complex>
#include <vector>

#include "convolution/convolution.hpp"
#include "convolution/error.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"
#include "validation/support/run_convolution.hpp"

using namespace gratingsim;
using conv::Backend;
using conv::Geometry;

namespace {
// χ with a single unit coefficient at (s1, s2): out(m) = in(m − s), zero where m − s leaves the block.
std::vector<std::complex<double>> delta_kernel(const Geometry& g, int s1, int s2) {
  std::vector<std::complex<double>> k(g.kernels_total(), 0.0);
  const int k2 = 2 * g.n2 - 1;
  for (int p = 0; p < g.slices; ++p) k[p * g.kernel_size() + (s1 + g.n1 - 1) * k2 + (s2 + g.n2 - 1)] = 1.0;
  return k;
}
}  // namespace

TEMPLATE_TEST_CASE("cpu-direct shifts a field by a delta kernel", "[convolution][cpu-direct]", float, double) {
  const Geometry g{.n1 = 7, .n2 = 5, .slices = 2, .per_slice = 3};
  const int m1 = 3, m2 = 2;
  for (auto [s1, s2] : {std::pair{0, 0}, {1, 0}, {0, -2}, {-3, 4}, {6, -4}}) {
    auto plan = conv::make_convolution<TestType>(Backend::cpu_direct, g, delta_kernel(g, s1, s2));
    const auto in = test::random_complex<TestType>(g.fields_total());
    std::vector<std::complex<TestType>> out;
    test::run_on_host(*plan, in, out);
    for (std::size_t b = 0; b < g.batch(); ++b)
      for (int i1 = -m1; i1 <= m1; ++i1)
        for (int i2 = -m2; i2 <= m2; ++i2) {
          const int j1 = i1 - s1, j2 = i2 - s2;
          const bool inside = j1 >= -m1 && j1 <= m1 && j2 >= -m2 && j2 <= m2;
          const auto expect = inside ? in[b * g.field_size() + (j1 + m1) * g.n2 + (j2 + m2)] : std::complex<TestType>{};
          REQUIRE(out[b * g.field_size() + (i1 + m1) * g.n2 + (i2 + m2)] == expect);
        }
  }
}

TEST_CASE("cpu-direct equals the convolution sum in harmonic indices", "[convolution][cpu-direct]") {
  const Geometry g{.n1 = 5, .n2 = 3, .slices = 3, .per_slice = 2};
  const int m1 = 2, m2 = 1, k2 = 2 * g.n2 - 1;
  const auto kernels = test::random_complex<double>(g.kernels_total());
  const auto in = test::random_complex<double>(g.fields_total());
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
  CHECK_THROWS_AS(conv::resolve(Geometry{.n1 = 4}), InvalidArgument);
  CHECK_THROWS_AS(conv::resolve(Geometry{.n1 = 7, .l1 = 8}), InvalidArgument);
  CHECK_THROWS_AS(conv::resolve(Geometry{.slices = 0}), InvalidArgument);
  CHECK_THROWS_AS(conv::make_convolution<double>(Backend::cpu_direct, Geometry{.n1 = 3}, k), InvalidArgument);
  CHECK_THROWS_AS(conv::parse_backend("gpu-fast"), InvalidArgument);
  CHECK(conv::resolve(Geometry{.n1 = 63, .n2 = 1}).l1 == 128);
  CHECK(conv::resolve(Geometry{.n1 = 63, .n2 = 1}).l2 == 1);
  CHECK(conv::resolve(Geometry{.n1 = 7, .n2 = 15}).l2 == 32);
}
