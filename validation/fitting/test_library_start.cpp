// fitting/library_start.hpp: the nearest library point in χ² (against a brute-force search) and its
// refinement by local linear interpolation (exact for a linear model), then a fit from that start.
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "fitting/library_start.hpp"
#include "validation/fitting/thin_film.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::fitting;

namespace {

/// A full grid: every combination of the axes' values, the first axis fastest.
Eigen::MatrixXd grid(const std::vector<std::vector<double>>& axes) {
  Eigen::Index count = 1;
  for (const auto& axis : axes) count *= Eigen::Index(axis.size());
  Eigen::MatrixXd points(Eigen::Index(axes.size()), count);
  for (Eigen::Index k = 0; k < count; ++k) {
    Eigen::Index rest = k;
    for (std::size_t j = 0; j < axes.size(); ++j) {
      points(Eigen::Index(j), k) = axes[j][std::size_t(rest % Eigen::Index(axes[j].size()))];
      rest /= Eigen::Index(axes[j].size());
    }
  }
  return points;
}

std::vector<double> linspace(double a, double b, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(a + (b - a) * i / (n - 1));
  return v;
}

std::vector<Parameter> unbounded_parameters(int n) { return std::vector<Parameter>(std::size_t(n)); }

}  // namespace

TEST_CASE("library start: the nearest point in chi2, then linear interpolation exact for a linear model") {
  // f(p) = Q S⁻¹ p with orthonormal columns Q and the grid spacings S: χ² is the squared distance in
  // grid steps, so the truth lies within half a step of the nearest point, inside its neighbours' box.
  std::uniform_real_distribution<double> u(0, 1);
  const Eigen::Index m = 12;
  Eigen::MatrixXd random(m, 3);
  for (auto& x : random.reshaped()) x = u(test::rng()) - 0.5;
  const Eigen::MatrixXd Q = random.householderQr().householderQ() * Eigen::MatrixXd::Identity(m, 3);
  const std::vector<std::vector<double>> axes{linspace(0, 1, 5), linspace(-2, 2, 9), linspace(10, 13, 4)};
  const Eigen::Vector3d spacing(0.25, 0.5, 1.0);
  const Eigen::MatrixXd A = Q * spacing.cwiseInverse().asDiagonal();
  Library library{.points = grid(axes), .outputs = {}};
  library.outputs = A * library.points;
  const Eigen::Vector3d truth(0.1 + 0.8 * u(test::rng()), -1.8 + 3.6 * u(test::rng()), 10.2 + 2.6 * u(test::rng()));
  const Measurement measurement{.values = A * truth, .sigmas = Eigen::VectorXd::Ones(m), .periods = {}};

  const LibraryStart start = library_start(library, unbounded_parameters(3), measurement);
  // Brute force: the library point of least χ².
  Eigen::Index best = 0;
  (library.outputs.colwise() - measurement.values).colwise().squaredNorm().minCoeff(&best);
  CHECK(start.nearest == std::size_t(best));
  CHECK(start.nearest_chi2 == Approx((library.outputs.col(best) - measurement.values).squaredNorm()));
  REQUIRE(start.interpolated);
  CHECK((start.start - truth).cwiseAbs().maxCoeff() < 1e-9);

  // The best point computed nothing (non-finite): never chosen, the next best is.
  Library holed = library;
  holed.outputs.col(best).setConstant(std::numeric_limits<double>::quiet_NaN());
  const LibraryStart second = library_start(holed, unbounded_parameters(3), measurement);
  CHECK(second.nearest != std::size_t(best));
  Eigen::VectorXd chi2 = (library.outputs.colwise() - measurement.values).colwise().squaredNorm().transpose();
  chi2[best] = std::numeric_limits<double>::infinity();
  CHECK(second.nearest_chi2 == Approx(chi2.minCoeff()));

  // Bounds tighter than the truth: the start is kept inside them.
  std::vector<Parameter> bounded = unbounded_parameters(3);
  bounded[1].upper = truth[1] - 0.1;
  CHECK(library_start(library, bounded, measurement).start[1] <= truth[1] - 0.1);

  // An axis with one value is not interpolated; a measurement of the wrong length is refused.
  Library flat{.points = grid({axes[0], {7.0}, axes[2]}), .outputs = {}};
  flat.outputs = A * flat.points;
  const LibraryStart partial = library_start(flat, unbounded_parameters(3), measurement);
  CHECK(partial.start[1] == 7.0);
  const Measurement short_measurement{.values = measurement.values.head(m - 1), .sigmas = measurement.sigmas.head(m - 1), .periods = {}};
  CHECK_THROWS_AS(library_start(library, unbounded_parameters(3), short_measurement), InvalidArgument);
}

