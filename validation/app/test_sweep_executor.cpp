// The sweep executor (app/sweep_executor.hpp) with units of several wavelengths (app/work_units.hpp,
// --wavelengths-per-unit): the file equals the one-wavelength units' bit for bit (solve times aside) on
// both CPU backends, with one and two workers, fixed and automatic numerics and parameter points; a
// unit's time is divided among its wavelengths (so the phases still sum to at most the wall time); a
// resumed partial file whose missing points are scattered over the wavelengths is completed by units
// with gaps, keeping its finished points untouched.
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "validation/app/executable.hpp"
#include "validation/app/same_points.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using test::check_same_points;
using test::contains;
using test::quoted;
using test::run_gratingsim;

namespace {

/// The summary's "phases sum to S s of W s wall time" of a one-worker run: S ≤ W (each unit's time
/// counted once).
void check_phases_within_wall_time(const std::string& output) {
  std::smatch m;
  REQUIRE(std::regex_search(output, m, std::regex(R"(phases sum to ([0-9.]+) s of ([0-9.]+) s wall time)")));
  CHECK(std::stod(m[1]) <= std::stod(m[2]));
}

}  // namespace

TEST_CASE("units of several wavelengths write the file one-wavelength units write, bit for bit", "[app][run][units]") {
  const test::ScratchDirectory dir("wavelength_units");
  for (const char* backend : {"cpu-direct", "cpu-fftw"})
    for (const auto& [name, text] : {std::pair{"sweep", test::sweep_case}, std::pair{"auto", test::auto_sweep_case},
                                     std::pair{"parameters", test::parameter_case}}) {
      const std::string tag = std::string(name) + "_" + backend;
      INFO(tag);
      const fs::path config = dir / (tag + ".yaml"), one = dir / (tag + "_1.h5");
      std::ofstream(config) << text;
      const auto run = [&](const fs::path& out, const std::string& options) {
        const test::Execution r =
            run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend " + backend + options);
        INFO(r.output);
        REQUIRE(r.status == 0);
        return r;
      };
      run(one, " --wavelengths-per-unit 1 --quiet");
      // 2: units of 1 and 2 wavelengths (⌈3/2⌉ near-equal runs); 3: every wavelength of a parameter
      // point in one solve; two workers taking such units.
      for (const std::string options : {" --wavelengths-per-unit 2", " --wavelengths-per-unit 3",
                                        " --wavelengths-per-unit 2 --workers 2"}) {
        INFO(options);
        const fs::path several = dir / (tag + "_several.h5");
        const test::Execution r = run(several, options + " --overwrite");
        check_same_points(several, one);
        if (!contains(options, "--workers")) check_phases_within_wall_time(r.output);  // (workers overlap)
      }
    }
}

TEST_CASE("a unit's time is divided among its wavelengths by their points", "[app][run][units]") {
  // sweep_case (3 wavelengths × 2 angles) in one unit: each wavelength's 2 points get a third of the
  // unit's solve time and of each phase, the writing too: every point the same times.
  const test::ScratchDirectory dir("wavelength_units_time");
  const fs::path config = dir / "sweep.yaml", out = dir / "out.h5";
  std::ofstream(config) << test::sweep_case;
  const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) +
                                           " --backend cpu-fftw --quiet --wavelengths-per-unit 3");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const io::ResultReader reader(out.string());
  const io::PointResult first = reader.read(0);
  CHECK(first.solve_seconds > 0);
  for (const double s : first.phase_seconds) CHECK((std::isfinite(s) && s >= 0));
  for (std::size_t p = 1; p < 6; ++p) {
    INFO("point " << p);
    const io::PointResult x = reader.read(p);
    CHECK(x.solve_seconds == first.solve_seconds);
    CHECK(x.phase_seconds == first.phase_seconds);
  }
}

TEST_CASE("a resume whose missing points are scattered over the wavelengths completes the file with multi-wavelength units",
          "[app][run][units]") {
  const test::ScratchDirectory dir("wavelength_units_resume");
  const fs::path config = dir / "six.yaml", whole = dir / "whole.h5", out = dir / "out.h5";
  const std::string partial = io::partial_path(out.string());
  std::ofstream(config) << R"(# six wavelengths, two angles: 12 points, 2 per wavelength
wavelength: {start: 500, stop: 750, count: 6}
incidence: {theta_deg: [0, 30]}
lattice: {period_x: 600}
substrate: SiO2
layers:
  - {name: lines, thickness: 150, slices: 3, shapes: [{type: line, material: Si3N4, width: 250}]}
numerics: {harmonics: 4}
)";
  const std::string args = "run " + quoted(config) + " --backend cpu-fftw --quiet -o ";
  REQUIRE(run_gratingsim(args + quoted(whole) + " --wavelengths-per-unit 1").status == 0);
  const test::Execution stopped = run_gratingsim(args + quoted(out) + " --wavelengths-per-unit 1 --stop-after 10");
  INFO(stopped.output);
  REQUIRE(stopped.status == 1);
  // Points 1, 4 and 7 (wavelengths 0, 2 and 3) forgotten: left are 1, 4, 7, 10 and 11, of four wavelengths.
  const std::vector<std::size_t> forgotten{1, 4, 7};
  {
    const hid_t file = H5Fopen(partial.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(file >= 0);
    const hid_t set = H5Dopen2(file, "done", H5P_DEFAULT);
    std::vector<std::uint8_t> done(12, 0);
    REQUIRE(H5Dread(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, done.data()) >= 0);
    for (std::size_t p = 0; p < 12; ++p) REQUIRE(done[p] == (p < 10 ? 1 : 0));
    for (const std::size_t p : forgotten) done[p] = 0;
    REQUIRE(H5Dwrite(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, done.data()) >= 0);
    H5Dclose(set);
    H5Fclose(file);
  }
  std::vector<io::PointResult> kept(12);
  {
    const io::ResultReader reader(partial);
    for (std::size_t p = 0; p < 12; ++p)
      if (reader.done(p)) kept[p] = reader.read(p);
  }
  // Three wavelengths per unit: the four wavelengths left in two units of two, each with gaps.
  const test::Execution resumed =
      run_gratingsim("run " + quoted(config) + " --backend cpu-fftw -o " + quoted(out) + " --wavelengths-per-unit 3 --resume");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK(contains(resumed.output, "5 point(s) solved"));
  CHECK(contains(resumed.output, "7 kept from the resumed partial file"));
  CHECK(!fs::exists(partial));
  check_same_points(out, whole);
  const io::ResultReader reader(out.string());
  for (std::size_t p = 0; p < 10; ++p)
    if (std::find(forgotten.begin(), forgotten.end(), p) == forgotten.end()) {
      INFO("point " << p);
      CHECK(reader.read(p) == kept[p]);  // bitwise, times included: not solved again
    }
}
