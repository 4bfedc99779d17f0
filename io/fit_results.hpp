#pragma once
// Fit result files (io/SCHEMA.md §3, schema "gratingsim.fit"): the best-fit parameters with their
// errors, covariance and correlation, χ², the measured and fitted spectra and the iteration history,
// published atomically (written to a sibling temporary, synced, renamed: a reader sees no file or the
// complete one). Vendor-free header: HDF5 stays in fit_results.cpp.
#include <string>
#include <vector>

#include "fitting/levenberg_marquardt.hpp"
#include "io/measured.hpp"

namespace gratingsim::io {

/// Version of the fit-file schema; readers check it.
inline constexpr int fit_schema_version = 1;

/// With numerics harmonics: auto and/or slices: auto (io/SCHEMA.md §1.7.1): the settings of one measured
/// wavelength, resolved ONCE by `run`'s ladder at the fit's start parameters and used for every solve of
/// the fit (settings chosen per evaluation would make the model jump with the parameters and break the
/// finite-difference Jacobians). Over the wavelength's measured (θ, φ), the finest any of them chose.
struct FrozenAccuracy {
  double wavelength_nm = 0;
  int harmonics_x = 0, harmonics_y = 0;  ///< M1, M2
  int slice_factor = 1;                  ///< every layer's slices × this (2^rungs with slices: auto, else 1)
  int slices = 0;                        ///< in all at the start parameters, before Richardson's doubling
  double estimated_error = 0;            ///< the largest of its points' estimates at the start (absolute, on efficiencies)
  bool target_reached = false;           ///< every point of the wavelength reached target_error
};

/// How the fit was made, stored beside it.
struct FitInfo {
  std::string case_path, case_yaml;  ///< the case file and its text verbatim
  std::string measured_path;
  std::string backend, precision, formulation, device;
  /// Per parameter, its unit ("nm", "deg", "" for a refractive index); empty: every unit "".
  std::vector<std::string> parameter_units;
  double target_error = 0;              ///< numerics.target_error, with `frozen`
  std::vector<FrozenAccuracy> frozen{};  ///< per measured wavelength (first appearance order); empty: fixed numerics
};

/// Writes `fit` of `measured` to `path`. The fit's model and residual vectors are the fitted spectra in
/// MeasuredData's order ([row][quantity]; InvalidArgument otherwise). An existing `path` is replaced
/// only with `replace` (else OutputError, the file untouched); failures throw OutputError and leave
/// neither a temporary nor a partial file.
void write_fit_results(const std::string& path, const fitting::FitResult& fit, const MeasuredData& measured,
                       const FitInfo& info, bool replace = false);

}  // namespace gratingsim::io
