// Reading valid cases: unit conversion to nm, sweeps, defaults, materials, shapes, warnings.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>

#include "io/case.hpp"
#include "physics/problem.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using Catch::Matchers::WithinRel;

namespace {
const std::string tables_dir = (fs::path(__FILE__).parent_path() / "cases").string();
}

TEST_CASE("a full case in micrometres is read in nanometres", "[io][case]") {
  const std::string text = R"(description: a crossed grating of tapered holes
units: um
wavelength: {start: 0.4, stop: 0.8, count: 5}
incidence: {theta_deg: [0, 30, 60], phi_deg: 15, polarization: p}
lattice: {period_x: 0.5, period_y: 0.6}
superstrate: air
substrate: SiO2
materials:
  resist: {n: 1.6, k: 0.002}
  oxide: {table: tables/oxide.csv, units: nm}
  glass: {sellmeier: {B: [1.03961212, 0.231792344, 1.01046945], resonances: [0.0775, 0.1415, 10.1756], range: [0.3, 2.5]}}
layers:
  - name: holes
    thickness: 0.12
    slices: 24
    background: resist
    shapes:
      - {type: circle, material: air, center: [0.01, -0.02], bottom_diameter: 0.2, top_diameter: 0.25}
      - {type: ellipse, material: glass, diameter_x: 0.1, diameter_y: 0.05, rotation_deg: 30}
      - {type: rectangle, material: oxide, width_x: 0.05, width_y: 0.1}
  - name: posts  # a sloped polygon may not share the tapered circle's layer
    thickness: 0.01
    slices: 2
    shapes: [{type: polygon, material: oxide, vertices: [[0, 0], [0.1, 0], [0.05, 0.08]], sidewall_angle_deg: 80}]
  - {name: film, thickness: 0.02, material: oxide, slices: 3}
numerics:
  harmonics: [7, 9]
  precision: single
  formulation: laurent
  backend: cpu-fftw
  solver: {method: gmres, restart: 30, tolerance: 1e-6, max_iterations: 200}
output: {fields: true, planes: [{plane: xy, at: 0.06, points: [32, 16]}, {plane: yz, at: -0.1}]}
)";
  const io::Case c = io::parse_case(text, "inline.yaml", tables_dir);
  CHECK(c.path == "inline.yaml");
  CHECK(c.yaml == text);
  CHECK(c.description == "a crossed grating of tapered holes");
  CHECK(c.input_units == io::LengthUnit::um);
  REQUIRE(c.wavelength_nm.size() == 5);
  CHECK_THAT(c.wavelength_nm[0], WithinRel(400.0, 1e-14));
  CHECK_THAT(c.wavelength_nm[1], WithinRel(500.0, 1e-14));
  CHECK(c.wavelength_nm[4] == 800.0);
  CHECK(c.incidence.theta_deg == std::vector<double>{0, 30, 60});
  CHECK(c.incidence.phi_deg == std::vector<double>{15});
  CHECK(c.incidence.polarization == io::Polarization::p);
  CHECK(c.polarizations() == 1);
  CHECK(c.points() == 15);
  const physics::Structure& s = c.structure;
  CHECK_THAT(s.lattice.period_x, WithinRel(500.0, 1e-14));
  REQUIRE_FALSE(s.lattice.one_dimensional());
  CHECK_THAT(s.lattice.period_y, WithinRel(600.0, 1e-14));
  CHECK(s.superstrate.name() == "air");
  CHECK(s.substrate.name() == "SiO2");

  REQUIRE(s.layers.size() == 3);
  const physics::Layer& holes = s.layers[0];
  CHECK(c.structure_source.layers.at(0).name == "holes");
  CHECK_THAT(holes.thickness, WithinRel(120.0, 1e-14));
  CHECK(holes.slices == 24);
  CHECK(holes.background.name() == "resist");
  REQUIRE(holes.shapes.size() == 3);
  const auto& circle = std::get<physics::TaperedEllipse>(holes.shapes[0]);  // semi-axes: half the diameters
  CHECK(circle.material.name() == "air");
  CHECK_THAT(circle.center.x, WithinRel(10.0, 1e-14));
  CHECK_THAT(circle.center.y, WithinRel(-20.0, 1e-14));
  CHECK_THAT(2 * circle.bottom_semi_axis_x, WithinRel(200.0, 1e-14));
  CHECK_THAT(2 * circle.bottom_semi_axis_y, WithinRel(200.0, 1e-14));
  CHECK_THAT(2 * circle.top_semi_axis_y, WithinRel(250.0, 1e-14));
  const auto& ellipse = std::get<physics::Ellipse>(holes.shapes[1]);  // not tapered: one diameter per axis
  CHECK_THAT(2 * ellipse.semi_axis_x, WithinRel(100.0, 1e-14));
  CHECK_THAT(2 * ellipse.semi_axis_y, WithinRel(50.0, 1e-14));
  CHECK(ellipse.rotation_deg == 30.0);
  CHECK(ellipse.center.x == 0.0);
  const auto& rectangle = std::get<physics::Rectangle>(holes.shapes[2]);
  CHECK_THAT(rectangle.width_y, WithinRel(100.0, 1e-14));
  CHECK(s.layers[1].background.name() == "air");
  const auto& polygon = std::get<physics::SlopedPolygon>(s.layers[1].shapes.at(0));
  REQUIRE(polygon.bottom.vertices.size() == 3);
  CHECK_THAT(polygon.bottom.vertices[2].y, WithinRel(80.0, 1e-14));
  CHECK(polygon.sidewall_angle_deg == 80.0);
  CHECK(s.layers[2].background.name() == "oxide");
  CHECK(s.layers[2].shapes.empty());
  // Where each object was given (1-based lines of the text above).
  const io::StructureSource& where = c.structure_source;
  REQUIRE(where.layers.size() == 3);
  REQUIRE(where.layers[0].shapes.size() == 3);
  CHECK(where.layers[0].shapes[1].line == 19);
  CHECK(where.layers[0].shapes[1].path == "layers[0].shapes[1]");
  CHECK(where.layers[2].thickness.line == 25);
  CHECK(where.layers[2].name == "film");
  CHECK(where.substrate.line == 7);
  CHECK(where.lattice.line == 5);
  CHECK_THAT(c.total_thickness_nm(), WithinRel(150.0, 1e-14));
  CHECK(c.total_slices() == 29);

  CHECK(c.numerics.harmonics_x == 7);
  CHECK(c.numerics.harmonics_y == 9);
  CHECK(c.numerics.precision == Precision::single);
  CHECK(c.numerics.backend == conv::Backend::cpu_fftw);
  CHECK(c.numerics.formulation == physics::Formulation::laurent);
  CHECK(c.numerics.solver.method == physics::Method::gmres);
  CHECK(c.numerics.solver.restart == 30);
  CHECK(c.numerics.solver.tolerance == 1e-6);
  CHECK(c.numerics.solver.max_iterations == 200);

  CHECK(c.output.fields);
  REQUIRE(c.output.planes.size() == 2);
  CHECK(c.output.planes[0].kind == io::PlaneKind::xy);
  CHECK_THAT(c.output.planes[0].position_nm, WithinRel(60.0, 1e-14));
  CHECK(c.output.planes[0].points_first == 32);
  CHECK(c.output.planes[0].points_second == 16);
  CHECK(c.output.planes[1].kind == io::PlaneKind::yz);
  CHECK(c.output.planes[1].points_first == 64);
  CHECK(c.warnings.empty());

  // Materials: every referenced one, built-ins included.
  CHECK(c.materials.size() == 5);  // air, SiO2, resist, oxide, glass
  CHECK(std::abs(c.material("resist").index(650.0) - std::complex<double>(1.6, 0.002)) < 1e-15);
  // The table is in nm (its own `units`), linearly interpolated: (500, 1.47) to (800, 1.45).
  CHECK_THAT(c.material("oxide").index(650.0).real(), WithinRel(1.46, 1e-12));
  // N-BK7 Sellmeier (resonances given in µm, squared in the formula): n_d = 1.5168 at 587.6 nm.
  CHECK(std::abs(c.material("glass").index(587.56).real() - 1.5168) < 2e-4);
  // Built-in fused silica: n_d = 1.4585 at 587.6 nm.
  CHECK(std::abs(c.material("SiO2").index(587.56).real() - 1.4585) < 2e-4);
}

