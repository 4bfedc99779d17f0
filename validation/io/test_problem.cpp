// Case → physics structs, and physics results → result-file points, end to end through a real solve.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numbers>

#include "io/problem.hpp"
#include "physics/discretisation.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using Catch::Matchers::WithinRel;

TEST_CASE("a 1D case maps onto physics structs", "[io][problem]") {
  const io::Problem p = io::make_problem(io::parse_case(R"(units: um
wavelength: 0.45
incidence: {theta_deg: [0, 20], polarization: both}
lattice: {period_x: 1.0}
materials: {glass: {n: 1.5}, resist: {n: 1.6, k: 0.01}}
substrate: glass
layers:
  - {thickness: 0.1, slices: 5, shapes: [{type: trapezoid, material: resist, center: 0.05, bottom_width: 0.3, top_width: 0.2}]}
  - {thickness: 0.05, slices: 2, material: resist}
numerics: {harmonics: 6, solver: {method: bicgstab, tolerance: 1e-9, max_iterations: 77}, richardson: true}
)",
                                                        "map.yaml"));
  const physics::Structure& s = p.structure();
  CHECK(s.lattice.period_x == 1000.0);
  CHECK(s.lattice.one_dimensional());
  CHECK(s.superstrate.index(450) == std::complex<double>(1, 0));
  CHECK_THAT(s.substrate.index(450).real(), WithinRel(1.5, 1e-15));
  REQUIRE(s.layers.size() == 2);
  CHECK_THAT(s.layers[0].thickness, WithinRel(100.0, 1e-14));
  CHECK(s.layers[0].slices == 5);
  REQUIRE(s.layers[0].shapes.size() == 1);
  const auto& line = std::get<physics::TrapezoidLine>(s.layers[0].shapes[0]);
  CHECK_THAT(line.center_x, WithinRel(50.0, 1e-14));
  CHECK_THAT(line.bottom_width, WithinRel(300.0, 1e-14));
  // top = bottom − 2h/tan α  ⇒  tan α = 2·100/(300 − 200) = 2.
  CHECK_THAT(std::tan(line.sidewall_angle_deg * std::numbers::pi / 180), WithinRel(2.0, 1e-12));
  CHECK(s.layers[0].background.index(450) == std::complex<double>(1, 0));
  CHECK(s.layers[1].shapes.empty());
  CHECK_THAT(s.layers[1].background.index(450).imag(), WithinRel(0.01, 1e-12));

  CHECK(p.solver.m1 == 6);
  CHECK(p.solver.m2 == 0);
  CHECK(p.solver.method == physics::Method::bicgstab);
  CHECK(p.solver.tolerance == 1e-9);
  CHECK(p.solver.max_iterations == 77);
  CHECK(p.solver.richardson);
  CHECK(p.solver.on_unconverged == physics::OnUnconverged::mark);

  // Orders propagating somewhere in the sweep, by the grating equation: reflected |sin θ + m λ/Λ| < 1,
  // transmitted < 1.5 (lossless glass), λ/Λ = 0.45, θ ∈ {0°, 20°}.
  std::vector<std::array<int, 2>> expected;
  for (int m = -6; m <= 6; ++m)
    for (const double theta : {0.0, 20.0})
      if (std::abs(std::sin(theta * std::numbers::pi / 180) + m * 0.45) < 1.5) {
        expected.push_back({m, 0});
        break;
      }
  CHECK(p.layout.orders == expected);
  CHECK(p.layout.points() == 2);
  CHECK(p.layout.polarization == io::Polarization::both);
  // Fields: not a single point, so off by default.
  CHECK_FALSE(p.layout.fields);
  CHECK_FALSE(p.solver.keep_fields);
  CHECK(io::points_of_batch(p, 0) == std::vector<std::size_t>{0, 1});
  const auto incidence = io::incidence_of(p, 1);
  CHECK(incidence.wavelength == 450.0);
  CHECK(incidence.theta_deg == 20.0);
  CHECK(incidence.phi_deg == 0.0);
}

