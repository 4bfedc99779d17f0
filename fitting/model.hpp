#pragma once
// What the fitting library fits: a model evaluated at MANY parameter vectors per call, so that the
// finite-difference Jacobian's perturbed points (and the trial steps of one Levenberg–Marquardt
// iteration) reach the solver as one batch: one batched solve on the GPU or CPU backend instead of
// one solve per point. Physics-agnostic: a model is any map R^n -> R^m.
#include <cstddef>
#include <vector>

#include <Eigen/Dense>

namespace gratingsim::fitting {

class BatchModel {
 public:
  virtual ~BatchModel() = default;
  /// m: the length of one model vector (e.g. Ψ and Δ at every measured wavelength and angle).
  [[nodiscard]] virtual std::size_t outputs() const = 0;
  /// The model at every point: an m × points.size() matrix, column k for points[k]. A point the model
  /// cannot evaluate (a failed solve) has non-finite entries in its column; the fit treats a trial step
  /// there as rejected and a Jacobian there as a failure it reports.
  virtual Eigen::MatrixXd evaluate(const std::vector<Eigen::VectorXd>& points) = 0;
};

}  // namespace gratingsim::fitting
