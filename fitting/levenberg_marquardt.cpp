// Bounded Levenberg–Marquardt with batched finite-difference Jacobians (docs/fitting.md §2).
#include "fitting/levenberg_marquardt.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.hpp"

namespace gratingsim::fitting {

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

std::string number(double x) {
  std::ostringstream s;
  s.precision(6);
  s << x;
  return s.str();
}

/// x wrapped into (−period/2, period/2]; x itself for period 0.
double wrap(double x, double period) { return period == 0 ? x : x - period * std::ceil(x / period - 0.5); }

/// The model and its bookkeeping: every evaluate() is counted and its shape checked.
class CountedModel {
 public:
  CountedModel(BatchModel& model, FitResult& result) : model_(model), result_(result) {}
  Eigen::MatrixXd operator()(const std::vector<Eigen::VectorXd>& points) {
    Eigen::MatrixXd values = model_.evaluate(points);
    ++result_.model_calls;
    result_.model_points += points.size();
    GS_EXPECTS(std::size_t(values.rows()) == model_.outputs() && std::size_t(values.cols()) == points.size(),
               "BatchModel::evaluate returned a " + std::to_string(values.rows()) + " x " +
                   std::to_string(values.cols()) + " matrix for " + std::to_string(points.size()) +
                   " points of " + std::to_string(model_.outputs()) + " outputs");
    return values;
  }

 private:
  BatchModel& model_;
  FitResult& result_;
};

/// The fit's fixed data: parameters, measurement, options.
struct Problem {
  const std::vector<Parameter>& parameters;
  const Measurement& measurement;
  const Options& options;