TEST_CASE("defaults: air superstrate, normal incidence, both polarisations, auto backend", "[io][case]") {
  const io::Case c = io::parse_case(R"(wavelength: 633
lattice: {period_x: 400}
substrate: SiO2
materials: {unused: {n: 2}}
layers:
  - thickness: 100
    shapes: [{type: trapezoid, material: SiO2, bottom_width: 120, sidewall_angle_deg: 80}]
numerics: {harmonics: 10}
)",
                                    "defaults.yaml");
  CHECK(c.input_units == io::LengthUnit::nm);
  CHECK(c.structure.superstrate.name() == "air");
  CHECK(c.incidence.theta_deg == std::vector<double>{0});
  CHECK(c.incidence.phi_deg == std::vector<double>{0});
  CHECK(c.incidence.polarization == io::Polarization::both);
  CHECK(c.structure.lattice.one_dimensional());
  CHECK(c.numerics.harmonics_x == 10);
  CHECK(c.numerics.harmonics_y == 0);  // a 1D lattice has no y-harmonics
  CHECK(c.numerics.precision == Precision::double_);
  CHECK_FALSE(c.numerics.backend.has_value());
  CHECK(c.numerics.formulation == physics::Formulation::normal_vector);
  CHECK(c.numerics.solver.method == physics::Method::automatic);  // BiCGStab on 2D lattices without metal, else GMRES
  CHECK(c.numerics.solver.restart == 40);
  CHECK(c.numerics.solver.tolerance == 1e-8);
  CHECK(c.numerics.solver.max_iterations == 500);
  const physics::Layer& layer = c.structure.layers[0];
  CHECK(c.structure_source.layers.at(0).name == "layer0");
  CHECK(layer.background.name() == "air");
  const auto& line = std::get<physics::TrapezoidLine>(layer.shapes[0]);
  CHECK(line.bottom_width == 120.0);
  // top = bottom − 2h/tan α
  const double top_width =
      line.bottom_width - 2 * layer.thickness / std::tan(line.sidewall_angle_deg * std::numbers::pi / 180);
  CHECK_THAT(top_width, WithinRel(120.0 - 2 * 100.0 / std::tan(80.0 * std::numbers::pi / 180), 1e-14));
  // Default slices: Δz ≤ λ/(40 n) in the densest material: ceil(40 · 100 nm · n_SiO2(633) / 633 nm).
  const double n = c.material("SiO2").index(633).real();
  CHECK(layer.slices == int(std::ceil(40 * 100 * n / 633)));
  // A single point: fields on by default with one xz cut at y = 0.
  CHECK(c.points() == 1);
  CHECK(c.output.fields);
  REQUIRE(c.output.planes.size() == 1);
  CHECK(c.output.planes[0].kind == io::PlaneKind::xz);
  // An unused material is a warning, located at its definition, and is dropped.
  REQUIRE(c.warnings.size() == 1);
  INFO(c.warnings[0]);
  CHECK(c.warnings[0].rfind("defaults.yaml:4:21: warning: material 'unused'", 0) == 0);
  CHECK(c.materials.count("unused") == 0);
}

