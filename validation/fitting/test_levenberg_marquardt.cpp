// fitting/levenberg_marquardt.hpp on problems with known minima: weighted linear least squares against
// Eigen's QR solution and covariance, Rosenbrock's residuals, a box whose optimum sits on a bound, a
// periodic residual; the batching of the model calls; non-convergence and bad input reported.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "fitting/levenberg_marquardt.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::fitting;

namespace {

/// f(p) = A p + b, recording every call's points.
struct LinearModel : BatchModel {
  Eigen::MatrixXd A;
  Eigen::VectorXd b;
  std::vector<std::vector<Eigen::VectorXd>> calls;
  [[nodiscard]] std::size_t outputs() const override { return std::size_t(A.rows()); }
  Eigen::MatrixXd evaluate(const std::vector<Eigen::VectorXd>& points) override {
    calls.push_back(points);
    Eigen::MatrixXd out(A.rows(), Eigen::Index(points.size()));
    for (std::size_t k = 0; k < points.size(); ++k) out.col(Eigen::Index(k)) = A * points[k] + b;
    return out;
  }
};

/// Rosenbrock's function as residuals: r = (10 (p1 − p0²), 1 − p0), minimum 0 at (1, 1).
struct Rosenbrock : BatchModel {
  [[nodiscard]] std::size_t outputs() const override { return 2; }
  Eigen::MatrixXd evaluate(const std::vector<Eigen::VectorXd>& points) override {
    Eigen::MatrixXd out(2, Eigen::Index(points.size()));
    for (std::size_t k = 0; k < points.size(); ++k)
      out.col(Eigen::Index(k)) << 10 * (points[k][1] - points[k][0] * points[k][0]), 1 - points[k][0];
    return out;
  }
};

Eigen::MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols) {
  std::uniform_real_distribution<double> u(-1, 1);
  Eigen::MatrixXd M(rows, cols);
  for (auto& x : M.reshaped()) x = u(test::rng());
  return M;
}

struct LinearProblem {
  LinearModel model;
  Measurement measurement;
  std::vector<Parameter> parameters;
  Eigen::MatrixXd WA;  // A with row i divided by σ_i
  Eigen::VectorXd Wy;  // (y − b)/σ
};

LinearProblem linear_problem(Eigen::Index m, Eigen::Index n) {
  LinearProblem lp;
  lp.model.A = random_matrix(m, n);
  lp.model.b = random_matrix(m, 1);
  std::uniform_real_distribution<double> sigma(0.5, 2.0);
  lp.measurement.values = lp.model.A * random_matrix(n, 1) * 3 + lp.model.b + random_matrix(m, 1) * 0.1;
  lp.measurement.sigmas.resize(m);
  for (auto& s : lp.measurement.sigmas) s = sigma(test::rng());
  for (Eigen::Index j = 0; j < n; ++j) lp.parameters.push_back({.name = std::string("p").append(std::to_string(j)), .start = 0.1 * double(j)});
  lp.WA = lp.measurement.sigmas.cwiseInverse().asDiagonal() * lp.model.A;
  lp.Wy = (lp.measurement.values - lp.model.b).cwiseQuotient(lp.measurement.sigmas);
  return lp;
}

double max_relative(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  return (a - b).cwiseAbs().maxCoeff() / b.cwiseAbs().maxCoeff();
}

}  // namespace

TEST_CASE("weighted linear least squares: parameters, covariance and chi2 equal Eigen's QR solution") {
  for (const Difference difference : {Difference::central, Difference::forward}) {
    LinearProblem lp = linear_problem(40, 4);
    const FitResult fit_result = fit(lp.model, lp.parameters, lp.measurement, {.difference = difference});
    INFO(fit_result.reason);
    REQUIRE(fit_result.converged);
    const Eigen::VectorXd reference = lp.WA.colPivHouseholderQr().solve(lp.Wy);
    const Eigen::MatrixXd covariance = (lp.WA.transpose() * lp.WA).inverse();
    CHECK(max_relative(fit_result.parameters, reference) < 1e-7);
    CHECK(max_relative(fit_result.covariance, covariance) < 1e-6);
    CHECK(std::abs(fit_result.chi2 - (lp.WA * reference - lp.Wy).squaredNorm()) < 1e-9 * fit_result.chi2);
    CHECK(fit_result.degrees_of_freedom == 36);
    CHECK(fit_result.reduced_chi2 == Approx(fit_result.chi2 / 36).epsilon(1e-12));
    for (Eigen::Index j = 0; j < 4; ++j) {
      CHECK(fit_result.standard_errors[j] == Approx(std::sqrt(covariance(j, j))).epsilon(1e-6));
      CHECK(fit_result.correlation(j, j) == Approx(1.0).epsilon(1e-12));
    }
    CHECK(fit_result.history.front().parameters.isApprox(Eigen::Vector4d(0, 0.1, 0.2, 0.3)));
    CHECK(fit_result.history.back().chi2 == fit_result.chi2);

    // ErrorScaling::reduced_chi2 multiplies the covariance by χ²/ν.
    const FitResult scaled =
        fit(lp.model, lp.parameters, lp.measurement, {.difference = difference, .error_scaling = ErrorScaling::reduced_chi2});
    CHECK(max_relative(scaled.covariance, covariance * fit_result.reduced_chi2) < 1e-6);
  }
}