TEST_CASE("a tapered circle turns its layer into one step per slice", "[io][problem]") {
  const io::Problem p = io::make_problem(io::parse_case(R"(wavelength: 600
lattice: {period_x: 400, period_y: 500}
substrate: SiO2
materials: {resist: {n: 1.6}}
layers:
  - thickness: 100
    slices: 4
    background: resist
    shapes:
      - {type: circle, material: air, center: [10, 20], bottom_diameter: 100, top_diameter: 200}
      - {type: line, material: resist, width: 20}
numerics: {harmonics: [2, 2]}
)",
                                                        "steps.yaml"));
  // The case holds the tapered circle itself; the physics library cuts its layer into steps.
  CHECK(std::holds_alternative<physics::TaperedEllipse>(p.structure().layers.at(0).shapes.at(0)));
  const physics::Layer layer = physics::cut_into_steps(p.structure().layers.at(0), p.structure().lattice);
  CHECK(layer.shapes.empty());
  REQUIRE(layer.steps.size() == 4);
  for (int j = 0; j < 4; ++j) {  // top step first; centre height h = 100 (1 − (j + ½)/4)
    const double h = 100 * (1 - (j + 0.5) / 4);
    REQUIRE(layer.steps[std::size_t(j)].size() == 2);
    const auto& e = std::get<physics::Ellipse>(layer.steps[std::size_t(j)][0]);
    CHECK_THAT(e.semi_axis_x, WithinRel((100 + 100 * h / 100) / 2, 1e-12));
    CHECK(e.semi_axis_x == e.semi_axis_y);
    CHECK(e.center.x == 10.0);
    CHECK(e.center.y == 20.0);
    const auto& r = std::get<physics::Rectangle>(layer.steps[std::size_t(j)][1]);
    CHECK(r.width_x == 20.0);
    CHECK(r.width_y == 500.0);  // a line spans the period along y
  }
}

