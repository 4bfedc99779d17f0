// gratingsim run on a case with parameters (io/SCHEMA.md §1.11): the one result file equals, point for
// point and bit for bit, the runs of the literal cases with the parameters' values written in; an
// interrupted parameter sweep resumes; a parameter point with an invalid geometry is refused with its
// values before anything is solved or written; files without parameters stay schema version 1.
#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "validation/app/executable.hpp"
#include "validation/app/stop_and_resume.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using test::contains;
using test::quoted;
using test::run_gratingsim;

namespace {

/// %.17g: the double read back exactly.
std::string exact(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

/// test::parameter_case at width, height, with its numbers written in: top = width − 2·height/tan 80°,
/// computed here in C++ by the operations the expression names.
std::string literal_case(double width, double height) {
  const double top = width - 2 * height / std::tan(80 * (std::numbers::pi / 180));
  std::string text = test::parameter_case;
  const std::size_t line = text.find("parameters:");
  text.erase(line, text.find('\n', line) + 1 - line);
  text = replace_all(text, "\"${width}\"", exact(width));
  text = replace_all(text, "\"${height}\"", exact(height));
  return replace_all(text, "\"${top}\"", exact(top));
}

/// Every value of the point but the wall times of its batch.
io::PointResult without_times(io::PointResult r) {
  r.solve_seconds = 0;
  r.phase_seconds = {};
  return r;
}

int schema_version(const fs::path& file) {
  const hid_t f = H5Fopen(file.string().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(f >= 0);
  const hid_t a = H5Aopen(f, "schema_version", H5P_DEFAULT);
  int version = 0;
  REQUIRE(H5Aread(a, H5T_NATIVE_INT, &version) >= 0);
  H5Aclose(a);
  H5Fclose(f);
  return version;
}

}  // namespace

TEST_CASE("a parameter sweep's file equals the literal cases' runs point for point, bit for bit", "[app][parameters]") {
  const test::ScratchDirectory dir("parameters_literal");
  const fs::path config = dir / "sweep.yaml", out = dir / "sweep.h5";
  std::ofstream(config) << test::parameter_case;
  const test::Execution swept = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw");
  INFO(swept.output);
  REQUIRE(swept.status == 0);
  CHECK(schema_version(out) == 2);
  const io::ResultReader reader(out.string());
  const io::ResultLayout& l = reader.layout();
  REQUIRE(l.parameters.size() == 2);
  CHECK(l.parameters[0] == io::SweepParameter{"width", {200, 250}});
  CHECK(l.parameters[1] == io::SweepParameter{"height", {150, 120}});
  REQUIRE(l.points() == 24);

  std::size_t compared = 0;
  for (std::size_t iw = 0; iw < 2; ++iw)
    for (std::size_t ih = 0; ih < 2; ++ih) {
      const double width = l.parameters[0].values[iw], height = l.parameters[1].values[ih];
      INFO("width " << width << ", height " << height);
      const std::string tag = std::to_string(iw) + std::to_string(ih);
      const fs::path literal = dir / ("literal" + tag + ".yaml"), literal_out = dir / ("literal" + tag + ".h5");
      std::ofstream(literal) << literal_case(width, height);
      const test::Execution alone =
          run_gratingsim("run " + quoted(literal) + " -o " + quoted(literal_out) + " --backend cpu-fftw");
      INFO(alone.output);
      REQUIRE(alone.status == 0);
      CHECK(schema_version(literal_out) == 1);  // no parameters: the file as before they existed
      const io::ResultReader single(literal_out.string());
      REQUIRE(single.layout().points() == 6);
      CHECK(single.layout().orders == l.orders);
      for (std::size_t p = 0; p < 6; ++p) {
        INFO("point " << p);
        const std::size_t point = (iw * 2 + ih) * 6 + p;
        REQUIRE(reader.done(point));
        CHECK(without_times(reader.read(point)) == without_times(single.read(p)));
        ++compared;
      }
    }
  CHECK(compared == 24);
}

TEST_CASE("an interrupted parameter sweep resumes to the uninterrupted file", "[app][parameters]") {
  const test::ScratchDirectory dir("parameters_resume");
  const fs::path config = dir / "sweep.yaml";
  std::ofstream(config) << test::parameter_case;
  // 9 of 24 points: the first parameter point's 6 and half of the second's batches.
  test::check_stop_and_resume(dir.path(), config, "--backend cpu-fftw", 24, 9,
                              [](const io::PointResult& resumed, const io::PointResult& whole) {
                                CHECK(without_times(resumed) == without_times(whole));
                              });
}

TEST_CASE("a parameter point with an invalid geometry: its values named, status 1, no file written", "[app][parameters]") {
  const test::ScratchDirectory dir("parameters_invalid");
  const fs::path config = dir / "sweep.yaml", out = dir / "sweep.h5";
  // At width 650 the lines are wider than the 600 nm period; the first point (200) is valid.
  std::ofstream(config) << replace_all(test::parameter_case, "width: [200, 250]", "width: [200, 650]");
  const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw");
  INFO(r.output);
  CHECK(r.status == 1);
  // parameter_case's shapes are on its 9th line, bottom_width's value at column 64.
  CHECK(contains(r.output, "sweep.yaml:9:64: error: at the parameter point width = 650, height = 150, top = "));
  CHECK(contains(r.output, "layers[0].shapes[0].bottom_width: the shape is 650 nm wide along x, more than the period 600 nm"));
  CHECK(!contains(r.output, "solv"));  // nothing solved
  CHECK(!fs::exists(out));
  CHECK(!fs::exists(io::partial_path(out.string())));
}