  [[nodiscard]] Eigen::Index n() const { return Eigen::Index(parameters.size()); }
  [[nodiscard]] double period(Eigen::Index i) const {
    return measurement.periods.size() == 0 ? 0.0 : measurement.periods[i];
  }
  /// r_i = wrap(f_i − y_i) / σ_i
  [[nodiscard]] Eigen::VectorXd residuals(const Eigen::VectorXd& model) const {
    Eigen::VectorXd r(model.size());
    for (Eigen::Index i = 0; i < r.size(); ++i)
      r[i] = wrap(model[i] - measurement.values[i], period(i)) / measurement.sigmas[i];
    return r;
  }
  [[nodiscard]] Eigen::VectorXd project(Eigen::VectorXd p) const {
    for (Eigen::Index j = 0; j < n(); ++j) p[j] = std::clamp(p[j], parameters[j].lower, parameters[j].upper);
    return p;
  }
  [[nodiscard]] double step(Eigen::Index j, double p) const {
    return std::max(parameters[j].relative_step * std::abs(p), parameters[j].step_floor);
  }
};

/// The perturbed points of a finite-difference Jacobian at p and how to combine them: column j is
/// wrap(f(plus_j) − f(minus_j)) / (σ · width_j), where plus/minus index the perturbed points or are −1
/// for the centre. Central differences become one-sided where p ± h leaves the box.
struct Stencil {
  std::vector<Eigen::VectorXd> points;
  std::vector<int> plus, minus;
  std::vector<double> width;
};

Stencil stencil(const Problem& problem, const Eigen::VectorXd& p) {
  Stencil s;
  const auto add = [&](Eigen::Index j, double offset) {
    Eigen::VectorXd q = p;
    q[j] += offset;
    s.points.push_back(q);
    return int(s.points.size()) - 1;
  };
  for (Eigen::Index j = 0; j < problem.n(); ++j) {
    const Parameter& parameter = problem.parameters[std::size_t(j)];
    double h = problem.step(j, p[j]);
    const bool up = p[j] + h <= parameter.upper, down = p[j] - h >= parameter.lower;
    if (problem.options.difference == Difference::central && up && down) {
      s.plus.push_back(add(j, h));
      s.minus.push_back(add(j, -h));
      s.width.push_back(2 * h);
    } else if (up) {
      s.plus.push_back(add(j, h));
      s.minus.push_back(-1);
      s.width.push_back(h);
    } else if (down) {
      s.plus.push_back(-1);
      s.minus.push_back(add(j, -h));
      s.width.push_back(h);
    } else {  // a box narrower than h on both sides: the wider side (0 for a fixed parameter: no column)
      h = std::max(parameter.upper - p[j], p[j] - parameter.lower);
      if (h == parameter.upper - p[j]) {
        s.plus.push_back(h > 0 ? add(j, h) : -1);
        s.minus.push_back(-1);
      } else {
        s.plus.push_back(-1);
        s.minus.push_back(add(j, -h));
      }
      s.width.push_back(h);
    }
  }
  return s;
}

/// J = ∂r/∂p from the stencil's model values (`values`: column k for stencil point k) and the centre's.
Eigen::MatrixXd jacobian(const Problem& problem, const Stencil& s, const Eigen::MatrixXd& values,
                         const Eigen::VectorXd& centre) {
  const Eigen::Index m = centre.size();
  Eigen::MatrixXd J = Eigen::MatrixXd::Zero(m, problem.n());
  for (Eigen::Index j = 0; j < problem.n(); ++j) {
    if (s.width[std::size_t(j)] == 0) continue;
    const auto column = [&](int k) -> Eigen::VectorXd { return k < 0 ? centre : Eigen::VectorXd(values.col(k)); };
    const Eigen::VectorXd plus = column(s.plus[std::size_t(j)]), minus = column(s.minus[std::size_t(j)]);
    for (Eigen::Index i = 0; i < m; ++i)
      J(i, j) = wrap(plus[i] - minus[i], problem.period(i)) / (problem.measurement.sigmas[i] * s.width[std::size_t(j)]);
  }
  return J;
}

/// Parameters held at a bound: at it, with the χ² gradient g = Jᵀr pointing out of the box (descent
/// would leave it), or fixed by lower = upper.
std::vector<bool> active_set(const Problem& problem, const Eigen::VectorXd& p, const Eigen::VectorXd& g) {
  std::vector<bool> active(std::size_t(problem.n()));
  for (Eigen::Index j = 0; j < problem.n(); ++j) {
    const Parameter& parameter = problem.parameters[std::size_t(j)];
    active[std::size_t(j)] = parameter.lower == parameter.upper || (p[j] <= parameter.lower && g[j] > 0) ||
                             (p[j] >= parameter.upper && g[j] < 0);
  }
  return active;
}

std::vector<Eigen::Index> free_indices(const std::vector<bool>& active) {
  std::vector<Eigen::Index> free;
  for (std::size_t j = 0; j < active.size(); ++j)
    if (!active[j]) free.push_back(Eigen::Index(j));
  return free;
}

Eigen::MatrixXd columns(const Eigen::MatrixXd& J, const std::vector<Eigen::Index>& free) {
  Eigen::MatrixXd out(J.rows(), Eigen::Index(free.size()));
  for (std::size_t k = 0; k < free.size(); ++k) out.col(Eigen::Index(k)) = J.col(free[k]);
  return out;
}

/// The damped Gauss–Newton step on the free parameters: min |J_F δ + r|² + λ δᵀ D δ with Marquardt's
/// D = diag(J_FᵀJ_F) (floored so that an insensitive parameter still gets a finite step), solved as
/// the stacked least-squares problem [J_F; √(λD)] δ = −[r; 0] by column-pivoted QR (no normal equations).
Eigen::VectorXd damped_step(const Eigen::MatrixXd& JF, const Eigen::VectorXd& r, double lambda) {
  const Eigen::Index m = JF.rows(), nf = JF.cols();
  Eigen::VectorXd D = JF.colwise().squaredNorm().transpose();
  const double floor = std::max(D.maxCoeff(), 1.0) * 1e-12;
  Eigen::MatrixXd A(m + nf, nf);
  A.topRows(m) = JF;
  A.bottomRows(nf) = (lambda * D.cwiseMax(floor)).cwiseSqrt().asDiagonal();
  Eigen::VectorXd b = Eigen::VectorXd::Zero(m + nf);
  b.head(m) = -r;
  return A.colPivHouseholderQr().solve(b);
}

bool finite(const Eigen::MatrixXd& x) { return x.allFinite(); }

void check_input(const BatchModel& model, const std::vector<Parameter>& parameters, const Measurement& measurement,
                 const Options& options) {
  GS_EXPECTS(!parameters.empty(), "a fit needs at least one parameter");
  for (const Parameter& parameter : parameters) {
    const std::string what = "parameter '" + parameter.name + "': ";
    GS_EXPECTS(std::isfinite(parameter.start), what + "the start value must be finite");
    GS_EXPECTS(!std::isnan(parameter.lower) && !std::isnan(parameter.upper) && parameter.lower <= parameter.upper,
               what + "needs lower <= upper");
    GS_EXPECTS(parameter.relative_step >= 0 && parameter.step_floor > 0 && std::isfinite(parameter.relative_step) &&
                   std::isfinite(parameter.step_floor),
               what + "needs relative_step >= 0 and step_floor > 0");
  }
  const auto m = Eigen::Index(model.outputs());
  GS_EXPECTS(measurement.values.size() == m && measurement.sigmas.size() == m,
             "the measurement has " + std::to_string(measurement.values.size()) + " values and " +
                 std::to_string(measurement.sigmas.size()) + " sigmas for a model of " + std::to_string(m) + " outputs");
  GS_EXPECTS(measurement.periods.size() == 0 || measurement.periods.size() == m,
             "the measurement's periods must be empty or one per value");
  GS_EXPECTS(measurement.values.allFinite(), "the measured values must be finite");
  GS_EXPECTS(measurement.sigmas.allFinite() && (measurement.sigmas.array() > 0).all(), "every sigma must be finite and > 0");
  GS_EXPECTS(measurement.periods.size() == 0 || (measurement.periods.array() >= 0).all(), "periods must be >= 0");
  GS_EXPECTS(options.max_iterations >= 0 && options.trials_per_iteration >= 1 && options.initial_lambda > 0 &&
                 options.max_lambda > options.initial_lambda,
             "fit options: need max_iterations >= 0, trials_per_iteration >= 1, 0 < initial_lambda < max_lambda");
}

/// Covariance, standard errors and correlations at the optimum (see the header for the conventions).
void errors(const Problem& problem, const Eigen::MatrixXd& J, FitResult& result) {
  const Eigen::Index n = problem.n(), m = result.residuals.size();
  result.at_bound = active_set(problem, result.parameters, J.transpose() * result.residuals);
  const std::vector<Eigen::Index> free = free_indices(result.at_bound);
  const auto nf = Eigen::Index(free.size());
  result.degrees_of_freedom = std::size_t(std::max<Eigen::Index>(m - nf, 0));
  result.reduced_chi2 = m > nf ? result.chi2 / double(m - nf) : nan;
  result.covariance = Eigen::MatrixXd::Constant(n, n, nan);
  if (nf > 0 && J.allFinite()) {
    // C_F = (J_FᵀJ_F)⁻¹ through the SVD of J_F with unit columns (S: the column norms), so that a
    // rank deficiency is judged independently of the parameters' units.
    const Eigen::MatrixXd JF = columns(J, free);
    const Eigen::VectorXd scale = JF.colwise().norm().transpose();
    if ((scale.array() > 0).all()) {
      const Eigen::JacobiSVD<Eigen::MatrixXd> svd(JF * scale.cwiseInverse().asDiagonal(), Eigen::ComputeThinV);
      const Eigen::VectorXd s = svd.singularValues();
      if (s[nf - 1] > 1e-10 * s[0]) {
        const Eigen::MatrixXd CF = scale.cwiseInverse().asDiagonal() * svd.matrixV() *
                                   s.cwiseAbs2().cwiseInverse().asDiagonal() * svd.matrixV().transpose() *
                                   scale.cwiseInverse().asDiagonal();
        const double factor = problem.options.error_scaling == ErrorScaling::reduced_chi2 ? result.reduced_chi2 : 1.0;
        for (Eigen::Index a = 0; a < nf; ++a)
          for (Eigen::Index b = 0; b < nf; ++b) result.covariance(free[a], free[b]) = factor * CF(a, b);
      } else {
        result.reason += "; covariance undetermined: the Jacobian of the free parameters is rank-deficient "
                         "(singular value ratio " + number(s[nf - 1] / s[0]) + ")";
      }
    } else {
      result.reason += "; covariance undetermined: a free parameter does not change the model";
    }
  }
  result.standard_errors = result.covariance.diagonal().cwiseSqrt();
  result.correlation = result.covariance;
  for (Eigen::Index a = 0; a < n; ++a)
    for (Eigen::Index b = 0; b < n; ++b)
      result.correlation(a, b) = result.covariance(a, b) / (result.standard_errors[a] * result.standard_errors[b]);
}

}  // namespace