TEST_CASE("solve, map, write, read back: the file holds the solver's numbers", "[io][problem]") {
  const fs::path dir = fs::temp_directory_path() / ("gratingsim_io_problem_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const io::Problem p = io::make_problem(io::parse_case(R"(wavelength: 500
incidence: {theta_deg: 15}
lattice: {period_x: 700}
substrate: SiO2
materials: {ridge: {n: 2.0}}
layers:
  - {thickness: 80, slices: 4, shapes: [{type: line, material: ridge, width: 300}]}
numerics: {harmonics: 4, solver: {method: direct}, backend: cpu-direct}
output: {fields: true, planes: [{plane: xz, at: 0, points: 9}]}
)",
                                                        "solve.yaml"));
  REQUIRE(p.layout.fields);  // a single point: fields on
  const auto incidences = std::vector<physics::Incidence>{io::incidence_of(p, 0)};
  const physics::SolveResult solved = physics::solve(p.structure(), incidences, p.solver);
  REQUIRE(solved.incidences.size() == 1);
  const physics::IncidenceResult& result = solved.incidences[0];
  const io::PointResult point = io::to_point_result(p, 0, result, 0.25);

  const std::size_t no = p.layout.orders_count();
  for (const auto& order : result.orders) {
    const auto o =
        std::size_t(std::find(p.layout.orders.begin(), p.layout.orders.end(), std::array<int, 2>{order.m1, order.m2}) -
                    p.layout.orders.begin());
    REQUIRE(o < no);
    CHECK(point.reflectance[0 * no + o] == order.R[physics::s_pol]);
    CHECK(point.transmittance[1 * no + o] == order.T[physics::p_pol]);
    CHECK(point.jones_r[(o * 2 + 1) * 2 + 0] == order.reflection.p_from_s);  // [order][out p][in s]
    CHECK(point.jones_t[(o * 2 + 0) * 2 + 1] == order.transmission.s_from_p);
    if (order.reflected)
      CHECK(point.reflected_direction[3 * o + 2] == order.reflected_direction[2]);
    else
      CHECK(std::isnan(point.reflected_direction[3 * o]));
  }
  CHECK(point.psi_deg == result.zeroth_order.psi_deg);
  CHECK(point.mueller[7] == result.zeroth_order.mueller[1][3]);
  CHECK(point.absorption[1] == result.absorption[physics::p_pol]);
  CHECK(point.iterations[0] == result.solves.at(0)[physics::s_pol].iterations);
  CHECK(point.converged[0] == 1);
  CHECK(point.solve_seconds == 0.25);
  {
    // The stored residual is the largest of the point's solves (Richardson's two), and NaN where any is NaN, even
    // one met before a number (std::max(0, NaN) gave 0: a failed solve's residual was stored as 0, session 36).
    physics::IncidenceResult two = result;
    two.solves.push_back(result.solves.at(0));
    two.solves[0][physics::s_pol].residual = std::numeric_limits<double>::quiet_NaN();
    two.solves[1][physics::s_pol].residual = 3e-11;
    two.solves[0][physics::p_pol].residual = 2e-11;
    two.solves[1][physics::p_pol].residual = 5e-11;
    const io::PointResult both = io::to_point_result(p, 0, two, 0.25);
    CHECK(std::isnan(both.residual[0]));
    CHECK(both.residual[1] == 5e-11);
  }

  // The xz map at y = 0 from the harmonics, computed here by hand: kx_m = k1 sin θ + 2π m/Λ.
  REQUIRE(point.field_maps.size() == 1);
  const auto& map = point.field_maps[0];
  const std::size_t nz = 4, nm = 9, n1 = 9;
  const double kx0 = 2 * std::numbers::pi / 500 * std::sin(15 * std::numbers::pi / 180);
  double worst = 0, norm = 0;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t a = 0; a < n1; ++a)
        for (std::size_t q = 0; q < nz; ++q) {
          const double x = -350 + 700.0 * double(a) / 8;
          std::complex<double> e = 0;
          for (std::size_t k = 0; k < nm; ++k) {
            const double kx = kx0 + 2 * std::numbers::pi * (double(k) - 4) / 700;
            e += result.fields->harmonics[i][(q * 3 + c) * nm + k] * std::exp(std::complex<double>(0, kx * x));
          }
          worst = std::max(worst, std::abs(map[((i * 3 + c) * n1 + a) * nz + q] - e));
          norm = std::max(norm, std::abs(e));
        }
  REQUIRE(norm > 0);
  CHECK(worst <= 1e-12 * norm);

  // Write, read back: the same point.
  const std::string out = (dir / "solve.h5").string();
  {
    auto writer = io::ResultWriter::create(out, p.layout, io::run_info(p, "cpu-direct", "double", "CPU"));
    writer.write(0, point);
    writer.finish();
  }
  const io::ResultReader reader(out);
  CHECK(reader.read(0) == point);
  CHECK(reader.info().case_yaml == p.source.yaml);
  CHECK(reader.info().case_path == "solve.yaml");
  fs::remove_all(dir);
}

namespace {

/// The application's loop (problem.hpp): solve the unfinished points of each wavelength, write each;
/// stop (as if killed) once `stop_after` points are written in this call. Returns the points solved.
std::size_t run_sweep(const io::Problem& p, io::ResultWriter& writer, std::size_t stop_after) {
  std::size_t solved = 0;
  for (std::size_t iw = 0; iw < p.layout.wavelength_nm.size(); ++iw) {
    std::vector<std::size_t> points;
    std::vector<physics::Incidence> incidences;
    for (const auto point : io::points_of_batch(p, iw))
      if (!writer.done(point)) {
        points.push_back(point);
        incidences.push_back(io::incidence_of(p, point));
      }
    if (points.empty()) continue;
    const auto result = physics::solve(p.structure(), incidences, p.solver);
    for (std::size_t j = 0; j < points.size(); ++j) {
      if (solved == stop_after) return solved;
      writer.write(points[j], io::to_point_result(p, points[j], result.incidences[j], 0.0));
      ++solved;
    }
  }
  return solved;
}

}  // namespace

