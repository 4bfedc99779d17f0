// The batched Gauss–Jordan inverse (physics/device_inverse.cu): A X = I and X A = I against direct sums on
// the host, for sizes within one panel and across many (and across several update tiles), with pivoting
// forced; the smallest pivot names singular matrices; a matrix's inverse is the same bits alone and in any
// batch at any position.
#include <Eigen/Dense>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/device_buffer.hpp"
#include "physics/device_inverse.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;
using C = std::complex<double>;

namespace {

/// Inverts `matrices` (each n×n, column-major) in one batch; returns the inverses and the smallest pivots,
/// both poisoned (NaN) before the call, so that an unwritten output fails the checks.
struct Inverted {
  std::vector<std::vector<C>> inverses;
  std::vector<double> smallest;
};
Inverted invert_on_device(const std::vector<std::vector<C>>& matrices, int n) {
  const std::size_t count = matrices.size(), size = std::size_t(n) * n;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  DeviceBuffer<C> a(count * size), x(count * size);
  DeviceBuffer<double> smallest(count);
  std::vector<C> all;
  for (const auto& m : matrices) all.insert(all.end(), m.begin(), m.end());
  a.upload(all);
  x.upload(std::vector<C>(count * size, C(nan, nan)));
  smallest.upload(std::vector<double>(count, nan));
  std::vector<C*> a_at, x_at;
  std::vector<double*> smallest_at;
  for (std::size_t k = 0; k < count; ++k) {
    a_at.push_back(a.data() + k * size);
    x_at.push_back(x.data() + k * size);
    smallest_at.push_back(smallest.data() + k);
  }
  DeviceBuffer<C*> a_list(count), x_list(count);
  DeviceBuffer<double*> smallest_list(count);
  a_list.upload(a_at);
  x_list.upload(x_at);
  smallest_list.upload(smallest_at);
  DeviceBuffer<unsigned char> workspace(inverse_workspace_bytes(n, int(count)));
  invert_batched(a_list.data(), x_list.data(), smallest_list.data(), n, int(count), workspace.data(), cudaStreamPerThread);
  Inverted out;
  std::vector<C> inverses(count * size);
  out.smallest.resize(count);
  x.download(inverses);  // waits for the inversion: the same stream
  smallest.download(out.smallest);
  for (std::size_t k = 0; k < count; ++k) out.inverses.emplace_back(inverses.begin() + k * size, inverses.begin() + (k + 1) * size);
  return out;
}

/// max |A X − I| and max |X A − I| by direct sums, and the bound they must meet: a backward-stable inverse's
/// residual element is a sum of n products, each off by a few ε of |A|max·|X|max.
struct Residual {
  double worst = 0, bound = 0;
};
Residual residual(const std::vector<C>& a, const std::vector<C>& x, int n) {
  double a_max = 0, x_max = 0, worst = 0;
  for (const C& v : a) a_max = std::max(a_max, std::abs(v));
  for (const C& v : x) x_max = std::isfinite(std::abs(v)) ? std::max(x_max, std::abs(v)) : INFINITY;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      C left = 0, right = 0;
      for (int k = 0; k < n; ++k) {
        left += a[std::size_t(k) * n + i] * x[std::size_t(j) * n + k];
        right += x[std::size_t(k) * n + i] * a[std::size_t(j) * n + k];
      }
      const C identity = i == j ? 1.0 : 0.0;
      const double e = std::max(std::abs(left - identity), std::abs(right - identity));
      worst = std::isfinite(e) ? std::max(worst, e) : INFINITY;
    }
  return {worst, 16 * double(n) * double(n) * std::numeric_limits<double>::epsilon() * a_max * x_max};
}

std::vector<C> random_matrix(int n) { return test::random_complex<double>(std::size_t(n) * n); }

