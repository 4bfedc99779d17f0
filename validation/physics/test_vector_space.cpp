// physics/vector_space.cpp: the host batched vectors against direct sums over the layout of
// vector_space.hpp, in both precisions; the basis pass of classical Gram–Schmidt (dots, combine, and fused as
// combine_dots and combine_norm, equal to the separate calls bit for bit)
// against the one-vector operations; reductions independent of the number of OpenMP threads; the sparse upload and
// the copy (vector_space_checks.hpp).
#include <omp.h>

#include <cmath>
#include <complex>
#include <limits>
#include <vector>

#include "physics/vector_space.hpp"
#include "validation/physics/vector_space_checks.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;
using Scalar = std::complex<double>;

namespace {

template <class Real>
double tolerance() {
  return std::is_same_v<Real, float> ? 2e-5 : 1e-13;
}

/// Σ_j conj(a)·b over the elements of rhs r, in complex128, straight from the layout's definition.
template <class Real>
Scalar direct_dot(const BatchLayout& l, const std::complex<Real>* a, const std::complex<Real>* b, std::size_t r) {
  Scalar sum = 0;
  for (std::size_t p = 0; p < l.slices; ++p)
    for (std::size_t j = 0; j < l.block; ++j) {
      const std::size_t e = (p * l.rhs + r) * l.block + j;
      sum += std::conj(Scalar(a[e])) * Scalar(b[e]);
    }
  return sum;
}

}  // namespace

TEMPLATE_TEST_CASE("host vector space: dots, combine, norm and axpy against direct sums", "[physics][vector_space]",
                   float, double) {
  using Complex = std::complex<TestType>;
  // Large enough for the parallel paths (2^16 elements) and more slices than reduction chunks.
  for (const BatchLayout l : {BatchLayout{3, 2, 5}, BatchLayout{150, 3, 201}}) {
    INFO("slices " << l.slices << ", rhs " << l.rhs << ", block " << l.block);
    const int basis = 6, y = basis, count = basis + 2;
    auto space = make_host_vector_space<TestType>(l, count);
    std::vector<std::vector<Complex>> v;
    for (int i = 0; i <= basis; ++i) {
      v.push_back(test::random_complex<TestType>(l.size()));
      space->upload(v.back(), i);
    }
    const double scale = double(l.slices * l.block);
    // dots: one pass over the basis, equal to the one-vector dot and to the direct sum
    std::vector<Scalar> got(std::size_t(basis) * l.rhs, test::poison<double>()), one(l.rhs);
    space->dots(0, basis, y, got);
    for (int i = 0; i < basis; ++i) {
      space->dot(i, y, one);
      for (std::size_t r = 0; r < l.rhs; ++r) {
        const Scalar expect = direct_dot(l, v[i].data(), v[y].data(), r);
        CHECK(std::abs(got[std::size_t(i) * l.rhs + r] - expect) <= tolerance<TestType>() * scale);
        CHECK(std::abs(one[r] - expect) <= tolerance<TestType>() * scale);
      }
    }
    // norm
    std::vector<double> norms(l.rhs, std::nan(""));
    space->norm(y, norms);
    for (std::size_t r = 0; r < l.rhs; ++r)
      CHECK(std::abs(norms[r] - std::sqrt(direct_dot(l, v[y].data(), v[y].data(), r).real())) <=
            tolerance<TestType>() * scale);
    // combine: y_r += Σ_i a_{i,r} V_{i,r}, one coefficient left at zero
    std::vector<Scalar> a(std::size_t(basis) * l.rhs);
    for (auto& c : a) c = Scalar(test::random_complex<double>(1)[0]);
    a[1] = 0;
    space->combine(a, 0, basis, y);
    std::vector<Complex> out(l.size(), test::poison<TestType>());
    space->download(y, out);
    double worst = 0;
    for (std::size_t p = 0; p < l.slices; ++p)
      for (std::size_t r = 0; r < l.rhs; ++r)
        for (std::size_t j = 0; j < l.block; ++j) {
          const std::size_t e = (p * l.rhs + r) * l.block + j;
          Scalar expect = Scalar(v[y][e]);
          for (int i = 0; i < basis; ++i) expect += a[std::size_t(i) * l.rhs + r] * Scalar(v[i][e]);
          worst = std::max(worst, std::abs(Scalar(out[e]) - expect));
        }
    CHECK(worst <= tolerance<TestType>() * 10);
    // combining into one of the basis vectors is refused
    CHECK_THROWS(space->combine(a, 0, basis, 2));
  }
}

