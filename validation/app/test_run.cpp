// gratingsim run end to end: every example case at test size solved by the executable, its result
// file compared with the same points solved in this process; a resumed interrupted run equals an
// uninterrupted one and keeps the finished points; unconverged solves are visible; malformed cases
// give located errors and no output; the plotting script turns results into PNG files.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "convolution/devices.hpp"
#include "io/problem.hpp"
#include "io/results.hpp"
#include "validation/app/example_cases.hpp"
#include "validation/app/executable.hpp"
#include "validation/app/stop_and_resume.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using test::contains;
using test::quoted;
using test::run_gratingsim;
using test::sweep_case;
using test::check_same_point;
using test::example_cases;
using test::reduced;

namespace {

/// The python that has h5py and matplotlib (GRATINGSIM_TEST_PYTHON if set, else Debian's), or "".
std::string python_for_plots() {
  const char* chosen = std::getenv("GRATINGSIM_TEST_PYTHON");
  for (const char* python : {chosen ? chosen : "/usr/bin/python3", "python3"})
    if (std::system((std::string(python) + " -c 'import h5py, matplotlib' >/dev/null 2>&1").c_str()) == 0)
      return python;
  return "";
}

}  // namespace

TEST_CASE("every example case at test size: the file holds what the solver computes", "[app][run]") {
  const test::ScratchDirectory dir("examples");
  const std::string python = python_for_plots();
  const auto files = example_cases();
  REQUIRE(files.size() >= 11);
  for (const fs::path& config : files) {
    const std::string name = config.stem().string();
    INFO(name);
    const fs::path small = dir / (name + ".yaml"), out = dir / (name + ".h5");
    const std::string text = reduced(test::read_text(config));
    std::ofstream(small) << text;
    io::Problem problem = io::load_problem(small.string());
    REQUIRE(problem.layout.points() <= (problem.layout.parameters.empty() ? 8 : 16));  // the library: 8 × 2 λ
    REQUIRE(problem.solver.m1 <= 4);
    REQUIRE(problem.source.total_slices() <= 3 * int(problem.source.structure.layers.size()));

    const test::Execution r = run_gratingsim("run " + quoted(small) + " -o " + quoted(out) + " --backend cpu-fftw");
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(contains(r.output, "every solve converged"));
    CHECK(!contains(r.output, "\r"));  // no progress line: stderr is a pipe here
    CHECK(fs::exists(out));
    CHECK(!fs::exists(io::partial_path(out.string())));

    const io::ResultReader reader(out.string());
    CHECK(reader.layout() == problem.layout);
    CHECK(reader.info().backend == "cpu-fftw");
    CHECK(reader.info().precision == "double");
    CHECK(reader.info().case_yaml == text);
    CHECK(reader.info().case_path == small.string());

    problem.solver.backend = conv::Backend::cpu_fftw;
    for (std::size_t batch = 0; batch < problem.layout.batches(); ++batch) {
      const auto points = io::points_of_batch(problem, batch);
      std::vector<physics::Incidence> incidences;
      for (std::size_t p : points) incidences.push_back(io::incidence_of(problem, p));
      const physics::SolveResult solved = physics::solve(problem.structure_of(points[0]), incidences, problem.solver);
      for (std::size_t j = 0; j < points.size(); ++j) {
        INFO("point " << points[j]);
        REQUIRE(reader.done(points[j]));
        const io::PointResult file = reader.read(points[j]);
        CHECK(file.solve_seconds > 0);
        check_same_point(file, io::to_point_result(problem, points[j], solved.incidences[j], 0.0), 1e-9);
      }
    }

    if (!python.empty() &&
        (name == "default" || name == "field_map" || name == "conical" || name == "si_lines_library")) {
      const fs::path figures = dir / (name + "_figures");
      const std::string command = python + " " + quoted(test::repository_root() / "app" / "plot_results.py") + " " +
                                  quoted(out) + " -o " + quoted(figures) + " >/dev/null 2>&1";
      CHECK(std::system(command.c_str()) == 0);
      CHECK(fs::file_size(figures / (name + "_efficiencies.png")) > 1000);
      if (name == "field_map") CHECK(fs::file_size(figures / (name + "_field_0.png")) > 1000);
      if (name != "field_map") CHECK(fs::file_size(figures / (name + "_ellipsometry.png")) > 1000);
    }
  }
  if (python.empty()) WARN("plot_results.py not run: no Python 3 with h5py and matplotlib");
}