TEST_CASE("a solved sweep interrupted and resumed equals an uninterrupted one", "[io][problem]") {
  const fs::path dir = fs::temp_directory_path() / ("gratingsim_io_sweep_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const io::Problem p = io::make_problem(io::parse_case(R"(wavelength: [450, 550, 650]
incidence: {theta_deg: [0, 25]}
lattice: {period_x: 600}
substrate: SiO2
layers: [{thickness: 60, slices: 3, shapes: [{type: line, material: Si, width: 250}]}]
numerics: {harmonics: 3, solver: {method: direct}, backend: cpu-direct}
)",
                                                        "sweep.yaml"));
  const io::RunInfo info = io::run_info(p, "cpu-direct", "double", "CPU");
  CHECK(info.formulation == "normal-vector");
  const std::string reference = (dir / "reference.h5").string(), resumed = (dir / "resumed.h5").string();
  {
    auto writer = io::ResultWriter::create(reference, p.layout, info);
    CHECK(run_sweep(p, writer, std::size_t(-1)) == 6);
    writer.finish();
  }
  {
    auto writer = io::ResultWriter::create(resumed, p.layout, info);
    CHECK(run_sweep(p, writer, 3) == 3);  // interrupted in the middle of the second wavelength
  }
  CHECK_FALSE(fs::exists(resumed));
  {
    auto writer = io::ResultWriter::resume(resumed, p.layout, info);
    CHECK(writer.points_done() == 3);
    CHECK(run_sweep(p, writer, std::size_t(-1)) == 3);  // only the unfinished points
    writer.finish();
  }
  const io::ResultReader a(reference), b(resumed);
  CHECK(a.layout() == b.layout());
  for (std::size_t i = 0; i < p.layout.points(); ++i) CHECK(a.read(i) == b.read(i));
  fs::remove_all(dir);
}

TEST_CASE("numerics.formulation maps onto the solver options (default normal-vector)", "[io][problem]") {
  const auto formulation_of = [](const std::string& numerics) {
    return io::make_problem(io::parse_case("wavelength: 500\nlattice: {period_x: 700}\nsubstrate: SiO2\n"
                                           "layers: [{thickness: 80, material: SiO2, slices: 2}]\nnumerics: " +
                                               numerics + "\n",
                                           "formulation.yaml"))
        .solver.formulation;
  };
  CHECK(formulation_of("{harmonics: 2}") == physics::Formulation::normal_vector);
  CHECK(formulation_of("{harmonics: 2, formulation: normal-vector}") == physics::Formulation::normal_vector);
  CHECK(formulation_of("{harmonics: 2, formulation: laurent}") == physics::Formulation::laurent);
}

namespace {

/// A one-point 1D case with fields and an xz map at y (or v) = 40 nm, through make_problem, a solve and
/// to_point_result: the line sits off centre, so that nothing is symmetric.
struct SolvedPoint {
  io::Problem problem;
  physics::IncidenceResult result;
  io::PointResult point;
};
SolvedPoint solve_case(const std::string& lattice, double phi_deg) {
  SolvedPoint s{io::make_problem(io::parse_case("wavelength: 500\nincidence: {theta_deg: 15, phi_deg: " +
                                                    std::to_string(phi_deg) + "}\nlattice: " + lattice + R"(
substrate: SiO2
materials: {ridge: {n: 2.0, k: 0.1}}
layers:
  - {thickness: 80, slices: 4, shapes: [{type: line, material: ridge, width: 300, center: 60}]}
numerics: {harmonics: 4, solver: {method: direct}, backend: cpu-direct}
output: {fields: true, planes: [{plane: xz, at: 40, points: 9}]}
)",
                                                "rotation.yaml")),
                {},
                {}};
  const auto incidences = std::vector<physics::Incidence>{io::incidence_of(s.problem, 0)};
  s.result = physics::solve(s.problem.structure(), incidences, s.problem.solver).incidences.at(0);
  s.point = io::to_point_result(s.problem, 0, s.result, 0.0);
  return s;
}

}  // namespace