/// A matrix whose own diagonal is 1e-3 of its other elements: each column's pivot is the row a random
/// permutation (no fixed point where n > 1) gives it, so elimination without row exchanges would fail.
std::vector<C> needs_pivoting(int n) {
  std::vector<C> m = random_matrix(n);
  for (C& v : m) v *= 1e-3;
  std::vector<int> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  if (n > 1) std::rotate(rows.begin(), rows.begin() + 1 + int(test::rng()() % std::uint64_t(n - 1)), rows.end());
  for (int j = 0; j < n; ++j) m[std::size_t(j) * n + rows[std::size_t(j)]] = C(1.0 + 0.5 * j / n, -0.3);
  return m;
}

}  // namespace

TEST_CASE("invert_batched: A X = I and X A = I by direct sums, within one panel and across many, pivoting forced",
          "[physics][gpu]") {
  // Every panel kernel: each register shape (1 to 8 rows of 32 per lane with two columns per warp, then 10,
  // 12, 14, 16 with one), several at their edges, and the shared-memory kernel beyond 512.
  for (int n : {1, 2, 31, 32, 33, 65, 97, 128, 129, 161, 200, 256, 258, 384, 385, 512, 513}) {
    const std::vector<std::vector<C>> matrices{random_matrix(n), needs_pivoting(n), random_matrix(n)};
    const Inverted out = invert_on_device(matrices, n);
    INFO("n = " << n << ", panel width " << inverse_panel_width(n));
    for (std::size_t k = 0; k < matrices.size(); ++k) {
      const Residual r = residual(matrices[k], out.inverses[k], n);
      INFO("matrix " << k << ": max |AX − I|, |XA − I| = " << r.worst << ", bound " << r.bound);
      CHECK(r.worst <= r.bound);
      // The smallest pivot against Eigen's LU (partial pivoting by modulus, not |re| + |im|: near ties may
      // pick other rows and move the last pivots, so only the order of magnitude is compared; a largest
      // element or a missing pivot would be off by far more).
      using Matrix = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic>;
      const Matrix a = Eigen::Map<const Matrix>(matrices[k].data(), n, n);
      const double eigen_smallest = a.partialPivLu().matrixLU().diagonal().cwiseAbs().minCoeff();
      CHECK(out.smallest[k] > 0.01 * eigen_smallest);
      CHECK(out.smallest[k] < 100 * eigen_smallest);
    }
  }
}

TEST_CASE("invert_batched: the smallest pivot is 0 for a zero column and tiny for two equal columns", "[physics][gpu]") {
  const int n = 45;
  std::vector<C> zero_column = random_matrix(n), equal_columns = random_matrix(n);
  for (int i = 0; i < n; ++i) {
    zero_column[std::size_t(17) * n + i] = 0;
    equal_columns[std::size_t(40) * n + i] = equal_columns[std::size_t(3) * n + i];
  }
  const Inverted out = invert_on_device({zero_column, equal_columns, random_matrix(n)}, n);
  CHECK(out.smallest[0] == 0);
  CHECK(out.smallest[1] <= 1e-13);  // elements of order 1: the sweep's test calls this singular
  CHECK(out.smallest[2] > 1e-6);
}

TEST_CASE("invert_batched: a matrix's inverse is the same bits alone and at any position of any batch", "[physics][gpu]") {
  for (int n : {64, 258, 513}) {
    const std::vector<C> m = random_matrix(n);
    const Inverted alone = invert_on_device({m}, n);
    std::vector<std::vector<C>> batch;
    for (int k = 0; k < 7; ++k) batch.push_back(k == 4 ? m : random_matrix(n));
    const Inverted in_batch = invert_on_device(batch, n);
    std::vector<std::vector<C>> other{random_matrix(n), m};
    const Inverted second = invert_on_device(other, n);
    INFO("n = " << n);
    CHECK(residual(m, alone.inverses[0], n).worst <= residual(m, alone.inverses[0], n).bound);
    CHECK(std::memcmp(alone.inverses[0].data(), in_batch.inverses[4].data(), alone.inverses[0].size() * sizeof(C)) == 0);
    CHECK(std::memcmp(alone.inverses[0].data(), second.inverses[1].data(), alone.inverses[0].size() * sizeof(C)) == 0);
    CHECK(alone.smallest[0] == in_batch.smallest[4]);
    CHECK(alone.smallest[0] == second.smallest[1]);
  }
}