TEST_CASE("solver/method records the method that ran: auto's choice by lattice and material, or the one asked for",
          "[app][run]") {
  // auto (docs/solver.md §7): GMRES on a 1D grating and on a crossed metal, BiCGStab on a crossed dielectric.
  const test::ScratchDirectory dir("methods");
  const std::string crossed = R"(wavelength: [600, 700]
lattice: {period_x: 400, period_y: 400}
substrate: SiO2
layers:
  - {thickness: 100, slices: 2, shapes: [{type: circle, material: MATERIAL, diameter: 200}]}
numerics: {harmonics: 2SOLVER}
)";
  const auto with = [](std::string text, const std::string& material, const std::string& solver) {
    text.replace(text.find("MATERIAL"), 8, material);
    text.replace(text.find("SOLVER"), 6, solver);
    return text;
  };
  struct Case {
    std::string name, text;
    std::uint8_t method;  // io::method_names
  };
  const std::vector<Case> cases = {
      {"lines", sweep_case, 1},
      {"dielectric", with(crossed, "Si3N4", ""), 2},
      {"metal", with(crossed, "Al", ""), 1},
      {"asked", with(crossed, "Si3N4", ", solver: {method: gmres}"), 1},
      {"dense", with(crossed, "Si3N4", ", solver: {method: direct}"), 3},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const fs::path config = dir / (c.name + ".yaml"), out = dir / (c.name + ".h5");
    std::ofstream(config) << c.text;
    const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --quiet");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const io::ResultReader reader(out.string());
    for (std::size_t p = 0; p < reader.layout().points(); ++p) CHECK(int(reader.read(p).method) == int(c.method));
  }
}

TEST_CASE("a resumed interrupted run equals an uninterrupted one and keeps the finished points", "[app][run]") {
  // With fixed settings and with harmonics: auto (whose points of one batch climb to different M).
  const auto [tag, text] = GENERATE(std::pair{"fixed", sweep_case}, std::pair{"auto", test::auto_sweep_case});
  INFO(tag);
  const test::ScratchDirectory dir(std::string("resume_") + tag);
  const fs::path config = dir / "sweep.yaml";
  std::ofstream(config) << text;
  // Interrupted after 3 of 6 points: in the middle of the second wavelength's batch of two.
  test::check_stop_and_resume(dir.path(), config, "--backend cpu-fftw", 6, 3,
                              [](const io::PointResult& resumed, const io::PointResult& whole) {
                                check_same_point(resumed, whole, 1e-10);
                              });
}

TEST_CASE("resume without a partial file starts afresh, a partial file of another case is refused", "[app][run]") {
  const test::ScratchDirectory dir("resume_errors");
  const fs::path config = dir / "sweep.yaml", out = dir / "out.h5";
  std::ofstream(config) << sweep_case;
  const test::Execution fresh =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --resume");
  INFO(fresh.output);
  CHECK(fresh.status == 0);
  CHECK(contains(fresh.output, "starting a new run"));

  REQUIRE(
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --stop-after 1 --overwrite").status ==
      1);
  std::ofstream(config, std::ios::app) << "# edited after the interruption\n";
  const test::Execution other =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --resume --overwrite");
  INFO(other.output);
  CHECK(other.status == 1);
  CHECK(contains(other.output, "case"));
  CHECK(fs::exists(io::partial_path(out.string())));  // kept: nothing was lost
}

TEST_CASE("unconverged solves are stored, shown and give exit status 3", "[app][run]") {
  const test::ScratchDirectory dir("unconverged");
  const fs::path config = dir / "hard.yaml", out = dir / "hard.h5";
  std::string text = sweep_case;
  text = std::regex_replace(text, std::regex("numerics: \\{harmonics: 4\\}"),
                            "numerics: {harmonics: 4, solver: {max_iterations: 2, preconditioner: none}}");
  std::ofstream(config) << text;
  const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-direct");
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(contains(r.output, "did NOT converge"));
  CHECK(contains(r.output, "  NO  "));
  CHECK(contains(r.output, "did not reach the tolerance"));
  REQUIRE(fs::exists(out));
  const io::ResultReader reader(out.string());
  std::size_t unconverged = 0;
  for (std::size_t p = 0; p < reader.layout().points(); ++p)
    for (auto c : reader.read(p).converged) unconverged += c ? 0 : 1;
  CHECK(unconverged > 0);

  const test::Execution quiet =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-direct --quiet --overwrite");
  CHECK(quiet.status == 3);
  CHECK(!contains(quiet.output, "did NOT converge"));  // no summary, but the solver's warning
  CHECK(contains(quiet.output, "did not reach the tolerance"));
}