TEST_CASE("lattice.rotation_deg: 0 is the case without the key, bit for bit, its map the unrotated formula to rounding",
          "[io][problem][rotation]") {
  const SolvedPoint plain = solve_case("{period_x: 700}", 25);
  const SolvedPoint zero = solve_case("{period_x: 700, rotation_deg: 0}", 25);
  CHECK(zero.problem.structure().lattice.rotation_deg == 0);
  CHECK(zero.problem.layout == plain.problem.layout);
  CHECK(zero.point == plain.point);  // every dataset of the point, bitwise (NaN equals NaN)
  // The map as it was computed before rotations existed: E_c(x, y = at) = Σ_m e(m) e^{i(kx_m x + ky_m at)},
  // to rounding (the two compilations contract the complex products into FMAs differently).
  using C = std::complex<double>;
  const physics::Fields& f = *plain.result.fields;
  const io::MapLayout& m = plain.problem.layout.maps.at(0);
  const std::size_t nm = f.kx.size(), nz = f.z.size(), n1 = m.first_nm.size();
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t a = 0; a < n1; ++a)
        for (std::size_t q = 0; q < nz; ++q) {
          C sum = 0;
          for (std::size_t k = 0; k < nm; ++k)
            sum += plain.point.field_harmonics[((i * nz + q) * 3 + c) * nm + k] *
                   std::exp(C(0, f.kx[k] * m.first_nm[a] + f.ky[k] * m.position_nm));
          const C map = plain.point.field_maps[0][((i * 3 + c) * n1 + a) * nz + q];
          worst = std::max(worst, std::abs(sum - map));
          largest = std::max(largest, std::abs(sum));
        }
  INFO("largest |map − formula| " << worst << " of " << largest);
  CHECK(largest > 0);
  CHECK(worst <= 1e-13 * largest);
}