TEST_CASE("host vector space: reductions do not depend on the number of threads", "[physics][vector_space]") {
  const BatchLayout l{200, 2, 300};
  auto space = make_host_vector_space<double>(l, 3);
  space->upload(test::random_complex<double>(l.size()), 0);
  space->upload(test::random_complex<double>(l.size()), 1);
  const int threads = omp_get_max_threads();
  std::vector<Scalar> reference(2 * l.rhs), got(2 * l.rhs);
  omp_set_num_threads(1);
  space->dots(0, 2, 1, reference);
  for (int t : {2, 3, 7}) {
    omp_set_num_threads(t);
    space->dots(0, 2, 1, got);
    CHECK(got == reference);  // bit for bit
  }
  omp_set_num_threads(threads);
}

TEMPLATE_TEST_CASE("host vector space: combine_dots and combine_norm equal combine then dots or norm, bit for bit",
                   "[physics][vector_space]", float, double) {
  using Complex = std::complex<TestType>;
  // Enough elements for the parallel paths; fresh random basis, w and coefficients, one coefficient zero (skipped).
  const BatchLayout l{97, 3, 211};
  constexpr int basis = 5, w = basis;
  auto fused = make_host_vector_space<TestType>(l, basis + 1);
  auto separate = make_host_vector_space<TestType>(l, basis + 1);
  for (int i = 0; i <= basis; ++i) {
    const std::vector<Complex> v = test::random_complex<TestType>(l.size());
    fused->upload(v, i);
    separate->upload(v, i);
  }
  std::vector<Scalar> a(std::size_t(basis) * l.rhs);
  const std::vector<Complex> random = test::random_complex<TestType>(a.size());
  for (std::size_t k = 0; k < a.size(); ++k) a[k] = Scalar(random[k]);
  a[std::size_t(2) * l.rhs + 1] = 0;
  const Scalar poison(std::nan(""), std::nan(""));
  std::vector<Scalar> got(a.size(), poison), expected(a.size(), poison);
  fused->combine_dots(a, 0, basis, w, got);
  separate->combine(a, 0, basis, w);
  separate->dots(0, basis, w, expected);
  CHECK(got == expected);
  const std::vector<Complex> after_fused = [&] {
    std::vector<Complex> out(l.size());
    fused->download(w, out);
    return out;
  }();
  std::vector<Complex> after_separate(l.size());
  separate->download(w, after_separate);
  CHECK(after_fused == after_separate);
  // The dots of the updated w against the direct sum (the fused pass did update w before its dots).
  for (std::size_t r = 0; r < l.rhs; ++r)
    CHECK(std::abs(got[std::size_t(basis - 1) * l.rhs + r] -
                   direct_dot<TestType>(l, fused->data(basis - 1), fused->data(w), r)) <=
          tolerance<TestType>() * std::abs(got[std::size_t(basis - 1) * l.rhs + r]));

  std::vector<double> norm_fused(l.rhs, std::nan("")), norm_separate(l.rhs, std::nan(""));
  fused->combine_norm(a, 0, basis, w, norm_fused);
  separate->combine(a, 0, basis, w);
  separate->norm(w, norm_separate);
  CHECK(norm_fused == norm_separate);
  for (std::size_t r = 0; r < l.rhs; ++r) CHECK(std::isfinite(norm_fused[r]));
  std::vector<Complex> w_fused(l.size()), w_separate(l.size());
  fused->download(w, w_fused);
  separate->download(w, w_separate);
  CHECK(w_fused == w_separate);
  CHECK_THROWS(fused->combine_dots(a, 0, basis, 2, got));  // into one of its own basis vectors
}