FitResult fit(BatchModel& model, const std::vector<Parameter>& parameters, const Measurement& measurement,
              const Options& options) {
  check_input(model, parameters, measurement, options);
  const Problem problem{parameters, measurement, options};
  FitResult result;
  result.error_scaling = options.error_scaling;
  for (const Parameter& parameter : parameters) result.names.push_back(parameter.name);
  CountedModel evaluate(model, result);

  Eigen::VectorXd start(problem.n());
  for (Eigen::Index j = 0; j < problem.n(); ++j) start[j] = parameters[std::size_t(j)].start;
  Eigen::VectorXd p = problem.project(start);

  // First call: the start point and its Jacobian's perturbed points, one batch.
  Stencil s = stencil(problem, p);
  std::vector<Eigen::VectorXd> first{p};
  first.insert(first.end(), s.points.begin(), s.points.end());
  const Eigen::MatrixXd values = evaluate(first);
  Eigen::VectorXd f = values.col(0);
  GS_EXPECTS(f.allFinite(), "the model cannot be evaluated at the start point (non-finite values)");
  Eigen::VectorXd r = problem.residuals(f);
  double chi2 = r.squaredNorm();
  Eigen::MatrixXd J = jacobian(problem, s, values.rightCols(values.cols() - 1), f);
  result.history.push_back({p, chi2, nan});

  double lambda = options.initial_lambda;
  bool stopped = false;
  const auto stop = [&](bool converged, std::string reason) {
    result.converged = converged;
    result.reason = std::move(reason);
    stopped = true;
  };
  if (!finite(J)) stop(false, "the Jacobian at the start has non-finite entries (the model failed at a perturbed point)");
  while (!stopped && result.iterations < options.max_iterations) {
    const Eigen::VectorXd g = J.transpose() * r;
    const std::vector<Eigen::Index> free = free_indices(active_set(problem, p, g));
    if (free.empty()) {
      stop(true, "every parameter is held at a bound (the chi2 gradient points out of the box)");
      break;
    }
    const Eigen::MatrixXd JF = columns(J, free);
    // The trial steps at λ, 10λ, 100λ, ... as one batch.
    std::vector<Eigen::VectorXd> trials;
    std::vector<double> lambdas;
    for (int t = 0; t < options.trials_per_iteration; ++t) {
      lambdas.push_back(lambda * std::pow(10.0, t));
      const Eigen::VectorXd step = damped_step(JF, r, lambdas.back());
      Eigen::VectorXd q = p;
      for (std::size_t k = 0; k < free.size(); ++k) q[free[k]] += step[Eigen::Index(k)];
      trials.push_back(problem.project(q));
    }
    ++result.iterations;
    const Eigen::MatrixXd trial_values = evaluate(trials);
    int best = -1;
    double best_chi2 = chi2;
    for (int t = 0; t < int(trials.size()); ++t) {
      if (!trial_values.col(t).allFinite()) continue;  // the model failed there: a rejected step
      const double c = problem.residuals(trial_values.col(t)).squaredNorm();
      if (c < best_chi2) best = t, best_chi2 = c;
    }
    // The largest change of a parameter by a step, relative to its size (with its step floor).
    const auto relative_change = [&](const Eigen::VectorXd& q) {
      double change = 0;
      for (Eigen::Index j = 0; j < problem.n(); ++j)
        change = std::max(change, std::abs(q[j] - p[j]) / (std::abs(p[j]) + parameters[std::size_t(j)].step_floor));
      return change;
    };
    if (best < 0) {  // no trial lowers χ²: damp more
      if (relative_change(trials[0]) <= options.step_tolerance) {
        stop(true, "no step lowers chi2 and the steps are below step_tolerance (" + number(options.step_tolerance) + ")");
        break;
      }
      lambda = lambdas.back() * 10;
      if (lambda > options.max_lambda)
        stop(false, "no trial step lowers chi2 up to lambda = " + number(options.max_lambda) +
                        " (is the Jacobian accurate? compare the finite-difference steps with the model's noise)");
      continue;
    }
    const double decrease = chi2 - best_chi2;
    const double change = relative_change(trials[std::size_t(best)]);
    p = trials[std::size_t(best)];
    f = trial_values.col(best);
    r = problem.residuals(f);
    chi2 = best_chi2;
    lambda = std::max(lambdas[std::size_t(best)] / 10, 1e-15);
    result.history.push_back({p, chi2, lambdas[std::size_t(best)]});
    // The Jacobian at the new point, one batch (also what the covariance needs when this was the last step).
    s = stencil(problem, p);
    J = jacobian(problem, s, evaluate(s.points), f);
    if (!finite(J))
      stop(false, "the Jacobian at iteration " + std::to_string(result.iterations) +
                      " has non-finite entries (the model failed at a perturbed point)");
    else if (chi2 == 0)
      stop(true, "chi2 = 0 (an exact fit)");
    else if (decrease <= options.chi2_tolerance * (chi2 + decrease))
      stop(true, "chi2 decreased by a relative " + number(decrease / (chi2 + decrease)) + " <= chi2_tolerance (" +
                     number(options.chi2_tolerance) + ")");
    else if (change <= options.step_tolerance)
      stop(true, "the step changed the parameters by a relative " + number(change) + " <= step_tolerance (" +
                     number(options.step_tolerance) + ")");
  }
  if (!stopped)
    stop(false, "max_iterations (" + std::to_string(options.max_iterations) + ") reached before convergence");

  result.parameters = p;
  result.chi2 = chi2;
  result.model = f;
  result.residuals = r;
  errors(problem, J, result);
  return result;
}

}  // namespace gratingsim::fitting