TEST_CASE("a lossless point off its energy balance is shown, warned about at the slices, and gives exit status 3",
          "[app][run]") {
  // One 500 nm slice of an n = 3.5 ridge, lossless everywhere (found by an audit in session 36: ΣR + ΣT = 2.8 at
  // 500 nm in p, every solve converged, exit 0). With the default slicing (140 slices) the balance holds to the
  // z-discretisation (~5e-4, docs/formulation.md §9) and the run exits 0.
  const test::ScratchDirectory dir("energy_balance");
  const fs::path config = dir / "coarse.yaml", out = dir / "coarse.h5";
  const auto write = [&](const std::string& slices) {
    std::ofstream(config) << "wavelength: [500, 700]\nincidence: {theta_deg: 20}\nlattice: {period_x: 400}\n"
                             "materials: {hi: {n: 3.5}, gl: {n: 1.5}}\nsubstrate: gl\nlayers:\n"
                             "  - {thickness: 500, " + slices + "shapes: [{type: line, material: hi, width: 200}]}\n"
                             "numerics: {harmonics: 4}\n";
  };
  write("slices: 1, ");
  const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw");
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(contains(r.output, "coarse.yaml:7:30: warning: layer 'layer0': 1 slice(s) of 500 nm are 140 times thicker"));
  CHECK(contains(r.output, "2 point(s) off by more than 0.05 (|1-ΣR-ΣT| where lossless"));
  CHECK(contains(r.output, "every solve converged"));
  REQUIRE(fs::exists(out));
  const io::ResultReader reader(out.string());
  double worst = 0;
  for (std::size_t p = 0; p < reader.layout().points(); ++p)
    for (const double e : reader.read(p).energy_balance_error) worst = std::max(worst, e);
  CHECK(worst > 0.05);
  const test::Execution quiet =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --quiet --overwrite");
  CHECK(quiet.status == 3);

  write("");
  const test::Execution resolved =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --overwrite");
  INFO(resolved.output);
  CHECK(resolved.status == 0);
  CHECK(!contains(resolved.output, "warning"));
  CHECK(!contains(resolved.output, "off by more than"));
}

TEST_CASE("a point that makes power where a material absorbs is shown and gives exit status 3", "[app][run]") {
  // A 2D block of ε = −20 + 1.5i at M = 3 with the normal-vector products (found by a second audit in session 36):
  // ΣT = 1.017 and an absorption of −0.27 in p, every solve converged, exit 0 (the lossless test does not apply).
  // Laurent's plain products conserve energy (docs/normal-vector.md §8): the same case keeps an absorption of +0.19.
  const test::ScratchDirectory dir("negative_absorption");
  const fs::path config = dir / "metal.yaml", out = dir / "metal.h5";
  const auto write = [&](const char* formulation) {
    std::ofstream(config) << "wavelength: 800\nincidence: {theta_deg: 45, phi_deg: 90}\n"
                             "lattice: {period_x: 400, period_y: 400}\nsubstrate: glass\n"
                             "materials: {metal: {epsilon: [-20, 1.5]}, glass: {n: 1.5}}\nlayers:\n"
                             "  - {thickness: 80, shapes: [{type: rectangle, material: metal, width_x: 150, width_y: 250}]}\n"
                             "numerics: {harmonics: 3, formulation: " << formulation << "}\n";
  };
  write("normal-vector");
  const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw");
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(contains(r.output, "1 point(s) off by more than 0.05"));
  CHECK(contains(r.output, "every solve converged"));
  const io::PointResult made = io::ResultReader(out.string()).read(0);
  CHECK(*std::min_element(made.absorption.begin(), made.absorption.end()) < -0.05);

  write("laurent");
  const test::Execution plain =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --overwrite");
  INFO(plain.output);
  CHECK(plain.status == 0);
  const io::PointResult kept = io::ResultReader(out.string()).read(0);
  CHECK(*std::min_element(kept.absorption.begin(), kept.absorption.end()) > 0);
}

