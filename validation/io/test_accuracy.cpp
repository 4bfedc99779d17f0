// Accuracy on demand (io/accuracy.hpp): the harmonics ladder; slices: auto reaches its target on a
// homogeneous film against the Airy formula and records what it used; a point's result does not
// depend on the points sharing its batch; a ladder that hits its maximum says so.
#include <cmath>
#include <string>
#include <vector>

#include "io/accuracy.hpp"
#include "io/problem.hpp"
#include "validation/physics/airy.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;

namespace {

io::Problem problem_of(const std::string& yaml) { return io::make_problem(io::parse_case(yaml, "accuracy.yaml")); }

std::vector<std::size_t> all_points(const io::Problem& p) {
  std::vector<std::size_t> points(p.layout.points());
  for (std::size_t j = 0; j < points.size(); ++j) points[j] = j;
  return points;
}

/// R of order (0, 0) for stored polarisation i.
double zeroth_reflectance(const io::Problem& p, const io::PointResult& r, std::size_t i) {
  const auto at = std::find(p.layout.orders.begin(), p.layout.orders.end(), std::array<int, 2>{0, 0});
  REQUIRE(at != p.layout.orders.end());
  return r.reflectance[i * p.layout.orders_count() + std::size_t(at - p.layout.orders.begin())];
}

/// Si3N4 lines on glass at 500 nm, θ = 0° and 30°: the grating of the application's sweep tests.
std::string lines_case(const std::string& numerics) {
  return R"(wavelength: 500
incidence: {theta_deg: [0, 30]}
lattice: {period_x: 600}
substrate: SiO2
layers:
  - {name: lines, thickness: 150, slices: 3, shapes: [{type: line, material: Si3N4, width: 250}]}
numerics: )" + numerics + "\n";
}

}  // namespace

TEST_CASE("the harmonics ladder: ×1.5 rounded, at least +1, ending at the maximum", "[io][accuracy]") {
  std::vector<int> ladder{io::first_auto_harmonics};
  while (ladder.back() < 60) ladder.push_back(io::next_harmonics(ladder.back(), 60));
  CHECK(ladder == std::vector<int>{4, 6, 9, 14, 21, 32, 48, 60});
  CHECK(io::next_harmonics(1, 100) == 2);  // 1.5 rounds to 2
  CHECK(io::next_harmonics(2, 100) == 3);
  CHECK(io::next_harmonics(60, 60) == 60);
}

TEST_CASE("slices: auto on a homogeneous film reaches its target against the Airy formula", "[io][accuracy]") {
  // A 150 nm film of n = 2 on n = 1.5 at 600 nm; its default slicing (Δz ≤ λ/(40 n): 20 slices) is
  // the first rung. Airy (docs/reference-cases.md §2) is exact: the error of R_s, R_p is measured.
  constexpr double target = 1e-4;
  const io::Problem p = problem_of(R"(wavelength: 600
incidence: {theta_deg: [20, 50]}
lattice: {period_x: 400}
materials: {film: {n: 2}, glass: {n: 1.5}}
substrate: glass
layers: [{thickness: 150, material: film}]
numerics: {harmonics: 2, slices: auto, target_error: 1e-4, max_slices: 320}
)");
  REQUIRE(p.source.total_slices() == 20);
  const auto points = all_points(p);
  const io::SolvedPoints solved = io::solve_to_target(p, points);
  REQUIRE(solved.results.size() == 2);
  for (std::size_t j = 0; j < points.size(); ++j) {
    const io::PointResult& r = solved.results[j];
    const double theta = p.layout.theta_deg[j];
    INFO("θ = " << theta << "°, slices " << r.used_slices << ", estimated error " << r.estimated_error);
    CHECK(r.target_reached == 1);
    CHECK(r.estimated_error <= target);
    CHECK(r.used_harmonics == std::array<std::int32_t, 2>{2, 0});
    CHECK(r.used_slices >= 80);  // two changes at least: 20 → 40 → 80
    CHECK(r.used_slices % 20 == 0);
    for (std::size_t i = 0; i < 2; ++i) {
      const double airy = test::airy_reflectance(1.0, {{2.0, 150.0}}, 1.5, 600, theta, i == 1);
      INFO((i == 0 ? "s" : "p") << ": R " << zeroth_reflectance(p, r, i) << ", Airy " << airy);
      CHECK(std::abs(zeroth_reflectance(p, r, i) - airy) <= target);
    }
    CHECK(r.psi_change_deg >= 0);
    CHECK(r.delta_change_deg >= 0);
    CHECK(r.converged == std::vector<std::uint8_t>{1, 1});
    CHECK(r.solve_seconds > 0);
  }
}