TEST_CASE("each iteration sends its trial steps as one call and its Jacobian's perturbed points as one call") {
  for (const Difference difference : {Difference::central, Difference::forward}) {
    LinearProblem lp = linear_problem(25, 3);
    const Options options{.difference = difference, .trials_per_iteration = 2};
    const FitResult result = fit(lp.model, lp.parameters, lp.measurement, options);
    REQUIRE(result.converged);
    const std::size_t perturbed = difference == Difference::central ? 6 : 3;
    const auto& calls = lp.model.calls;
    REQUIRE(calls.size() == result.model_calls);
    // First call: the start and its perturbed points (start ± h e_j, h = max(1e-4 |p|, 1e-6)).
    REQUIRE(calls[0].size() == 1 + perturbed);
    for (std::size_t k = 1; k < calls[0].size(); ++k) {
      const Eigen::VectorXd offset = calls[0][k] - calls[0][0];
      Eigen::Index j = 0;
      const double moved = offset.cwiseAbs().maxCoeff(&j);
      CHECK(moved == Approx(std::max(1e-4 * std::abs(calls[0][0][j]), 1e-6)).epsilon(1e-9));
      CHECK(offset.cwiseAbs().sum() == Approx(offset.cwiseAbs().maxCoeff()).epsilon(1e-12));  // one parameter moved
    }
    // Then per iteration: the trials (2 points), and after an accepted step its Jacobian (perturbed).
    std::size_t trial_calls = 0, jacobian_calls = 1, points = calls[0].size();
    for (std::size_t c = 1; c < calls.size(); ++c) {
      points += calls[c].size();
      if (calls[c].size() == 2) ++trial_calls;
      else if (calls[c].size() == perturbed) ++jacobian_calls;
      else FAIL("a call of " << calls[c].size() << " points");
    }
    CHECK(trial_calls == std::size_t(result.iterations));
    CHECK(jacobian_calls == result.history.size());  // the start and every accepted step
    CHECK(points == result.model_points);
  }
}

TEST_CASE("Rosenbrock's residuals: the minimum (1, 1) from the classic start (-1.2, 1)") {
  std::uniform_real_distribution<double> jitter(-0.1, 0.1);
  Rosenbrock model;
  const std::vector<Parameter> parameters{{.name = "x", .start = -1.2 + jitter(test::rng())},
                                          {.name = "y", .start = 1 + jitter(test::rng())}};
  const Measurement zero{.values = Eigen::Vector2d::Zero(), .sigmas = Eigen::Vector2d::Ones(), .periods = {}};
  const FitResult result = fit(model, parameters, zero);
  INFO(result.reason);
  REQUIRE(result.converged);
  CHECK(std::abs(result.parameters[0] - 1) < 1e-6);
  CHECK(std::abs(result.parameters[1] - 1) < 1e-6);
  CHECK(result.chi2 < 1e-12);
  CHECK(result.history.size() > 5);  // the banana valley takes many steps: the loop really iterated
  CHECK(std::isnan(result.reduced_chi2));  // ν = 2 − 2 = 0

  // Stopped early: not converged, and said so.
  const FitResult early = fit(model, parameters, zero, {.max_iterations = 2});
  CHECK_FALSE(early.converged);
  CHECK(early.reason.find("max_iterations (2)") != std::string::npos);
  CHECK(early.chi2 <= early.history.front().chi2);
}

TEST_CASE("an optimum outside the box: the parameter is held at its bound, the others fit with it fixed") {
  LinearProblem lp = linear_problem(30, 3);
  const Eigen::VectorXd free_optimum = lp.WA.colPivHouseholderQr().solve(lp.Wy);
  // Convex χ², one bound violated by the unconstrained optimum: the constrained optimum lies on it.
  const bool upper = std::uniform_int_distribution<int>(0, 1)(test::rng()) == 1;
  const double bound = free_optimum[0] + (upper ? -0.5 : 0.5);
  lp.parameters[0].start = bound + (upper ? -1.0 : 1.0);
  (upper ? lp.parameters[0].upper : lp.parameters[0].lower) = bound;
  const FitResult result = fit(lp.model, lp.parameters, lp.measurement);
  INFO(result.reason);
  REQUIRE(result.converged);
  CHECK(result.parameters[0] == bound);
  CHECK(result.at_bound == std::vector<bool>{true, false, false});
  // Reference: p0 fixed at the bound, p1 and p2 by QR on the remaining columns.
  const Eigen::MatrixXd rest = lp.WA.rightCols(2);
  const Eigen::VectorXd conditional = rest.colPivHouseholderQr().solve(lp.Wy - lp.WA.col(0) * bound);
  CHECK(max_relative(result.parameters.tail(2), conditional) < 1e-7);
  // The covariance is the free parameters' with p0 held: (A_FᵀA_F)⁻¹; p0's row and column are NaN.
  CHECK(max_relative(result.covariance.bottomRightCorner(2, 2), (rest.transpose() * rest).inverse()) < 1e-6);
  CHECK(std::isnan(result.standard_errors[0]));
  CHECK(result.covariance.row(0).array().isNaN().all());
  CHECK(result.correlation.col(0).array().isNaN().all());
  CHECK(result.degrees_of_freedom == 28);
}

