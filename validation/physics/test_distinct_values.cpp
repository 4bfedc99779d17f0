// distinct_values (physics/distinct_values.hpp), which groups the orders' kz so that the z-operator's
// and the far field's tables are computed once per value (issue #15), against a pairwise comparison
// of bit patterns on random lists with repeated values and both signed zeros.
#include <bit>
#include <complex>
#include <cstdint>
#include <random>
#include <vector>

#include "physics/distinct_values.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;
using Complex = std::complex<double>;

TEST_CASE("distinct values: classes are equal bit patterns, numbered by first occurrence", "[physics][distinct_values]") {
  for (int trial = 0; trial < 20; ++trial) {
    std::uniform_int_distribution<int> pick(0, 5), size(1, 100);
    auto& g = test::rng();
    // A few random values and the signed zeros, drawn with repetition.
    std::vector<Complex> pool = test::random_complex<double>(4);
    pool.push_back({0.0, 0.0});
    pool.push_back({-0.0, 0.0});
    std::vector<Complex> values(std::size_t(size(g)));
    for (Complex& v : values) v = pool[std::size_t(pick(g))];
    const DistinctValues d = distinct_values(values);
    REQUIRE(d.class_of.size() == values.size());
    const auto bits_equal = [](Complex x, Complex y) {
      return std::bit_cast<std::uint64_t>(x.real()) == std::bit_cast<std::uint64_t>(y.real()) &&
             std::bit_cast<std::uint64_t>(x.imag()) == std::bit_cast<std::uint64_t>(y.imag());
    };
    for (std::size_t i = 0; i < values.size(); ++i) {
      INFO("entry " << i);
      REQUIRE(d.class_of[i] < d.first.size());
      for (std::size_t j = 0; j < values.size(); ++j)
        CHECK((d.class_of[i] == d.class_of[j]) == bits_equal(values[i], values[j]));
      // first: the smallest index of the class, classes numbered by it in ascending order
      const std::size_t first = d.first[d.class_of[i]];
      CHECK(first <= i);
      CHECK(bits_equal(values[first], values[i]));
      for (std::size_t j = 0; j < first; ++j) CHECK_FALSE(bits_equal(values[j], values[i]));
    }
    for (std::size_t k = 1; k < d.first.size(); ++k) CHECK(d.first[k - 1] < d.first[k]);
  }
}