TEST_CASE("both raised: harmonics, then slices with what the harmonics left of the target", "[io][accuracy]") {
  // The film of the previous test at 20°: its harmonics change nothing (a laterally uniform layer
  // couples no orders), so the slices get the whole target and the ladder of harmonics stops after
  // the two changes agreement needs (M = 4 → 6 → 9).
  constexpr double target = 1e-4;
  const io::Problem p = problem_of(R"(wavelength: 600
incidence: {theta_deg: 20}
lattice: {period_x: 400}
materials: {film: {n: 2}, glass: {n: 1.5}}
substrate: glass
layers: [{thickness: 150, material: film}]
numerics: {harmonics: auto, slices: auto, target_error: 1e-4}
)");
  const std::size_t point[] = {0};
  const io::PointResult r = io::solve_to_target(p, point).results.at(0);
  INFO("slices " << r.used_slices << ", estimated error " << r.estimated_error);
  CHECK(r.target_reached == 1);
  CHECK(r.estimated_error <= target);
  CHECK(r.used_harmonics == std::array<std::int32_t, 2>{9, 0});
  CHECK(r.used_slices >= 80);
  for (std::size_t i = 0; i < 2; ++i)
    CHECK(std::abs(zeroth_reflectance(p, r, i) - test::airy_reflectance(1.0, {{2.0, 150.0}}, 1.5, 600, 20, i == 1)) <=
          target);
}

TEST_CASE("a point's ladder and result do not depend on the points sharing its batch", "[io][accuracy]") {
  // At 2e-3 the two angles stop at different rungs (measured: M = 6 at 0°, 9 at 30°).
  const io::Problem p = problem_of(lines_case("{harmonics: auto, target_error: 2e-3}"));
  const io::SolvedPoints together = io::solve_to_target(p, all_points(p));
  REQUIRE(together.results.size() == 2);
  CHECK(together.results[0].used_harmonics[0] != together.results[1].used_harmonics[0]);
  for (std::size_t j = 0; j < 2; ++j) {
    const std::size_t point[] = {j};
    io::PointResult alone = io::solve_to_target(p, point).results.at(0);
    io::PointResult batched = together.results[j];
    alone.solve_seconds = batched.solve_seconds = 0;  // wall times differ
    alone.phase_seconds = batched.phase_seconds = {};
    INFO("point " << j);
    CHECK(alone == batched);  // bitwise
    CHECK(batched.target_reached == 1);
    CHECK(batched.estimated_error <= 2e-3);
    CHECK(batched.used_slices == 3);  // slices fixed
  }
}

TEST_CASE("a ladder that hits its maximum without agreement is reported, with its last change", "[io][accuracy]") {
  const io::Problem p = problem_of(lines_case("{harmonics: auto, target_error: 1e-6, max_harmonics: 9}"));
  const io::SolvedPoints solved = io::solve_to_target(p, all_points(p));
  for (const io::PointResult& r : solved.results) {
    CHECK(r.target_reached == 0);
    CHECK(r.used_harmonics[0] == 9);  // the maximum, tried
    CHECK(r.estimated_error > 1e-6);  // the larger change of M = 4 → 6 → 9
    CHECK(std::isfinite(r.estimated_error));
  }
}
