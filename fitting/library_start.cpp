// Start values from a library: nearest point in χ², refined by local linear interpolation.
#include "fitting/library_start.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "core/error.hpp"

namespace gratingsim::fitting {

namespace {

double wrap(double x, double period) { return period == 0 ? x : x - period * std::ceil(x / period - 0.5); }

}  // namespace

LibraryStart library_start(const Library& library, const std::vector<Parameter>& parameters,
                           const Measurement& measurement) {
  const Eigen::Index n = library.points.rows(), N = library.points.cols(), m = library.outputs.rows();
  GS_EXPECTS(n == Eigen::Index(parameters.size()) && n > 0,
             "the library has " + std::to_string(n) + " parameters, the fit " + std::to_string(parameters.size()));
  GS_EXPECTS(library.outputs.cols() == N && N > 0, "the library needs one model vector per point");
  GS_EXPECTS(library.points.allFinite(), "the library's parameter vectors must be finite");
  GS_EXPECTS(measurement.values.size() == m && measurement.sigmas.size() == m &&
                 (measurement.periods.size() == 0 || measurement.periods.size() == m),
             "the measurement has " + std::to_string(measurement.values.size()) + " values for a library of " +
                 std::to_string(m) + " outputs");
  const auto period = [&](Eigen::Index i) { return measurement.periods.size() == 0 ? 0.0 : measurement.periods[i]; };
  // Weighted differences from the measurement (wrapped), per library point.
  const auto weighted = [&](const Eigen::VectorXd& model, const Eigen::VectorXd& reference) {
    Eigen::VectorXd d(m);
    for (Eigen::Index i = 0; i < m; ++i) d[i] = wrap(model[i] - reference[i], period(i)) / measurement.sigmas[i];
    return d;
  };

  LibraryStart out;
  out.nearest_chi2 = std::numeric_limits<double>::infinity();
  for (Eigen::Index k = 0; k < N; ++k) {
    if (!library.outputs.col(k).allFinite()) continue;
    const double chi2 = weighted(library.outputs.col(k), measurement.values).squaredNorm();
    if (chi2 < out.nearest_chi2) out.nearest_chi2 = chi2, out.nearest = std::size_t(k);
  }
  GS_EXPECTS(std::isfinite(out.nearest_chi2), "the library has no point with finite model values");
  const Eigen::VectorXd p0 = library.points.col(Eigen::Index(out.nearest));
  const Eigen::VectorXd f0 = library.outputs.col(Eigen::Index(out.nearest));
  out.start = p0;
  for (Eigen::Index j = 0; j < n; ++j) out.start[j] = std::clamp(p0[j], parameters[std::size_t(j)].lower, parameters[std::size_t(j)].upper);

  // The library's spacing per axis; an axis with one value is not interpolated (its value stays).
  Eigen::VectorXd spacing(n);
  std::vector<Eigen::Index> axes;
  for (Eigen::Index j = 0; j < n; ++j) {
    const std::set<double> distinct(library.points.row(j).begin(), library.points.row(j).end());
    spacing[j] = distinct.size() > 1 ? (*distinct.rbegin() - *distinct.begin()) / double(distinct.size() - 1) : 0;
    if (spacing[j] > 0) axes.push_back(j);
  }
  const auto na = Eigen::Index(axes.size());
  if (na == 0) {
    out.note = "every parameter takes a single value in the library: nothing to interpolate";
    return out;
  }
  // The 2n nearest finite neighbours of p0 in units of the spacing.
  std::vector<std::pair<double, Eigen::Index>> by_distance;
  for (Eigen::Index k = 0; k < N; ++k) {
    if (std::size_t(k) == out.nearest || !library.outputs.col(k).allFinite()) continue;
    double d2 = 0;
    for (const Eigen::Index j : axes) d2 += std::pow((library.points(j, k) - p0[j]) / spacing[j], 2);
    by_distance.emplace_back(d2, k);
  }
  const std::size_t count = std::min(by_distance.size(), std::size_t(2 * na));
  std::partial_sort(by_distance.begin(), by_distance.begin() + std::ptrdiff_t(count), by_distance.end());
  // Local Jacobian G (m × na) by least squares over the neighbours: f_k − f0 ≈ G (p_k − p0).
  Eigen::MatrixXd dp(Eigen::Index(count), na), df(Eigen::Index(count), m);
  Eigen::VectorXd low = p0, high = p0;
  for (std::size_t c = 0; c < count; ++c) {
    const Eigen::Index k = by_distance[c].second;
    for (Eigen::Index a = 0; a < na; ++a) dp(Eigen::Index(c), a) = library.points(axes[std::size_t(a)], k) - p0[axes[std::size_t(a)]];
    df.row(Eigen::Index(c)) = weighted(library.outputs.col(k), f0).transpose();  // already divided by σ
    low = low.cwiseMin(library.points.col(k));
    high = high.cwiseMax(library.points.col(k));
  }
  const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> local(dp);
  if (Eigen::Index(count) < na || local.rank() < na) {
    out.note = "the nearest point's neighbours do not span every parameter axis: no interpolation";
    return out;
  }
  const Eigen::MatrixXd G = local.solve(df).transpose();  // m × na, weighted
  // One Gauss–Newton step on the interpolated model: min |G δ + (f0 − y)/σ|².
  const Eigen::VectorXd step = G.colPivHouseholderQr().solve(-weighted(f0, measurement.values));
  for (Eigen::Index a = 0; a < na; ++a) {
    const Eigen::Index j = axes[std::size_t(a)];
    const Parameter& parameter = parameters[std::size_t(j)];
    out.start[j] = std::clamp(std::clamp(p0[j] + step[a], low[j], high[j]), parameter.lower, parameter.upper);
  }
  out.interpolated = true;
  return out;
}

}  // namespace gratingsim::fitting
