#pragma once
// Start values from a precomputed library, as production metrology does (docs/fitting.md §3): the
// library point of lowest χ² against the measurement, refined by interpolating the library's model
// vectors linearly around it (a local Jacobian fitted to its nearest neighbours, then one Gauss–Newton
// step), kept inside the neighbours' box (interpolation, never extrapolation) and the bounds.
#include <cstddef>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "fitting/levenberg_marquardt.hpp"

namespace gratingsim::fitting {

/// N library points: column k of `points` (n × N) is a parameter vector, column k of `outputs`
/// (m × N) the model there (non-finite: a point the library could not compute, never chosen).
struct Library {
  Eigen::MatrixXd points, outputs;
};

struct LibraryStart {
  std::size_t nearest = 0;   ///< the library point of lowest χ²
  double nearest_chi2 = 0;
  Eigen::VectorXd start;     ///< the refined start (the nearest point where no refinement was possible)
  bool interpolated = false;
  std::string note;          ///< why not interpolated, when not
};

/// The start for fitting `measurement` (as in fit(); its periods wrap residuals) from `library`,
/// within the bounds of `parameters` (their start values are not used). Neighbours are the 2n library
/// points nearest to the best one, distances measured per axis in units of the library's spacing there
/// (span / (distinct values − 1): one grid step on a grid). Throws InvalidArgument for inconsistent
/// shapes or a library without any finite point.
LibraryStart library_start(const Library& library, const std::vector<Parameter>& parameters,
                           const Measurement& measurement);

}  // namespace gratingsim::fitting