TEST_CASE("slices given far thicker than the default rule are warned about, at the slices", "[io][case]") {
  // Δz ≤ λ/(40 n): n = 3.5 at 500 nm gives 3.57 nm, so 500 nm in one slice is 140 times it (the audit's case of
  // session 36, whose ΣR + ΣT came out 2.8 with every solve converged), 5 slices 28 times, 15 slices 9.3 times.
  const auto read = [](int slices) {
    const std::string text = "wavelength: [500, 700]\nlattice: {period_x: 400}\nmaterials: {hi: {n: 3.5}}\n"
                             "substrate: SiO2\nlayers:\n  - {thickness: 500, slices: " +
                             std::to_string(slices) + ", shapes: [{type: line, material: hi, width: 200}]}\n"
                             "numerics: {harmonics: 4}\n";
    return io::parse_case(text, "coarse.yaml", tables_dir);
  };
  for (const int slices : {1, 5}) {
    const io::Case c = read(slices);
    REQUIRE(c.warnings.size() == 1);
    INFO(c.warnings[0]);
    CHECK(c.warnings[0].rfind("coarse.yaml:6:30: warning: layer 'layer0': " + std::to_string(slices) + " slice(s)", 0) == 0);
    CHECK(c.warnings[0].find(slices == 1 ? " 140 times thicker" : " 28 times thicker") != std::string::npos);
    CHECK(c.warnings[0].find("default count, 140") != std::string::npos);
  }
  CHECK(read(15).warnings.empty());  // 33.3 nm: 9.3 times the rule
}

