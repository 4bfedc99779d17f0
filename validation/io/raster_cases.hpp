#pragma once
// Cases and random numbers shared by the raster tests (test_npy.cpp, test_png.cpp).
#include <random>
#include <string>

namespace gratingsim::test {

/// A 400 × 300 nm crossed-grating case (or a 400 nm 1D one) with one patterned layer holding `shape`
/// (a flow map on one line), at line shape_line of the text.
inline std::string case_with(const std::string& shape, bool one_dimensional = false) {
  return std::string("wavelength: 633\n") +
         (one_dimensional ? "lattice: {period_x: 400}\n" : "lattice: {period_x: 400, period_y: 300}\n") +
         "materials: {glass: {n: 1.5}, high: {n: 2.5, k: 0.1}}\n"
         "substrate: glass\n"
         "layers:\n"
         "  - thickness: 120\n"
         "    slices: 3\n"
         "    background: glass\n"
         "    shapes:\n"
         "      - " + shape + "\n" +
         "numerics: {harmonics: 3}\n";
}
constexpr int shape_line = 10;

/// One engine per test process, freshly seeded (tests use fresh random data).
inline std::mt19937_64& rng() {
  static std::mt19937_64 engine{std::random_device{}()};
  return engine;
}

}  // namespace gratingsim::test