TEST_CASE("a periodic residual is wrapped: a phase near +180 fits a measurement near -180 without a 360 detour") {
  std::uniform_real_distribution<double> u(0.2, 0.8);
  const double measured = 180 - u(test::rng());  // e.g. 179.5 degrees
  LinearModel model;
  model.A = Eigen::MatrixXd::Ones(1, 1);
  model.b = Eigen::VectorXd::Zero(1);
  const std::vector<Parameter> parameters{{.name = "phase", .start = -180 + u(test::rng()), .step_floor = 1e-3}};
  const Measurement measurement{.values = Eigen::VectorXd::Constant(1, measured), .sigmas = Eigen::VectorXd::Ones(1),
                                .periods = Eigen::VectorXd::Constant(1, 360)};
  const FitResult result = fit(model, parameters, measurement);
  REQUIRE(result.converged);
  CHECK(result.parameters[0] == Approx(measured - 360).margin(1e-9));  // went down through −180, not up by 360
  CHECK(std::abs(result.residuals[0]) < 1e-9);
}

TEST_CASE("bad input is refused before the model is called") {
  LinearProblem lp = linear_problem(10, 2);
  Measurement bad_sigma = lp.measurement;
  bad_sigma.sigmas[std::uniform_int_distribution<Eigen::Index>(0, 9)(test::rng())] = 0;
  CHECK_THROWS_AS(fit(lp.model, lp.parameters, bad_sigma), InvalidArgument);
  Measurement short_measurement = lp.measurement;
  short_measurement.values.conservativeResize(9);
  CHECK_THROWS_AS(fit(lp.model, lp.parameters, short_measurement), InvalidArgument);
  std::vector<Parameter> crossed = lp.parameters;
  crossed[1].lower = 1, crossed[1].upper = 0;
  CHECK_THROWS_AS(fit(lp.model, crossed, lp.measurement), InvalidArgument);
  CHECK(lp.model.calls.empty());
}

namespace {

/// f(p) = A p + b, except that the model fails (NaN) wherever p0 > limit: a solver that breaks down there.
struct FailingModel : LinearModel {
  double limit = 0;
  Eigen::MatrixXd evaluate(const std::vector<Eigen::VectorXd>& points) override {
    Eigen::MatrixXd out = LinearModel::evaluate(points);
    for (std::size_t k = 0; k < points.size(); ++k)
      if (points[k][0] > limit) out.col(Eigen::Index(k)).setConstant(std::numeric_limits<double>::quiet_NaN());
    return out;
  }
};

}  // namespace

TEST_CASE("model failures: a failed trial step is rejected, a failed Jacobian stops the fit and says so") {
  LinearProblem lp = linear_problem(20, 2);
  const Eigen::VectorXd optimum = lp.WA.colPivHouseholderQr().solve(lp.Wy);
  FailingModel model;
  model.A = lp.model.A;
  model.b = lp.model.b;
  // Failures far beyond the optimum: the first long trial steps may fail, the fit still converges.
  model.limit = optimum[0] + 0.5;
  lp.parameters[0].start = optimum[0] - 20;
  const FitResult rejected = fit(model, lp.parameters, lp.measurement);
  INFO(rejected.reason);
  CHECK(rejected.converged);
  CHECK((rejected.parameters - optimum).cwiseAbs().maxCoeff() < 1e-6 * optimum.cwiseAbs().maxCoeff() + 1e-9);
  // Failures right at the optimum's perturbed points: not converged, reported, the best point kept.
  model.limit = optimum[0] + 1e-7;
  lp.parameters[0].start = optimum[0] - 1;
  const FitResult failed = fit(model, lp.parameters, lp.measurement, {.difference = Difference::central});
  CHECK_FALSE(failed.converged);
  CHECK(failed.reason.find("non-finite") != std::string::npos);
  CHECK(failed.chi2 < failed.history.front().chi2);
  CHECK(failed.covariance.array().isNaN().all());
}

TEST_CASE("parameters the data cannot separate: the covariance is undetermined and the reason says so") {
  // f depends on p0 + p1 only: JᵀJ is singular.
  LinearProblem lp = linear_problem(15, 2);
  lp.model.A.col(1) = lp.model.A.col(0);
  const FitResult result = fit(lp.model, lp.parameters, lp.measurement);
  CHECK(result.reason.find("rank-deficient") != std::string::npos);
  CHECK(result.standard_errors.array().isNaN().all());
  // The sum is still fitted: its value is the one-column least-squares solution.
  const Eigen::VectorXd sum = lp.WA.col(0).colPivHouseholderQr().solve(lp.Wy);
  CHECK(result.parameters.sum() == Approx(sum[0]).epsilon(1e-6));
}