TEST_CASE("harmonics: auto reaches its target on the lamellar reference and records what it used", "[app][run][accuracy]") {
  // docs/reference-cases.md §3 (formulation.md §9.3): λ = 1 µm, period 1.5, ridge 0.75 of ε = 4, height
  // 0.5, on ε = 2.25, θ = 10°; converged RCWA (161 orders): s R0 0.004755, T0 0.098122; p R0 0.052498,
  // T0 0.062423. Richardson in z at 10/20 slices, so the harmonics are what the ladder must find.
  constexpr double target = 1e-3;
  const test::ScratchDirectory dir("accuracy_lamellar");
  const fs::path config = dir / "lamellar.yaml", out = dir / "lamellar.h5";
  std::ofstream(config) << R"(units: um
wavelength: 1
incidence: {theta_deg: 10}
lattice: {period_x: 1.5}
materials: {ridge: {epsilon: [4, 0]}, glass: {epsilon: [2.25, 0]}}
substrate: glass
layers: [{thickness: 0.5, slices: 10, shapes: [{type: line, material: ridge, width: 0.75}]}]
numerics: {harmonics: auto, target_error: 1e-3, richardson: true}
)";
  const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "(auto)"));
  CHECK(contains(r.output, "accuracy: target 0.001 on every efficiency, harmonics raised (M ×1.5 per rung, up to 100)"));
  CHECK(!contains(r.output, "did NOT reach"));

  const io::ResultReader reader(out.string());
  REQUIRE(reader.layout().accuracy);
  CHECK(reader.layout().accuracy->target_error == target);
  CHECK(reader.layout().accuracy->max_harmonics == 100);
  CHECK(!reader.layout().fields);  // a single point without fields: their shape depends on M
  const io::PointResult p = reader.read(0);
  INFO("M1 " << p.used_harmonics[0] << ", estimated error " << p.estimated_error);
  CHECK(p.target_reached == 1);
  CHECK(p.estimated_error <= target);
  CHECK(p.used_harmonics[0] > 4);  // the ladder climbed
  CHECK(p.used_harmonics[1] == 0);
  CHECK(p.used_slices == 10);
  CHECK(p.psi_change_deg >= 0);
  const auto& orders = reader.layout().orders;
  const std::size_t zeroth = std::size_t(std::find(orders.begin(), orders.end(), std::array<int, 2>{0, 0}) - orders.begin());
  REQUIRE(zeroth < orders.size());
  const std::size_t no = orders.size();
  const double reference[2][2] = {{0.004755, 0.098122}, {0.052498, 0.062423}};  // [s, p][R0, T0]
  for (std::size_t i = 0; i < 2; ++i) {
    INFO((i == 0 ? "s" : "p") << ": R0 " << p.reflectance[i * no + zeroth] << ", T0 " << p.transmittance[i * no + zeroth]);
    CHECK(std::abs(p.reflectance[i * no + zeroth] - reference[i][0]) <= target);
    CHECK(std::abs(p.transmittance[i * no + zeroth] - reference[i][1]) <= target);
  }
}

TEST_CASE("a ladder that hits its maximum without agreement: shown, stored, exit status 3", "[app][run][accuracy]") {
  const test::ScratchDirectory dir("accuracy_cap");
  const fs::path config = dir / "capped.yaml", out = dir / "capped.h5";
  std::ofstream(config) << std::regex_replace(std::string(test::auto_sweep_case), std::regex("target_error: 2e-3"),
                                              "target_error: 1e-6, max_harmonics: 9");
  const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw");
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(contains(r.output, "6 point(s) did NOT reach the target"));
  CHECK(contains(r.output, "accuracy/reached = 0"));
  CHECK(contains(r.output, " NO"));
  CHECK(contains(r.output, "every solve converged"));  // the Krylov solves did: the target was missed
  REQUIRE(fs::exists(out));
  const io::ResultReader reader(out.string());
  for (std::size_t point = 0; point < reader.layout().points(); ++point) {
    const io::PointResult p = reader.read(point);
    CHECK(p.target_reached == 0);
    CHECK(p.used_harmonics[0] == 9);
    CHECK(p.estimated_error > 1e-6);
  }
  const test::Execution quiet =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --quiet --overwrite");
  CHECK(quiet.status == 3);
}

