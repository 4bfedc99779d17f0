// io/fit_settings.hpp: the case's `fit` section read with random values, and its errors located at
// line:column like every case error.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "io/fit_settings.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;

namespace {

double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(test::rng()); }

std::string text(double x) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.17g", x);
  return buffer;
}

io::CaseError refusal(const std::string& yaml) {
  try {
    io::read_fit_settings(yaml, "case.yaml");
  } catch (const io::CaseError& e) {
    return e;
  }
  FAIL("accepted:\n" << yaml);
  throw;  // unreachable
}

}  // namespace

TEST_CASE("the fit section: parameters with bounds and steps, options, default sigmas, library") {
  const double lower = uniform(10, 50), upper = lower + uniform(10, 50), start = uniform(lower, upper);
  const double step = uniform(1e-4, 1e-2), sigma = uniform(0.01, 0.1);
  const std::string yaml = "wavelength: 500\nparameters: {cd: 90, height: 100}\n"
                           "fit:\n"
                           "  parameters:\n"
                           "    cd: {start: " + text(start) + ", lower: " + text(lower) + ", upper: " + text(upper) +
                           ", relative_step: " + text(step) + "}\n"
                           "    height: {upper: 200}\n"
                           "  difference: forward\n"
                           "  errors: scaled\n"
                           "  max_iterations: 17\n"
                           "  sigma: {psi_deg: " + text(sigma) + ", delta_deg: 0.1}\n"
                           "  library: sweep.h5\n";
  const io::FitSettings s = io::read_fit_settings(yaml, "case.yaml");
  REQUIRE(s.present);
  REQUIRE(s.parameters.size() == 2);
  const fitting::Parameter& cd = s.parameters[0].parameter;
  CHECK(cd.name == "cd");
  CHECK(s.parameters[0].start_given);
  CHECK(cd.start == start);
  CHECK(cd.lower == lower);
  CHECK(cd.upper == upper);
  CHECK(cd.relative_step == step);
  CHECK(cd.step_floor == fitting::Parameter{}.step_floor);
  CHECK(s.parameters[0].at.line == 5);
  CHECK(s.parameters[0].at.column == 5);
  CHECK(s.parameters[1].parameter.name == "height");
  CHECK_FALSE(s.parameters[1].start_given);
  CHECK(s.parameters[1].parameter.lower == -fitting::unbounded);
  CHECK(s.parameters[1].parameter.upper == 200);
  CHECK(s.options.difference == fitting::Difference::forward);
  CHECK(s.options.error_scaling == fitting::ErrorScaling::reduced_chi2);
  CHECK(s.options.max_iterations == 17);
  CHECK(s.sigma.sigma_psi_deg == sigma);
  CHECK(s.sigma.sigma_delta_deg == 0.1);
  CHECK_FALSE(s.sigma.sigma_mueller);
  CHECK(s.library == "sweep.h5");
  CHECK(s.library_at.line == 11);
  // A case without the section.
  CHECK_FALSE(io::read_fit_settings("wavelength: 500\n", "case.yaml").present);
}

TEST_CASE("fit section errors are located at line and column") {
  struct Bad {
    std::string section;
    int line, column;
    std::string message;
  };
  const double lower = uniform(10, 50);
  const Bad cases[] = {
      {"fit:\n  parameters: {cd: {lower: " + text(lower) + ", upper: " + text(lower - 1) + "}}\n", 2, 0, "upper must be > lower"},
      {"fit:\n  parameters: {cd: {lower: 0, upper: 1, start: 2}}\n", 2, 0, "outside [lower, upper]"},
      {"fit:\n  parameters: {cd: {lower: 0, uper: 1}}\n", 2, 0, "did you mean 'upper'"},
      {"fit:\n  parameters: {cd: {relative_step: 0}}\n", 2, 0, "must be > 0"},
      {"fit:\n  parameters: {cd: {}}\n  difference: centre\n", 3, 15, "did you mean 'central'"},
      {"fit:\n  parameters: {cd: {}}\n  max_iterations: 0\n", 3, 19, "[1, 100000]"},
      {"fit:\n  parameters: {}\n", 2, 15, "at least one parameter"},
      {"fit:\n  parameters: {cd: {}}\n  sigma: {psi: 0.1}\n", 3, 11, "unknown key 'psi'"},
      {"fit:\n  difference: central\n", 2, 3, "missing required key 'parameters'"},
  };
  for (const Bad& bad : cases) {
    const io::CaseError e = refusal("wavelength: 500\n" + bad.section);
    INFO(e.what());
    CHECK(e.file() == "case.yaml");
    CHECK(e.line() == bad.line + 1);
    if (bad.column > 0) CHECK(e.column() == bad.column);
    CHECK(e.message().find(bad.message) != std::string::npos);
  }
}

TEST_CASE("the case reader accepts a fit section and checks its parameters against the case's", "[io][fit]") {
  const std::string grating =
      "parameters: {cd: 90, height: " + text(uniform(100, 140)) + ", half: \"${cd}/2\"}\n"
      "wavelength: 500\nlattice: {period_x: 400}\nsubstrate: Si\n"
      "layers:\n  - {thickness: \"${height}\", shapes: [{type: line, material: SiO2, width: \"${cd}\"}]}\n"
      "numerics: {harmonics: 2}\n";  // 7 lines
  const io::Case ok = io::parse_case(grating + "fit:\n  parameters: {height: {lower: 50}, cd: {}}\n", "case.yaml");
  CHECK(ok.parameters.size() == 2);
  const auto refused = [&](const std::string& name, int column, const std::string& message) {
    try {
      (void)io::parse_case(grating + "fit:\n  parameters: {cd: {}, " + name + ": {}}\n", "case.yaml");
      FAIL("accepted " << name);
    } catch (const io::CaseError& e) {
      INFO(e.what());
      CHECK(e.line() == 9);
      CHECK(e.column() == column);
      CHECK(e.message().find(message) != std::string::npos);
    }
  };
  refused("heigth", 24, "'heigth' is not a parameter of the case (the case's parameters: cd, height)");
  refused("half", 24, "'half' is computed from other parameters and cannot float");
}
