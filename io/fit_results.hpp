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

/// How the fit was made, stored beside it.
struct FitInfo {
  std::string case_path, case_yaml;  ///< the case file and its text verbatim
  std::string measured_path;
  std::string backend, precision, formulation, device;
  /// Per parameter, its unit ("nm", "deg", "" for a refractive index); empty: every unit "".
  std::vector<std::string> parameter_units;
};

/// Writes `fit` of `measured` to `path`. The fit's model and residual vectors are the fitted spectra in
/// MeasuredData's order ([row][quantity]; InvalidArgument otherwise). An existing `path` is replaced
/// only with `replace` (else OutputError, the file untouched); failures throw OutputError and leave
/// neither a temporary nor a partial file.
void write_fit_results(const std::string& path, const fitting::FitResult& fit, const MeasuredData& measured,
                       const FitInfo& info, bool replace = false);

}  // namespace gratingsim::io