TEST_CASE("malformed cases: a located message, status 1, no output file, an earlier output untouched", "[app][run]") {
  const test::ScratchDirectory dir("malformed");
  const fs::path cases = test::repository_root() / "validation" / "io" / "cases";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(cases))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 30);
  const fs::path out = dir / "out.h5";
  for (const fs::path& file : files) {
    INFO(file.filename().string());
    std::ofstream(out) << "an earlier result";
    std::string first;
    std::getline(std::ifstream(file), first);
    REQUIRE(first.rfind("# expect: ", 0) == 0);
    const std::string location = first.substr(10, first.find(' ', 10) - 10);  // "LINE:COLUMN"
    const test::Execution r = run_gratingsim("run " + quoted(file) + " -o " + quoted(out) + " --quiet");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(contains(r.output, ":" + location + ": error: "));
    CHECK(test::read_text(out) == "an earlier result");
    CHECK(!fs::exists(io::partial_path(out.string())));
  }
  const test::Execution missing = run_gratingsim("run " + quoted(dir / "nowhere.yaml"));
  CHECK(missing.status == 1);
  CHECK(contains(missing.output, "nowhere.yaml"));
  CHECK(!fs::exists(dir / "nowhere.h5"));
}

TEST_CASE("run: --help, defaults and wrong command lines", "[app][run][cli]") {
  const test::Execution help = run_gratingsim("run --help");
  CHECK(help.status == 0);
  CHECK(contains(help.output, "usage: gratingsim run CASE.yaml"));
  CHECK(contains(help.output, "-o, --output OUT.h5"));
  const std::string help_text = std::regex_replace(help.output, std::regex("\\s+"), " ");
  CHECK(contains(help_text, "3 done, but some solve did not reach its tolerance"));
  CHECK(!contains(help.output, "stop-after"));

  const std::pair<const char*, const char*> wrong[] = {
      {"run", "missing the case file"},
      {"run a.yaml b.yaml", "unexpected argument 'b.yaml'"},
      {"run a.yaml --precision half", "--precision expects single or double"},
      {"run a.yaml --backend gpu-magic", "unknown backend 'gpu-magic'"},
      {"run a.yaml -x", "unknown option '-x'"},
      {"run a.yaml -o", "needs a value"},
      {"run a.yaml --stop-after 0", "--stop-after expects"},
  };
  for (auto [arguments, message] : wrong) {
    const test::Execution r = run_gratingsim(arguments);
    INFO("gratingsim " << arguments << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK(contains(r.output, message));
  }

  // Without -o the result goes next to the case, named after it; --precision single is recorded.
  const test::ScratchDirectory dir("defaults");
  std::ofstream(dir / "sweep.yaml") << sweep_case;
  const test::Execution r =
      run_gratingsim("run " + quoted(dir / "sweep.yaml") + " --backend cpu-direct --precision single --quiet");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "solver tolerance raised from 1e-08 to 1e-06"));
  REQUIRE(fs::exists(dir / "sweep.h5"));
  CHECK(io::ResultReader((dir / "sweep.h5").string()).info().precision == "single");
}