TEST_CASE("a parameter axis that no expression uses is warned about", "[io][case][parameters]") {
  const std::string tail = "wavelength: 600\nlattice: {period_x: 500}\nsubstrate: Si\nnumerics: {harmonics: 4}\n";
  const io::Case unused = io::parse_case("parameters: {cd: [100, 200], t: [50, 60]}\n" + tail +
                                             "layers: [{thickness: '${t}', slices: 8, material: SiO2}]\n",
                                         "axes.yaml", tables_dir);
  REQUIRE(unused.warnings.size() == 1);
  INFO(unused.warnings[0]);
  CHECK(unused.warnings[0].rfind("axes.yaml:1:18: warning: parameter 'cd' is never used", 0) == 0);
  // Used through a computed parameter: no warning.
  const io::Case through = io::parse_case("parameters: {cd: [100, 200], half: '${cd}/2'}\n" + tail +
                                              "layers: [{thickness: '${half}', slices: 8, material: SiO2}]\n",
                                          "axes.yaml", tables_dir);
  CHECK(through.warnings.empty());
}

TEST_CASE("solver.method: auto by default and by name, and a restart without a method asks for GMRES", "[io][case]") {
  const std::string head =
      "wavelength: 500\nlattice: {period_x: 400, period_y: 400}\nsubstrate: SiO2\n"
      "layers: [{thickness: 100, material: SiO2, slices: 4}]\nnumerics: {harmonics: 2";
  const auto method = [&](const std::string& solver) {
    return io::parse_case(head + (solver.empty() ? "" : ", solver: {" + solver + "}") + "}\n", "method.yaml")
        .numerics.solver;
  };
  CHECK(method("").method == physics::Method::automatic);
  CHECK(method("tolerance: 1e-6").method == physics::Method::automatic);
  CHECK(method("method: auto").method == physics::Method::automatic);
  CHECK(method("method: bicgstab").method == physics::Method::bicgstab);
  CHECK(method("method: direct").method == physics::Method::dense_lu);
  const io::SolverOptions restarted = method("restart: 25");
  CHECK(restarted.method == physics::Method::gmres);
  CHECK(restarted.restart == 25);
  CHECK(method("method: gmres, restart: 30").restart == 30);
  CHECK_THROWS_AS(method("method: auto, restart: 30"), io::CaseError);  // restart is GMRES's alone
}

