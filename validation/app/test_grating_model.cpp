// The fit's grating model (app/grating_model.hpp): one evaluate() solves every parameter vector's
// structure in one physics::solve(pairs) call, whose batched problems hold several structures
// (docs/solver.md §1.2). With batching forced on the host (max_wavelengths_per_batch large: the
// Jacobian's structures and wavelengths in one problem) the model's values equal those of each vector
// evaluated alone with one member per problem, bit for bit, and so does the whole fit of
// configs/si_lines_fit.yaml (its parameters, errors, χ² and iterations). An invalid vector is NaN in its
// own column only.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "app/grating_model.hpp"
#include "fitting/levenberg_marquardt.hpp"
#include "io/fit_settings.hpp"
#include "io/measured.hpp"
#include "io/problem.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;
namespace fs = std::filesystem;

namespace {

const fs::path configs = fs::path(__FILE__).parent_path().parent_path().parent_path() / "configs";

/// Equal bit for bit (NaN where the other is NaN).
bool same_bits(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * std::size_t(a.size())) == 0;
}

/// The case's axes of its fit parameters, in the fit section's order.
std::vector<std::size_t> floating_axes(const io::Case& c, const io::FitSettings& settings) {
  std::vector<std::size_t> floating;
  for (const io::FitParameterSetting& setting : settings.parameters)
    for (std::size_t a = 0; a < c.parameters.size(); ++a)
      if (c.parameters[a].name == setting.parameter.name) floating.push_back(a);
  return floating;
}

}  // namespace

TEST_CASE("grating model: a Jacobian's structures batched equal each one solved alone, bit for bit, and so does the fit",
          "[app][fit][batch]") {
  io::Problem alone = io::load_problem((configs / "si_lines_fit.yaml").string());
  const io::FitSettings settings = io::read_fit_settings(alone.source.yaml, alone.source.path);
  const io::MeasuredData measured =
      io::read_measured((configs / "si_lines_fit_measured.csv").string(), settings.sigma);
  const std::vector<std::size_t> floating = floating_axes(alone.source, settings);
  REQUIRE(floating.size() == 2);  // cd, height
  alone.solver.max_wavelengths_per_batch = 1;
  io::Problem batched = alone;
  batched.solver.max_wavelengths_per_batch = 1000;  // every member in one problem
  app::GratingModel one_by_one(alone, floating, measured), together(batched, floating, measured);

  // The start point, central differences in cd (widths) and height (the z-grid moves, 3 slices stay),
  // and a vector whose grating is invalid (a negative width).
  const double cd = 84, height = 128, h = 1e-3;
  std::vector<Eigen::VectorXd> points;
  for (const auto& [x, y] : std::vector<std::array<double, 2>>{
           {cd, height}, {cd + h, height}, {cd - h, height}, {cd, height + h}, {cd, height - h}, {-5, height}})
    points.push_back(Eigen::Vector2d(x, y));
  const Eigen::MatrixXd values = together.evaluate(points);
  CHECK(together.batches() == 1);
  REQUIRE(values.cols() == Eigen::Index(points.size()));
  for (std::size_t k = 0; k < points.size(); ++k) {
    INFO("point " << k);
    const Eigen::MatrixXd column = one_by_one.evaluate({points[k]});
    CHECK(same_bits(values.col(Eigen::Index(k)), column));
    CHECK(column.allFinite() == (k + 1 < points.size()));
  }
  // A perturbation changes the values (the batch does not hand one structure's result to another).
  CHECK((values.col(0) - values.col(1)).cwiseAbs().maxCoeff() > 0);
  CHECK((values.col(0) - values.col(3)).cwiseAbs().maxCoeff() > 0);

  // The whole fit: the same path, bit for bit.
  std::vector<fitting::Parameter> parameters;
  for (const io::FitParameterSetting& setting : settings.parameters) parameters.push_back(setting.parameter);
  const fitting::Measurement measurement = io::to_measurement(measured);
  app::GratingModel model_alone(alone, floating, measured), model_batched(batched, floating, measured);
  const fitting::FitResult a = fitting::fit(model_alone, parameters, measurement, settings.options);
  const fitting::FitResult b = fitting::fit(model_batched, parameters, measurement, settings.options);
  CHECK(a.converged);
  CHECK(b.converged);
  CHECK(same_bits(a.parameters, b.parameters));
  CHECK(same_bits(a.standard_errors, b.standard_errors));
  CHECK(std::memcmp(&a.chi2, &b.chi2, sizeof(double)) == 0);
  CHECK(a.iterations == b.iterations);
  CHECK(a.model_points == b.model_points);
  CHECK(model_batched.batches() == a.model_calls);  // one solve per model call
}