TEST_CASE("run refuses outputs that would destroy a file, before solving", "[app][run][safety]") {
  using namespace gratingsim::test;
  const ScratchDirectory dir("output_safety");
  const auto case_file = dir / "case.yaml";
  { std::ofstream(case_file) << sweep_case; }
  const std::string original = read_text(case_file);
  // the case file itself, by two spellings
  for (const std::string& out : {case_file.string(), (dir.path() / "." / "case.yaml").string()}) {
    const Execution r = run_gratingsim("run " + quoted(case_file) + " -o " + quoted(std::filesystem::path(out)) + " --quiet");
    CHECK(r.status == 1);
    CHECK(contains(r.output, "a file the case reads"));
    CHECK(read_text(case_file) == original);
  }
  // a device node
  const Execution null_run = run_gratingsim("run " + quoted(case_file) + " -o /dev/null --quiet");
  CHECK(null_run.status == 1);
  CHECK(contains(null_run.output, "not a regular file"));
  CHECK(std::filesystem::is_character_file("/dev/null"));
  // a FIFO
  const auto fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(run_gratingsim("run " + quoted(case_file) + " -o " + quoted(fifo) + " --quiet").status == 1);
  CHECK(std::filesystem::is_fifo(fifo));
  // a directory, a missing directory
  CHECK(contains(run_gratingsim("run " + quoted(case_file) + " -o " + quoted(dir.path()) + " --quiet").output,
                 "is a directory"));
  CHECK(contains(run_gratingsim("run " + quoted(case_file) + " -o " + quoted(dir / "no/out.h5") + " --quiet").output,
                 "does not exist"));
  // an existing result: kept without --overwrite, replaced with it
  const auto out = dir / "out.h5";
  { std::ofstream(out) << "an earlier result"; }
  const Execution kept = run_gratingsim("run " + quoted(case_file) + " -o " + quoted(out) + " --quiet");
  CHECK(kept.status == 1);
  CHECK(contains(kept.output, "--overwrite"));
  CHECK(read_text(out) == "an earlier result");
  CHECK(run_gratingsim("run " + quoted(case_file) + " -o " + quoted(out) + " --quiet --overwrite").status == 0);
  CHECK(read_text(out) != "an earlier result");
}

TEST_CASE("an absorbing substrate: one note, ΣT n/a, T = 0 and NaN directions in the file, Δ = 180° at θ = 0",
          "[app][run]") {
  const test::ScratchDirectory dir("absorbing");
  const fs::path config = dir / "film.yaml", out = dir / "film.h5";
  // Si absorbs from 400 to 700 nm; a film of random thickness, so that the Δ test sees fresh phases.
  const int thickness = 20 + int(std::random_device{}() % 200);
  std::ofstream(config) << "wavelength: [400, 450, 500, 550, 600, 650, 700]\nincidence: {theta_deg: [0, 50]}\n"
                           "lattice: {period_x: 500}\nsubstrate: Si\nlayers: [{thickness: "
                        << thickness << ", slices: 4, material: SiO2}]\nnumerics: {harmonics: 0}\n";
  const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-direct");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::size_t notes = 0;
  for (std::size_t at = r.output.find("absorbs at"); at != std::string::npos; at = r.output.find("absorbs at", at + 1))
    ++notes;
  CHECK(notes == 1);
  CHECK(contains(r.output, "note: the substrate (Si) absorbs at every wavelength"));
  CHECK(!contains(r.output, "warning"));
  // Every summary row (λ, θ, φ, pol, ...) shows ΣT as n/a, not a 0.00000 standing for an undefined value.
  const std::regex row(R"(^ *\d+\.\d\d +\d+\.\d\d +0\.00 +[sp] )");
  std::size_t rows = 0, not_available = 0;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (std::regex_search(line, row)) ++rows, not_available += contains(line, " n/a ") ? 1 : 0;
  CHECK(rows == 28);  // 7 wavelengths × 2 angles × 2 polarisations
  CHECK(not_available == rows);
  // The file as io/SCHEMA.md says: T = 0 and no transmitted direction where the substrate absorbs.
  const io::ResultReader reader(out.string());
  for (std::size_t p = 0; p < reader.layout().points(); ++p) {
    const io::PointResult point = reader.read(p);
    for (const double t : point.transmittance) CHECK(t == 0);
    for (const double d : point.transmitted_direction) CHECK(std::isnan(d));
    INFO("point " << p);
    CHECK(point.delta_deg > -180);  // io/SCHEMA.md: Δ ∈ (−180°, 180°]
    CHECK(point.delta_deg <= 180);
    if (p % 2 == 0) {  // θ = 0: r_pp = −r_ss, Δ = 180° (never −180°), Ψ = 45°
      CHECK(std::abs(point.delta_deg - 180) < 1e-9);
      CHECK(std::abs(point.psi_deg - 45) < 1e-9);
    }
  }
}