TEST_CASE("sweeps: scalar, list in the given order, inclusive range, metres", "[io][case]") {
  const auto read = [](const std::string& wavelength, const std::string& theta) {
    return io::parse_case(
        "units: m\nwavelength: " + wavelength + "\nincidence: {theta_deg: " + theta +
            "}\nlattice: {period_x: 4e-7}\nsubstrate: SiO2\nlayers: [{thickness: 1e-7, material: SiO2}]\n"
            "numerics: {harmonics: 3}\n",
        "sweep.yaml");
  };
  const io::Case list = read("[6e-7, 4e-7, 5e-7]", "{start: 0, stop: 60, count: 4}");
  REQUIRE(list.wavelength_nm.size() == 3);
  CHECK_THAT(list.wavelength_nm[0], WithinRel(600.0, 1e-12));
  CHECK_THAT(list.wavelength_nm[1], WithinRel(400.0, 1e-12));
  CHECK(list.incidence.theta_deg == std::vector<double>{0, 20, 40, 60});
  CHECK_FALSE(list.output.fields);  // a sweep: fields off by default
  CHECK(list.output.planes.empty());
  const io::Case descending = read("{start: 8e-7, stop: 4e-7, count: 3}", "7.5");
  CHECK_THAT(descending.wavelength_nm[1], WithinRel(600.0, 1e-12));
  CHECK(descending.incidence.theta_deg == std::vector<double>{7.5});
}

TEST_CASE("load_case resolves tables against the case file's directory", "[io][case]") {
  const fs::path dir = fs::temp_directory_path() / ("gratingsim_io_case_" + std::to_string(::getpid()));
  fs::create_directories(dir / "data");
  std::ofstream(dir / "data" / "index.csv") << "# lambda n k\n400 2.0 0.5\n600 3.0 0.0\n";
  std::ofstream(dir / "case.yaml")
      << "wavelength: [450, 550]\nlattice: {period_x: 300}\nsubstrate: metal\n"
         "materials: {metal: {table: data/index.csv}}\n"
         "layers: [{thickness: 50, material: metal, slices: 4}]\nnumerics: {harmonics: 2}\n";
  const io::Case c = io::load_case((dir / "case.yaml").string());
  const auto index = c.material("metal").index(450);
  CHECK_THAT(index.real(), WithinRel(2.25, 1e-12));
  CHECK_THAT(index.imag(), WithinRel(0.375, 1e-12));
  fs::remove_all(dir);
}

TEST_CASE("memory estimate: the physics estimate for one wavelength, all angles batched", "[io][case]") {
  io::Case c = io::parse_case(
      "wavelength: 500\nincidence: {theta_deg: [0, 10, 20]}\nlattice: {period_x: 400, period_y: 400}\n"
      "substrate: SiO2\nlayers: [{thickness: 100, material: SiO2, slices: 10}]\n"
      "numerics: {harmonics: [3, 2]}\n",
      "memory.yaml");
  // 10 slices, Nm = 7·5 orders, 3 incidences, the automatic method on a 2D lattice without metal: BiCGStab's 9
  // vectors (GMRES(40): 44); double precision.
  // The default formulation is the normal-vector one; its convolution output is larger than Laurent's.
  CHECK(c.numerics.formulation == physics::Formulation::normal_vector);
  CHECK(io::estimated_solver_bytes(c) ==
        physics::estimate_bytes(10, 35, 3, 3, 2, 8, 9, false, physics::Formulation::normal_vector));
  c.numerics.solver.method = physics::Method::gmres;
  CHECK(io::estimated_solver_bytes(c) ==
        physics::estimate_bytes(10, 35, 3, 3, 2, 8, 44, false, physics::Formulation::normal_vector));
  CHECK(physics::estimate_bytes(10, 35, 3, 3, 2, 8, 44, false, physics::Formulation::normal_vector) >
        physics::estimate_bytes(10, 35, 3, 3, 2, 8, 44, false, physics::Formulation::laurent));
  c.numerics.solver.method = physics::Method::dense_lu;
  c.numerics.richardson = true;  // the finer grid: twice the slices
  c.numerics.precision = Precision::single;
  c.numerics.formulation = physics::Formulation::laurent;
  CHECK(io::estimated_solver_bytes(c) ==
        physics::estimate_bytes(20, 35, 3, 3, 2, 4, 3, true, physics::Formulation::laurent));
}

