#pragma once
// Reading refractive-index tables (internal to io/).
#include <string>
#include <vector>

#include "io/case.hpp"

namespace gratingsim::io {

/// A table of n(λ), κ(λ) as read from a file (λ in nm).
struct IndexTable {
  std::vector<double> wavelength_nm, n, k;
};

/// Reads a text table of `wavelength, n[, k]` rows (separated by commas, semicolons or blanks; `#`
/// starts a comment; one header line of names allowed; k = 0 when absent). Wavelengths are in the
/// given unit and come back in nanometres. Checks: at least two rows, λ > 0 strictly increasing,
/// n > 0, k ≥ 0. Errors are CaseErrors located in the table file.
IndexTable read_index_table(const std::string& path, LengthUnit unit);

}  // namespace gratingsim::io