TEST_CASE("a 1D case rotated by α is the unrotated one at φ − α, turned into the lab, its map the cross-section",
          "[io][problem][rotation]") {
  // α = 30°, lab φ = 50°: the solver's frame sees φ − α = 20° exactly, as the unrotated case does, so
  // everything invariant (efficiencies, Jones in each order's s/p basis, Ψ, Δ, Mueller) is bitwise the
  // same, and every lab vector is the unrotated one turned by +α (rounding of cos α, sin α only).
  const SolvedPoint rotated = solve_case("{period_x: 700, rotation_deg: 30}", 50);
  const SolvedPoint frame = solve_case("{period_x: 700}", 20);
  CHECK(rotated.problem.structure().lattice.rotation_deg == 30);
  REQUIRE(rotated.problem.layout.orders == frame.problem.layout.orders);
  REQUIRE(rotated.problem.layout.orders.size() >= 2);  // a diffracted order: directions are tested off axis
  const io::PointResult &r = rotated.point, &u = frame.point;
  CHECK(r.reflectance == u.reflectance);
  CHECK(r.transmittance == u.transmittance);
  CHECK(r.jones_r == u.jones_r);
  CHECK(r.jones_t == u.jones_t);
  CHECK(r.psi_deg == u.psi_deg);
  CHECK(r.delta_deg == u.delta_deg);
  CHECK(r.mueller == u.mueller);
  CHECK(r.absorption == u.absorption);
  const double c = std::cos(30 * std::numbers::pi / 180), s = std::sin(30 * std::numbers::pi / 180);
  // Directions [No][3]: NaN where the order does not propagate (in both), else (x, y) turned, z the same.
  const auto check_turned = [&](const std::vector<double>& lab, const std::vector<double>& own) {
    REQUIRE(lab.size() == own.size());
    int propagating = 0;
    for (std::size_t j = 0; j + 2 < lab.size(); j += 3) {
      CHECK(std::isnan(lab[j]) == std::isnan(own[j]));
      if (std::isnan(own[j])) continue;
      ++propagating;
      CHECK(std::abs(lab[j] - (c * own[j] - s * own[j + 1])) <= 1e-15);
      CHECK(std::abs(lab[j + 1] - (s * own[j] + c * own[j + 1])) <= 1e-15);
      CHECK(lab[j + 2] == own[j + 2]);
    }
    CHECK(propagating >= 2);
  };
  check_turned(r.reflected_direction, u.reflected_direction);
  check_turned(r.transmitted_direction, u.transmitted_direction);

  // Field harmonics [P][Nz][x, y, z][Nm]: (Ex, Ey) turned, Ez the same.
  const std::size_t nm = 9, nz = 4, n1 = 9;
  REQUIRE(r.field_harmonics.size() == 2 * nz * 3 * nm);
  double scale = 0, worst = 0;
  for (std::size_t b = 0; b < 2 * nz; ++b)
    for (std::size_t k = 0; k < nm; ++k) {
      const auto at = [&](const io::PointResult& p, std::size_t comp) {
        return p.field_harmonics[(b * 3 + comp) * nm + k];
      };
      scale = std::max(scale, std::abs(at(u, 0)));
      worst = std::max({worst, std::abs(at(r, 0) - (c * at(u, 0) - s * at(u, 1))),
                        std::abs(at(r, 1) - (s * at(u, 0) + c * at(u, 1))), std::abs(at(r, 2) - at(u, 2))});
    }
  CHECK(scale > 0.1);
  CHECK(worst <= 1e-14 * scale);  // the solver's rotation of the same numbers: a few roundings

  // The map: at (u, z_q) the lab point u·ĝ + 40 nm·l̂, ĝ = (cos α, sin α), l̂ = (−sin α, cos α). By hand from
  // the stored lab harmonics with the lab wavevectors of the grating equation, k_m = k_inc,ρ + m·G,
  // G = (2π/Λ) ĝ, k_inc,ρ = k (sin θ cos φ, sin θ sin φ) at the lab φ = 50°: nothing of the solver's frame.
  using C = std::complex<double>;
  const double k = 2 * std::numbers::pi / 500, sin_theta = std::sin(15 * std::numbers::pi / 180);
  const double phi = 50 * std::numbers::pi / 180, g = 2 * std::numbers::pi / 700;
  double map_worst = 0, map_scale = 0, turned_worst = 0;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t comp = 0; comp < 3; ++comp)
      for (std::size_t a = 0; a < n1; ++a)
        for (std::size_t q = 0; q < nz; ++q) {
          const double along = -350 + 700.0 * double(a) / 8, x = along * c - 40 * s, y = along * s + 40 * c;
          C e = 0;
          for (std::size_t m = 0; m < nm; ++m) {
            const double kx = k * sin_theta * std::cos(phi) + g * (double(m) - 4) * c;
            const double ky = k * sin_theta * std::sin(phi) + g * (double(m) - 4) * s;
            e += r.field_harmonics[((i * nz + q) * 3 + comp) * nm + m] * std::exp(C(0, kx * x + ky * y));
          }
          const auto map_at = [&](const io::PointResult& p, std::size_t cc) {
            return p.field_maps.at(0)[((i * 3 + cc) * n1 + a) * nz + q];
          };
          map_worst = std::max(map_worst, std::abs(map_at(r, comp) - e));
          map_scale = std::max(map_scale, std::abs(e));
          // ... and it is the unrotated case's map (the grating's frame) with its components turned.
          const C own = comp == 0   ? c * map_at(u, 0) - s * map_at(u, 1)
                        : comp == 1 ? s * map_at(u, 0) + c * map_at(u, 1)
                                    : map_at(u, 2);
          turned_worst = std::max(turned_worst, std::abs(map_at(r, comp) - own));
        }
  CHECK(map_scale > 0.1);
  CHECK(map_worst <= 1e-12 * map_scale);
  CHECK(turned_worst <= 1e-12 * map_scale);
}