TEST_CASE("a constant permittivity material (a metal)", "[io][case]") {
  const io::Case c = io::parse_case(
      "wavelength: 633\nlattice: {period_x: 400}\nsubstrate: silver\n"
      "materials: {silver: {epsilon: [-15.9, 1.08]}}\n"
      "layers: [{thickness: 30, material: silver, slices: 6}]\nnumerics: {harmonics: 1}\n",
      "metal.yaml");
  const auto eps = c.material("silver").permittivity(633);
  CHECK(eps.real() == -15.9);
  CHECK(eps.imag() == 1.08);
  CHECK(c.material("silver").index(633).imag() > 3.9);  // n + iκ with κ ≈ √15.9
}

TEST_CASE("memory estimate: a size past 2^64 bytes saturates instead of wrapping", "[io][case]") {
  // The dense reference at 10^5 slices and (2·4096 + 1)^2 orders: n = 2·10^13 unknowns, n²·16·2 ≈ 1.3e28 bytes.
  const std::size_t orders = 8193ull * 8193ull;
  CHECK(physics::estimate_bytes(100000, orders, 1, 4096, 4096, 8, 3, true, physics::Formulation::laurent) ==
        std::numeric_limits<std::size_t>::max());
  // Below the limit the estimate is unchanged: monotone in each count.
  const std::size_t small = physics::estimate_bytes(10, 35, 3, 3, 2, 8, 44, false, physics::Formulation::laurent);
  CHECK(physics::estimate_bytes(20, 35, 3, 3, 2, 8, 44, false, physics::Formulation::laurent) > small);
}

TEST_CASE("line endings: CR only (old Mac) and CRLF read as LF, errors located on the right line", "[io][case]") {
  const std::string lf =
      "# a film\nwavelength: [500, 600]\nlattice: {period_x: 400}\nsubstrate: SiO2\n"
      "layers:\n  - {thickness: 100, material: SiO2, slices: 3}\nnumerics: {harmonics: 2}\n";
  const auto with = [&](const std::string& ending) {
    std::string text;
    for (const char c : lf) text += c == '\n' ? ending : std::string(1, c);
    return text;
  };
  for (const std::string ending : {"\r", "\r\n"}) {
    const io::Case c = io::parse_case(with(ending), "endings.yaml");
    CHECK(c.yaml == with(ending));  // stored verbatim
    CHECK(c.wavelength_nm == std::vector<double>{500, 600});
    CHECK(c.structure.layers.at(0).slices == 3);
    CHECK(c.numerics.harmonics_x == 2);
    std::string bad = with(ending);
    bad.replace(bad.find("100"), 3, "-100");
    try {
      (void)io::parse_case(bad, "endings.yaml");
      FAIL("accepted a negative thickness");
    } catch (const io::CaseError& e) {
      CHECK(e.line() == 6);
      CHECK(e.column() == 17);
    }
  }
}

TEST_CASE("YAML core tags: !!float and !!int are numbers, !!bool a boolean, !!str text", "[io][case]") {
  const io::Case c = io::parse_case(
      "wavelength: !!float 520\nlattice: {period_x: !!int 400}\nsubstrate: SiO2\n"
      "layers: [{thickness: !!float 1e2, material: !!str SiO2, slices: !!int 2}]\n"
      "numerics: {harmonics: !!int 1, richardson: !!bool true}\n",
      "tags.yaml");
  CHECK(c.wavelength_nm == std::vector<double>{520});
  CHECK(c.structure.lattice.period_x == 400);
  CHECK(c.structure.layers.at(0).thickness == 100);
  CHECK(c.structure.layers.at(0).slices == 2);
  CHECK(c.numerics.richardson);
  for (const char* wrong : {"wavelength: !!str 120", "wavelength: \"120\"", "wavelength: !!bool 120"}) {
    INFO(wrong);
    try {
      (void)io::parse_case(std::string(wrong) + "\n", "tags.yaml");
      FAIL("accepted");
    } catch (const io::CaseError& e) {
      const std::string what = e.what();
      CHECK(what.find("expected a number") != std::string::npos);
      CHECK((what.find("quoted") != std::string::npos) == (std::string(wrong).find('"') != std::string::npos));
    }
  }
}