TEST_CASE("a GPU backend on a machine without a CUDA device: said at numerics.backend, with what to use",
          "[app][run]") {
  if (!conv::cuda_report().devices.empty()) {
    WARN("not run: a CUDA device is present");
    return;
  }
  const test::ScratchDirectory dir("no_gpu");
  const fs::path config = dir / "gpu.yaml", out = dir / "gpu.h5";
  std::ofstream(config) << "wavelength: 500\nlattice: {period_x: 400}\nsubstrate: SiO2\n"
                           "layers: [{thickness: 50, material: SiO2}]\nnumerics:\n  harmonics: 1\n  backend: gpu-fused\n";
  const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out));
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, config.string() + ":7:12: error: numerics.backend: backend gpu-fused needs a CUDA device"));
  CHECK(contains(r.output, "; use auto or cpu-fftw"));
  CHECK(!fs::exists(out));
  const test::Execution cli =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend gpu-direct");
  INFO(cli.output);
  CHECK(cli.status == 1);
  CHECK(contains(cli.output, "error: --backend gpu-direct needs a CUDA device"));
  CHECK(!fs::exists(out));
  // Overridden on the command line, the case's backend is not used.
  CHECK(run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --quiet").status == 0);
}

TEST_CASE("plot_results.py: −180° < Δ ≤ 180° where it wraps along the sweep, titles wrapped to fit", "[app][run]") {
  const std::string python = python_for_plots();
  if (python.empty()) {
    WARN("not run: no Python 3 with h5py and matplotlib");
    return;
  }
  const test::ScratchDirectory dir("plot_delta");
  const fs::path config = dir / "film.yaml", out = dir / "film.h5";
  // 250–300 nm of oxide on Si at 70°: Δ passes ±180° several times between 250 and 1000 nm.
  std::ofstream(config) << "description: " << std::string(3, 'x') << " a title long enough to need wrapping twice "
                        << "in a figure five inches wide, oxide film on Si at 70°, Ψ/Δ spectrum over the visible\n"
                        << "wavelength: {start: 250, stop: 1000, count: 40}\nincidence: {theta_deg: 70}\n"
                           "lattice: {period_x: 500}\nsubstrate: Si\nlayers: [{thickness: "
                        << 250 + int(std::random_device{}() % 50) << ", slices: 6, material: SiO2}]\n"
                        << "numerics: {harmonics: 0}\n";
  const test::Execution r =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-direct --quiet");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string command = python + " " + quoted(test::repository_root() / "validation" / "app" / "check_plot_results.py") +
                              " " + quoted(out) + " " + quoted(dir.path()) + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string report;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) report.append(buffer, n);
  INFO(report);
  CHECK(pclose(pipe) == 0);
}

TEST_CASE("run refuses an output that is a raster array the case reads, and records the array in the inputs digest",
          "[app][run][safety]") {
  using namespace gratingsim::test;
  const ScratchDirectory dir("raster_input");
  // A 2 × 4 bool mask, written as numpy.save does (format 1.0, header padded to 64 bytes).
  const auto write_mask = [&](const std::string& pixels) {
    std::string header = "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 4), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::ofstream(dir / "mask.npy", std::ios::binary)
        << std::string("\x93NUMPY\x01\x00", 8) << char(header.size() & 0xff) << char(header.size() >> 8) << header
        << pixels;
  };
  write_mask(std::string("\1\1\0\0\0\1\1\0", 8));
  std::ofstream(dir / "case.yaml")
      << "wavelength: 500\nlattice: {period_x: 400, period_y: 200}\nsubstrate: SiO2\n"
         "layers: [{thickness: 50, slices: 2, shapes: [{type: raster, mask: mask.npy, material: Si}]}]\n"
         "numerics: {harmonics: 2, backend: cpu-direct}\n";
  const std::string array = read_text(dir / "mask.npy");
  const Execution refused = run_gratingsim("run " + quoted(dir / "case.yaml") + " -o " + quoted(dir / "mask.npy") + " --quiet");
  CHECK(refused.status == 1);
  CHECK(contains(refused.output, "a file the case reads"));
  CHECK(read_text(dir / "mask.npy") == array);
  // The digest follows the array's content: another mask, another digest.
  const auto digest = [&](const std::string& out) {
    const Execution r = run_gratingsim("run " + quoted(dir / "case.yaml") + " -o " + quoted(dir / out) + " --quiet");
    INFO(r.output);
    REQUIRE(r.status == 0);
    return io::ResultReader((dir / out).string()).info().inputs_digest;
  };
  const std::string first = digest("first.h5");
  write_mask(std::string("\0\1\0\0\0\1\1\1", 8));
  const std::string second = digest("second.h5");
  CHECK(first.rfind("fnv1a64:", 0) == 0);
  CHECK(first != second);
}
