#pragma once
// Fresh random test data: a new seed each run (printed, so a failure can be replayed with
// GRATINGSIM_TEST_SEED), never zeros.
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace gratingsim::test {

inline std::mt19937_64& rng() {
  static std::mt19937_64 engine = [] {
    std::uint64_t seed = std::random_device{}();
    if (const char* s = std::getenv("GRATINGSIM_TEST_SEED")) seed = std::strtoull(s, nullptr, 10);
    std::printf("random seed %llu (GRATINGSIM_TEST_SEED to replay)\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return engine;
}

/// n complex values with real and imaginary parts uniform in [-1, 1).
template <class Real>
std::vector<std::complex<Real>> random_complex(std::size_t n) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<std::complex<Real>> v(n);
  for (auto& z : v) z = {Real(u(rng())), Real(u(rng()))};
  return v;
}

}  // namespace gratingsim::test
