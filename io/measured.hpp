#pragma once
// Measured spectra for `gratingsim fit`: a CSV or HDF5 table of wavelength, θ, φ and either Ψ/Δ or
// Mueller elements, with per-point uncertainties or a stated default (io/SCHEMA.md §4). Vendor-free
// header: HDF5 stays in measured.cpp.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "fitting/levenberg_marquardt.hpp"

namespace gratingsim::io {

/// A refused measured-data file, located: what() is "FILE:LINE:COLUMN: error: MESSAGE" for a CSV file
/// (1-based, as editors count; line 0 when the file cannot be read at all) and
/// "FILE: dataset /NAME: error: MESSAGE" for an HDF5 table ("FILE: error: MESSAGE" without a dataset).
class MeasuredDataError : public InvalidArgument {
 public:
  MeasuredDataError(std::string file, int line, int column, std::string dataset, std::string message);
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] int line() const { return line_; }
  [[nodiscard]] int column() const { return column_; }
  [[nodiscard]] const std::string& dataset() const { return dataset_; }  ///< HDF5 only
  [[nodiscard]] const std::string& message() const { return message_; }

 private:
  std::string file_;
  int line_, column_;
  std::string dataset_;
  std::string message_;
};

/// Where a measured row was taken: wavelength in nm, θ and φ in degrees.
struct MeasuredPoint {
  double wavelength_nm = 0, theta_deg = 0, phi_deg = 0;
  bool operator==(const MeasuredPoint&) const = default;
};

enum class MeasuredKind {
  ellipsometry,  ///< psi_deg, delta_deg
  mueller,       ///< a subset of m11..m44, as given (normalised or not: the file decides)
};

/// Uncertainties (1σ) for a file without the sigma column of a quantity; unset: such a file is refused.
struct MeasuredDefaults {
  std::optional<double> sigma_psi_deg, sigma_delta_deg, sigma_mueller;
};

/// A measured table, rows in file order. Values and sigmas are row-major [row][quantity], the
/// quantities in `quantities` order: "psi_deg", "delta_deg", or the Mueller elements present in the
/// order m11, m12, ..., m44. Δ is normalised to (−180°, 180°] (io/SCHEMA.md §2.1's convention).
struct MeasuredData {
  std::string path;
  MeasuredKind kind = MeasuredKind::ellipsometry;
  std::vector<MeasuredPoint> points;
  std::vector<std::string> quantities;
  std::vector<double> values, sigmas;
  std::vector<bool> sigma_defaulted;  ///< per quantity: σ from MeasuredDefaults, not from the file
  /// Where each value stood, so that a later check can refuse a row located (refuse_value): the file's
  /// column names in file order, and per row and column [row][column] the CSV line and column (1-based;
  /// empty for an HDF5 table, whose values are located by dataset and index).
  std::vector<std::string> columns;
  std::vector<std::pair<int, int>> cells;
  bool csv = true;
  [[nodiscard]] std::size_t rows() const { return points.size(); }
};

/// Reads `path`: an HDF5 file (recognised by its signature) or else a CSV file. Throws
/// MeasuredDataError, located, for anything it refuses (io/SCHEMA.md §4 lists the rules).
MeasuredData read_measured(const std::string& path, const MeasuredDefaults& defaults = {});

/// Throws MeasuredDataError located at the value of `column` (a name of data.columns) in `row`: for
/// checks made after reading, e.g. a wavelength outside a material's table.
[[noreturn]] void refuse_value(const MeasuredData& data, std::size_t row, const std::string& column, const std::string& message);

/// The measurement a fit compares the model with: the values and sigmas in MeasuredData's order
/// ([row][quantity]), Δ marked periodic (360°) so that its residuals wrap. The model's outputs must
/// come in the same order.
fitting::Measurement to_measurement(const MeasuredData& data);

}  // namespace gratingsim::io
