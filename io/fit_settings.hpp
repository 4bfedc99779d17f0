#pragma once
// The `fit` section of a case (io/SCHEMA.md §3.3): which parameters float, their start values, bounds
// and finite-difference steps, the fit's options and the default uncertainties of measured tables.
// Read strictly and located like every case error; the case reader (io/case.cpp) checks the parameter
// names against the case's `parameters`; `gratingsim fit` fills a start value not given here from the case.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fitting/levenberg_marquardt.hpp"
#include "io/case.hpp"
#include "io/measured.hpp"

namespace gratingsim::io {

struct FitParameterSetting {
  fitting::Parameter parameter;  ///< name, bounds, steps; start only if start_given
  bool start_given = false;
  SourceLocation at;             ///< the parameter's key, for "no such parameter" errors
};

struct FitSettings {
  bool present = false;  ///< the case has a `fit` section
  std::vector<FitParameterSetting> parameters;
  fitting::Options options;
  MeasuredDefaults sigma;
  std::optional<std::string> library;  ///< a result file of a parameter sweep, for the start value
  SourceLocation library_at;
};

/// Reads the `fit` section of the case text `text` (file name `file`, for messages); other top-level
/// keys are left to the case reader. Throws CaseError located at the offending text.
FitSettings read_fit_settings(std::string_view text, const std::string& file);

}  // namespace gratingsim::io