TEST_CASE("accuracy on demand: harmonics: auto and slices: auto, their target and maxima", "[io][case]") {
  const std::string head = R"(wavelength: 500
lattice: {period_x: 400}
substrate: SiO2
layers: [{thickness: 100, slices: 12, shapes: [{type: line, material: Si3N4, width: 150}]}]
)";
  const io::Case fixed = io::parse_case(head + "numerics: {harmonics: 5}\n", "fixed.yaml");
  CHECK(!fixed.numerics.accuracy);
  CHECK(fixed.output.fields);  // one point: fields on by default

  const io::Case both =
      io::parse_case(head + "numerics: {harmonics: auto, slices: auto, target_error: 2e-3}\n", "both.yaml");
  REQUIRE(both.numerics.accuracy);
  const io::AccuracyTarget& a = *both.numerics.accuracy;
  CHECK(a.harmonics);
  CHECK(a.slices);
  CHECK(a.target_error == 2e-3);
  CHECK(a.max_harmonics == 100);           // the 1D default
  CHECK(a.max_slices == 8 * 12);           // three doublings of the layers' own
  CHECK(both.numerics.harmonics_x == 100);  // the memory check's: the ladder's most
  CHECK(both.numerics.harmonics_y == 0);
  CHECK(both.total_slices() == 12);         // the first rung
  CHECK(!both.output.fields);              // never with auto (their shape would vary per point)
  // The memory estimate is the largest rung's: the most harmonics and slices.
  io::Case largest = both;
  largest.numerics.accuracy.reset();
  largest.structure.layers[0].slices = a.max_slices;
  CHECK(io::estimated_solver_bytes(both) == io::estimated_solver_bytes(largest));

  const io::Case given = io::parse_case(
      head + "numerics: {harmonics: [3, 0], slices: auto, target_error: 1e-4, max_slices: 60, richardson: true}\n",
      "given.yaml");
  REQUIRE(given.numerics.accuracy);
  CHECK(!given.numerics.accuracy->harmonics);
  CHECK(given.numerics.harmonics_x == 3);
  CHECK(given.numerics.accuracy->max_slices == 60);
  CHECK(given.numerics.accuracy->max_harmonics == 0);  // 0 for the one not raised (io/SCHEMA.md §2.2)
  CHECK(given.numerics.richardson);

  const io::Case crossed = io::parse_case(R"(wavelength: 500
lattice: {period_x: 400, period_y: 400}
substrate: SiO2
layers: [{thickness: 100, slices: 4, shapes: [{type: circle, material: Si3N4, diameter: 150}]}]
numerics: {harmonics: auto, target_error: 1e-3, max_harmonics: 9}
)",
                                          "crossed.yaml");
  REQUIRE(crossed.numerics.accuracy);
  CHECK(crossed.numerics.accuracy->max_harmonics == 9);
  CHECK(!crossed.numerics.accuracy->slices);
  CHECK(crossed.numerics.harmonics_x == 9);
  CHECK(crossed.numerics.harmonics_y == 9);
  CHECK(io::parse_case(R"(wavelength: 500
lattice: {period_x: 400, period_y: 400}
substrate: SiO2
layers: [{thickness: 100, slices: 4, material: Si3N4}]
numerics: {harmonics: auto, target_error: 1e-3}
)",
                       "crossed_default.yaml")
            .numerics.accuracy->max_harmonics == 20);  // the 2D default
}

namespace {
/// A library case of 2D rectangles: every numeric kind (lengths, a material's n, a slice count) from
/// parameters, one computed from the others.
const std::string parameter_text = R"case(parameters:
  wx: [120, 150, 180]
  wy: {start: 100, stop: 140, count: 2}
  h: 80
  n_film: [1.45, 1.5]
  area: "${wx} * ${wy}"
wavelength: [500, 600]
lattice: {period_x: 400, period_y: 300}
substrate: Si
materials: {film: {n: "${n_film}", k: 0}}
layers:
  - {thickness: "${h}", slices: "max(2, ${h}/20)", shapes: [{type: rectangle, material: Si3N4, width_x: "${wx}", width_y: "${area}/${wx}"}]}
  - {thickness: "${h}/2", material: film}
numerics: {harmonics: 2}
)case";
}  // namespace