TEST_CASE("library start on thin-film spectra: the fit from it reaches the fit from the truth") {
  // Ψ/Δ of one film (thickness, index) on a substrate, 31 wavelengths at 70°; a 6 × 5 library.
  const std::vector<double> wavelengths = linspace(400, 700, 31);
  const auto spectrum = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd out(62);
    for (std::size_t i = 0; i < wavelengths.size(); ++i) {
      const auto [psi, delta] = test::thin_film_psi_delta({{p[1], p[0]}}, {3.88, 0.02}, wavelengths[i], 70);
      out[Eigen::Index(2 * i)] = psi;
      out[Eigen::Index(2 * i + 1)] = delta;
    }
    return out;
  };
  struct Model : BatchModel {
    std::function<Eigen::VectorXd(const Eigen::VectorXd&)> f;
    [[nodiscard]] std::size_t outputs() const override { return 62; }
    Eigen::MatrixXd evaluate(const std::vector<Eigen::VectorXd>& points) override {
      Eigen::MatrixXd out(62, Eigen::Index(points.size()));
      for (std::size_t k = 0; k < points.size(); ++k) out.col(Eigen::Index(k)) = f(points[k]);
      return out;
    }
  } model;
  model.f = spectrum;
  Library library{.points = grid({linspace(80, 130, 6), linspace(1.40, 1.56, 5)}), .outputs = Eigen::MatrixXd(62, 30)};
  for (Eigen::Index k = 0; k < 30; ++k) library.outputs.col(k) = spectrum(library.points.col(k));
  std::uniform_real_distribution<double> u(0, 1);
  const Eigen::Vector2d truth(85 + 40 * u(test::rng()), 1.42 + 0.12 * u(test::rng()));
  Measurement measurement{.values = spectrum(truth), .sigmas = Eigen::VectorXd::Constant(62, 0.05),
                          .periods = Eigen::VectorXd::Zero(62)};
  std::normal_distribution<double> noise(0, 1);
  for (Eigen::Index i = 0; i < 62; ++i) measurement.values[i] += 0.05 * noise(test::rng());
  for (Eigen::Index i = 1; i < 62; i += 2) measurement.periods[i] = 360;

  std::vector<Parameter> parameters{{.name = "d", .lower = 80, .upper = 130}, {.name = "n", .lower = 1.40, .upper = 1.56}};
  const LibraryStart start = library_start(library, parameters, measurement);
  INFO("truth " << truth.transpose() << ", nearest " << library.points.col(Eigen::Index(start.nearest)).transpose()
                << ", start " << start.start.transpose());
  CHECK(start.interpolated);
  for (int j = 0; j < 2; ++j) parameters[std::size_t(j)].start = start.start[j];
  const FitResult from_library = fit(model, parameters, measurement);
  for (int j = 0; j < 2; ++j) parameters[std::size_t(j)].start = truth[j];
  const FitResult from_truth = fit(model, parameters, measurement);
  REQUIRE(from_library.converged);
  REQUIRE(from_truth.converged);
  for (int j = 0; j < 2; ++j)
    CHECK(std::abs(from_library.parameters[j] - from_truth.parameters[j]) < 0.01 * from_truth.standard_errors[j]);
}
