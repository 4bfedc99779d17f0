#pragma once
// Two result files of one case hold the same points, bit for bit, their solve and phase times aside (the
// app tests of runs whose workers, ranks or units differ: validation/app/test_sweep_executor.cpp,
// test_distributed_sweep.cpp).
#include <cmath>
#include <filesystem>

#include "io/results.hpp"
#include "validation/support/catch.hpp"

namespace gratingsim::test {

/// Every point of `file` is done and equals the reference's bit for bit, its solve and phase times aside
/// (each must be finite and ≥ 0, the solve time > 0), and so does the run information, the device attribute
/// aside (several workers: "2 × ...").
inline void check_same_points(const std::filesystem::path& file, const std::filesystem::path& reference) {
  const io::ResultReader a(file.string()), b(reference.string());
  REQUIRE(a.layout() == b.layout());
  io::RunInfo info = a.info();
  info.device = b.info().device;
  CHECK(info == b.info());
  for (std::size_t p = 0; p < b.layout().points(); ++p) {
    INFO("point " << p);
    REQUIRE(a.done(p));
    io::PointResult x = a.read(p), y = b.read(p);
    CHECK(x.solve_seconds > 0);
    for (const double s : x.phase_seconds) CHECK((std::isfinite(s) && s >= 0));
    x.solve_seconds = y.solve_seconds = 0;
    x.phase_seconds = y.phase_seconds = {};
    CHECK(x == y);
  }
}

}  // namespace gratingsim::test