TEST_CASE("parameters: axes, computed values, case_at and structures_at give the literal case's structure", "[io][case][parameters]") {
  const io::Case c = io::parse_case(parameter_text, "library.yaml");
  REQUIRE(c.parameters.size() == 4);
  CHECK(c.parameters[0].name == "wx");
  CHECK(c.parameters[1].values == std::vector<double>{100, 140});
  CHECK(c.parameters[2].values == std::vector<double>{80});
  REQUIRE(c.derived_parameters.size() == 1);
  CHECK(c.derived_parameters[0].name == "area");
  CHECK(c.parameter_points() == 3 * 2 * 1 * 2);
  CHECK(c.points() == 12 * 2);
  // Row-major, the first axis slowest.
  CHECK(c.parameter_point(0) == std::vector<double>{120, 100, 80, 1.45});
  CHECK(c.parameter_point(7) == std::vector<double>{150, 140, 80, 1.5});
  CHECK(c.parameter_values.at("area") == 120 * 100);

  // Any values, not only the sweep's: the Case a literal file with those numbers gives.
  const std::vector<double> values{137.5, 111.25, 60, 1.7};
  const io::Case at = io::case_at(c, values);
  const std::string literal_text = R"(wavelength: [500, 600]
lattice: {period_x: 400, period_y: 300}
substrate: Si
materials: {film: {n: 1.7, k: 0}}
layers:
  - {thickness: 60, slices: 3, shapes: [{type: rectangle, material: Si3N4, width_x: 137.5, width_y: 111.25}]}
  - {thickness: 30, material: film}
numerics: {harmonics: 2}
)";
  const io::Case literal = io::parse_case(literal_text, "literal.yaml");
  REQUIRE(at.structure.layers.size() == 2);
  CHECK(at.parameter_values.at("area") == 137.5 * 111.25);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(at.structure.layers[i].thickness == literal.structure.layers[i].thickness);
    CHECK(at.structure.layers[i].slices == literal.structure.layers[i].slices);
  }
  const auto& r = std::get<physics::Rectangle>(at.structure.layers[0].shapes.at(0));
  const auto& expected = std::get<physics::Rectangle>(literal.structure.layers[0].shapes.at(0));
  CHECK(r.width_x == expected.width_x);
  CHECK(r.width_y == 137.5 * 111.25 / 137.5);
  CHECK(at.structure.layers[1].background.index(550.0) == literal.structure.layers[1].background.index(550.0));
  // Both read through the same code: the same discretisation, slice by slice.
  CHECK(physics::slice_grid(at.structure, 1).z == physics::slice_grid(literal.structure, 1).z);

  const auto structures = io::structures_at(c, {c.parameter_point(0), values});
  REQUIRE(structures.size() == 2);
  CHECK(std::get<physics::Rectangle>(structures[0].layers[0].shapes.at(0)).width_x == 120);
  CHECK(structures[1].layers[0].thickness == 60);
  CHECK(structures[1].layers[0].slices == 3);

  // A vector of the wrong length is a programming error; invalid values are located case errors.
  CHECK_THROWS_AS(io::case_at(c, std::vector<double>{1, 2}), InvalidArgument);
  try {
    (void)io::case_at(c, std::vector<double>{450, 100, 80, 1.5});
    FAIL("a rectangle wider than the period was accepted");
  } catch (const io::CaseError& e) {
    INFO(e.what());
    CHECK(e.line() == 12);
    CHECK(e.column() == 105);
    CHECK(e.message().rfind("at the parameter point wx = 450, wy = 100, h = 80, n_film = 1.5, area = 45000: ", 0) == 0);
  }
}
