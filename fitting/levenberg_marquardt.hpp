#pragma once
// Bounded Levenberg–Marquardt on weighted residuals r_i = wrap(model_i(p) − y_i) / σ_i, minimising
// χ²(p) = Σ r_i² over a box lower ≤ p ≤ upper (docs/fitting.md §2 states the algorithm).
//
// Why an own implementation (≈350 lines on Eigen dense algebra) and not a library:
//  - Eigen 3.4's unsupported LevenbergMarquardt has no bounds, and its NumericalDiff evaluates the
//    functor once per parameter: the perturbed points could not reach the solver as one batch.
//  - Ceres Solver has bounds (projection in its trust region), but its numeric differentiation is per
//    residual block and point as well; batching would need our own CostFunction computing the whole
//    Jacobian anyway, i.e. the same code plus a new dependency (libceres-dev, glog, gflags) for a
//    handful of parameters where the linear algebra costs nothing next to one grating solve.
//  Own code lets each iteration send its trial steps for several damping values as ONE batch, and the
//  Jacobian's perturbed points as ONE batch (see fit()).
//
// Bounds: projection with an active set. A parameter at a bound whose χ² gradient points out of the box
// is held there (its step is 0); the others take the damped Gauss–Newton step, and the trial point is
// projected onto the box. Consequence for the covariance: a parameter held at an active bound is fixed
// by the bound, not by the data; its standard error, covariance row/column and correlations are NaN,
// and the free parameters' covariance is conditional on it (computed with it held fixed).
//
// Errors: covariance C = (JᵀJ)⁻¹ of the weighted residuals at the optimum (J = ∂r/∂p by finite
// differences), standard errors √C_jj. With ErrorScaling::none (the default) the σ_i are taken as the
// measurement's true standard deviations, so C needs no scaling; with ErrorScaling::reduced_chi2, C is
// multiplied by χ²/ν (ν = m − free parameters), the convention when σ_i are only relative weights or a
// stated default.
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "fitting/model.hpp"

namespace gratingsim::fitting {

inline constexpr double unbounded = std::numeric_limits<double>::infinity();

/// One floating parameter: its name, start value, bounds and finite-difference step.
struct Parameter {
  std::string name;
  double start = 0;
  double lower = -unbounded, upper = unbounded;
  /// Finite-difference step h = max(relative_step · |p|, step_floor), in the parameter's own unit.
  /// The relative step must lie well above the model's own noise (a solver tolerance of ε makes the
  /// central difference's error ≈ ε/h + h²; for ε ≈ 1e-8, h ≈ 1e-3 relative).
  double relative_step = 1e-4;
  double step_floor = 1e-6;
};

enum class Difference {
  forward,  ///< (f(p + h e_j) − f(p))/h: n perturbed points per Jacobian, error O(h)
  central,  ///< (f(p + h e_j) − f(p − h e_j))/(2h): 2n points, error O(h²); one-sided at a bound
};
enum class ErrorScaling {
  none,          ///< C = (JᵀJ)⁻¹: the σ_i are the measurement's standard deviations
  reduced_chi2,  ///< C = (JᵀJ)⁻¹ · χ²/ν: the σ_i are relative weights (a stated default)
};

struct Options {
  Difference difference = Difference::central;
  ErrorScaling error_scaling = ErrorScaling::none;
  int max_iterations = 100;  ///< trial batches (accepted or not)
  /// Converged when an accepted step lowers χ² by at most chi2_tolerance · χ² ...
  double chi2_tolerance = 1e-10;
  /// ... or changes every parameter by at most step_tolerance · (|p_j| + step_floor_j).
  double step_tolerance = 1e-10;
  double initial_lambda = 1e-3;  ///< damping λ of the first step (relative to diag(JᵀJ), Marquardt's scaling)
  /// Trial steps per iteration, at λ, 10λ, 100λ, ...: evaluated as one batch, the best one taken.
  int trials_per_iteration = 3;
  double max_lambda = 1e16;  ///< beyond it no step lowers χ²: stop, not converged
};

/// The measurement: m values y_i, standard deviations σ_i > 0, and per value an optional period
/// (0: none; 360 for an angle in degrees such as Δ): a residual is wrapped into (−period/2, period/2].
struct Measurement {
  Eigen::VectorXd values, sigmas;
  Eigen::VectorXd periods;  ///< empty: no value is periodic
};

/// One accepted step (history[0] is the start; its lambda is NaN).
struct Iteration {
  Eigen::VectorXd parameters;
  double chi2 = 0;
  double lambda = 0;  ///< the damping of the step taken
};

struct FitResult {
  std::vector<std::string> names;
  Eigen::VectorXd parameters;       ///< best fit (the lowest χ² found, also when not converged)
  Eigen::VectorXd standard_errors;  ///< √C_jj; NaN at an active bound or where C is undetermined
  Eigen::MatrixXd covariance;       ///< C (see ErrorScaling); NaN rows/columns for parameters at an active bound
  Eigen::MatrixXd correlation;      ///< C_ij / √(C_ii C_jj)
  std::vector<bool> at_bound;       ///< held at an active bound at the optimum
  double chi2 = 0;
  double reduced_chi2 = 0;              ///< χ²/ν; NaN when ν = 0
  std::size_t degrees_of_freedom = 0;   ///< ν = m − free parameters
  ErrorScaling error_scaling = ErrorScaling::none;
  Eigen::VectorXd model;      ///< the model at the best fit (m)
  Eigen::VectorXd residuals;  ///< weighted residuals r_i at the best fit
  std::vector<Iteration> history;
  int iterations = 0;              ///< trial batches
  std::size_t model_calls = 0;     ///< calls of BatchModel::evaluate
  std::size_t model_points = 0;    ///< parameter vectors evaluated in all
  bool converged = false;
  std::string reason;  ///< why the fit stopped (converged or not), in words
};

/// Fits `model` to `measurement` over `parameters` (start values are projected into their bounds).
/// Calls: the first holds the start point and its Jacobian's perturbed points; each iteration then
/// sends its trial steps as one call and, when one is accepted, the perturbed points of the Jacobian at
/// the new point as one call. Throws InvalidArgument for inconsistent input or a model that cannot be
/// evaluated at the start; every other failure is returned as converged = false with its reason.
FitResult fit(BatchModel& model, const std::vector<Parameter>& parameters, const Measurement& measurement,
              const Options& options = {});

}  // namespace gratingsim::fitting
