// A result file is readable with h5py alone: validation/io/check_h5py.py reads it without our code and
// compares against the values written. Skipped (exit 77) where no Python 3 with h5py is installed
// (Debian: python3-h5py).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>

#include "io/results.hpp"
#include "validation/io/result_fixtures.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;

namespace {

/// The first of $GRATINGSIM_PYTHON, python3, /usr/bin/python3 that imports h5py, or "".
std::string python_with_h5py() {
  std::vector<std::string> candidates;
  if (const char* chosen = std::getenv("GRATINGSIM_PYTHON")) candidates.emplace_back(chosen);
  candidates.insert(candidates.end(), {"python3", "/usr/bin/python3"});
  for (const auto& python : candidates)
    if (std::system((python + " -c 'import h5py' >/dev/null 2>&1").c_str()) == 0) return python;
  return "";
}

template <class T>
void write_values(std::ofstream& out, const std::string& path, const std::vector<T>& values) {
  out << "dataset " << path << ' ' << std::setprecision(17);
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  out << '\n';
}

}  // namespace

TEST_CASE("h5py reads a result file without gratingsim code", "[io][results][python]") {
  const std::string python = python_with_h5py();
  if (python.empty()) {
    std::printf("SKIPPED: no Python 3 with h5py (install python3-h5py)\n");
    std::exit(77);  // CTest reports SKIP_RETURN_CODE 77 as skipped, never as passed
  }
  const fs::path dir = fs::temp_directory_path() / ("gratingsim_io_h5py_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const io::ResultLayout l = test::full_layout();
  std::vector<io::PointResult> points;
  {
    auto writer = io::ResultWriter::create((dir / "out.h5").string(), l, test::run_info());
    for (std::size_t i = 0; i < l.points(); ++i) {
      points.push_back(test::random_point(l));
      writer.write(i, points.back());
    }
    writer.finish();
  }
  {
    std::ofstream expected(dir / "expected.txt");
    std::vector<double> r, jones, mueller, harmonics, error;
    for (const auto& p : points) {
      r.insert(r.end(), p.reflectance.begin(), p.reflectance.end());
      harmonics.insert(harmonics.end(), p.used_harmonics.begin(), p.used_harmonics.end());
      error.push_back(p.estimated_error);
      for (const auto z : p.jones_r) jones.insert(jones.end(), {z.real(), z.imag()});
      mueller.insert(mueller.end(), p.mueller.begin(), p.mueller.end());
    }
    write_values(expected, "results/R", r);
    write_values(expected, "results/jones_r", jones);
    write_values(expected, "results/mueller", mueller);
    write_values(expected, "accuracy/harmonics", harmonics);
    write_values(expected, "accuracy/estimated_error", error);
    write_values(expected, "sweep/wavelength", l.wavelength_nm);
    expected << "attribute backend cpu-fftw\nattribute time_dependence exp(-i*omega*t)\nattribute length_unit nm\n";
    std::string text = test::run_info().case_yaml;
    for (std::size_t at = 0; (at = text.find('\n', at)) != std::string::npos;) text.replace(at, 1, "\\n");
    expected << "text input/case " << text << '\n';
  }
  const fs::path script = fs::path(__FILE__).parent_path() / "check_h5py.py";
  const std::string command =
      python + " " + script.string() + " " + (dir / "out.h5").string() + " " + (dir / "expected.txt").string();
  CHECK(std::system(command.c_str()) == 0);
  fs::remove_all(dir);
}