TEMPLATE_TEST_CASE("host vector space: linear_update against the direct sum, y unread where a = 0, norms in the pass",
                   "[physics][vector_space]", float, double) {
  using Complex = std::complex<TestType>;
  // y ← a·y + b·u + c·w per rhs: rhs 0 random coefficients; rhs 1 a = 0 over a y of NaN (never read); rhs 2
  // (1, 0, 0), its y kept bit for bit. A small layout and one large enough for the parallel paths.
  for (const BatchLayout l : {BatchLayout{3, 3, 5}, BatchLayout{150, 3, 201}}) {
    INFO("slices " << l.slices << ", block " << l.block);
    for (const bool with_norms : {false, true}) {
      INFO("norms " << with_norms);
      constexpr int y = 0, u = 1, w = 2;
      auto space = make_host_vector_space<TestType>(l, 3);
      std::vector<Complex> y0 = test::random_complex<TestType>(l.size());
      const std::vector<Complex> u0 = test::random_complex<TestType>(l.size()), w0 = test::random_complex<TestType>(l.size());
      const TestType nan = std::numeric_limits<TestType>::quiet_NaN();
      for (std::size_t p = 0; p < l.slices; ++p)
        for (std::size_t j = 0; j < l.block; ++j) y0[(p * l.rhs + 1) * l.block + j] = Complex(nan, nan);
      space->upload(y0, y);
      space->upload(u0, u);
      space->upload(w0, w);
      const std::vector<Complex> k = test::random_complex<TestType>(3);
      const std::vector<Scalar> a{Scalar(k[0]), 0.0, 1.0}, b{Scalar(k[1]), Scalar(k[2]), 0.0},
          c{Scalar(k[2]), Scalar(k[0]), 0.0};
      std::vector<double> norms(with_norms ? l.rhs : 0, std::nan(""));
      space->linear_update(a, y, b, u, c, w, norms);
      std::vector<Complex> out(l.size(), test::poison<TestType>());
      space->download(y, out);
      std::vector<double> worst(l.rhs, 0.0), norm2(l.rhs, 0.0);
      for (std::size_t p = 0; p < l.slices; ++p)
        for (std::size_t r = 0; r < l.rhs; ++r)
          for (std::size_t j = 0; j < l.block; ++j) {
            const std::size_t e = (p * l.rhs + r) * l.block + j;
            norm2[r] += std::norm(Scalar(out[e]));
            if (r == 2) {
              CHECK(out[e] == y0[e]);
              continue;
            }
            const Scalar expect = (r == 1 ? Scalar(0) : a[r] * Scalar(y0[e])) + b[r] * Scalar(u0[e]) + c[r] * Scalar(w0[e]);
            worst[r] = std::max(worst[r], std::abs(Scalar(out[e]) - expect));
          }
      CHECK(worst[0] <= tolerance<TestType>() * 10);
      CHECK(worst[1] <= tolerance<TestType>() * 10);  // finite: the NaN of y was not read
      for (std::size_t r = 0; r < l.rhs && with_norms; ++r)
        CHECK(std::abs(norms[r] - std::sqrt(norm2[r])) <= tolerance<TestType>() * std::sqrt(norm2[r]));
    }
  }
  auto space = make_host_vector_space<double>(BatchLayout{2, 1, 3}, 3);
  const std::vector<Scalar> one{1.0};
  CHECK_THROWS(space->linear_update(one, 0, one, 0, one, 2, {}));  // y among the inputs
}

TEMPLATE_TEST_CASE("host vector space: upload_strided sets one element in `stride` over zeros, copy copies it",
                   "[physics][vector_space]", float, double) {
  // A small layout and one large enough for the parallel paths (2^16 elements).
  for (const BatchLayout l : {BatchLayout{3, 2, 15}, BatchLayout{150, 3, 201}}) {
    auto space = make_host_vector_space<TestType>(l, 3);
    test::check_upload_strided<TestType>(*space);
  }
}
