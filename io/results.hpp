#pragma once
// Result files: the versioned HDF5 schema of io/SCHEMA.md, written atomically and resumably.
//
// A run writes OUT.h5.partial; every finished sweep point is written, its `done` flag set last, and
// the file flushed, so an interrupted run keeps every finished point; ResultWriter::resume reopens the
// partial file and skips them. finish() renames OUT.h5.partial to OUT.h5 once every point is done,
// so OUT.h5 exists only complete. Vendor-free header: HDF5 stays in results.cpp.
#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/case_options.hpp"
#include "physics/phase_times.hpp"

namespace gratingsim::io {

/// HDF5 or file-system failure while writing or reading a result file.
class OutputError : public Error {
 public:
  using Error::Error;
};

/// The newest version of the result schema; readers check it (io/SCHEMA.md lists the changes). A file
/// is written with the oldest version that holds its layout (ResultLayout::schema_version): 1 without
/// parameter axes (byte for byte what earlier builds wrote), 2 with them; both are read.
inline constexpr int result_schema_version = 2;

/// A parameter axis of the sweep (schema version 2): the case's parameter (io/case.hpp ParameterAxis).
struct SweepParameter {
  std::string name;
  std::vector<double> values;
  bool operator==(const SweepParameter&) const = default;
};

/// A real-space field map: the plane, its position and the coordinates of its grid (nm).
struct MapLayout {
  PlaneKind kind = PlaneKind::xz;
  double position_nm = 0;
  std::vector<double> first_nm, second_nm;  ///< coordinates along the plane's first and second axis
  bool operator==(const MapLayout&) const = default;
};

/// Everything about a result file's shape, fixed before the first point.
/// Sweep points are indexed (parameter point, wavelength, θ, φ), flat index
/// ((ip·Nλ + iw)·Nθ + iθ)·Nφ + iφ, where ip is the row-major index over the parameter axes (the first
/// slowest; 0 without parameters). A batch is one parameter point at one wavelength: one structure
/// solved for its incidences, points batch·Nθ·Nφ … (batch + 1)·Nθ·Nφ − 1.
struct ResultLayout {
  std::vector<SweepParameter> parameters;  ///< the first sweep axes, in order (none: schema version 1)
  std::vector<double> wavelength_nm, theta_deg, phi_deg;
  Polarization polarization = Polarization::both;  ///< incident polarisations: s, p or both (s then p)
  std::vector<std::array<int, 2>> orders;          ///< (m1, m2) of the diffraction orders stored
  // Fields (stored only if `fields`): harmonics of the total field per slice, and field maps.
  bool fields = false;
  int harmonics_x = 0, harmonics_y = 0;  ///< M1, M2 of the truncation: Nm = (2M1+1)(2M2+1)
  std::vector<double> slice_center_nm;   ///< z of each slice centre, top to bottom
  std::vector<MapLayout> maps;
  /// Accuracy on demand (the case's numerics.accuracy): the `accuracy` group, what each point used.
  std::optional<AccuracyTarget> accuracy;

  [[nodiscard]] std::size_t parameter_points() const {
    std::size_t n = 1;
    for (const auto& p : parameters) n *= p.values.size();
    return n;
  }
  [[nodiscard]] std::size_t points() const {
    return parameter_points() * wavelength_nm.size() * theta_deg.size() * phi_deg.size();
  }
  [[nodiscard]] std::size_t point_index(std::size_t iw, std::size_t itheta, std::size_t iphi,
                                        std::size_t iparameters = 0) const {
    return ((iparameters * wavelength_nm.size() + iw) * theta_deg.size() + itheta) * phi_deg.size() + iphi;
  }
  /// Batches: parameter points × wavelengths; the batch of a point, its parameter point, its wavelength.
  [[nodiscard]] std::size_t batches() const { return parameter_points() * wavelength_nm.size(); }
  [[nodiscard]] std::size_t batch_of(std::size_t point) const { return point / (theta_deg.size() * phi_deg.size()); }
  [[nodiscard]] std::size_t parameter_point_of(std::size_t point) const { return batch_of(point) / wavelength_nm.size(); }
  [[nodiscard]] std::size_t wavelength_index_of(std::size_t point) const { return batch_of(point) % wavelength_nm.size(); }
  /// The sweep indices of a point: one per parameter axis, then wavelength, θ, φ.
  [[nodiscard]] std::vector<std::size_t> sweep_indices(std::size_t point) const {
    std::vector<std::size_t> index(parameters.size() + 3);
    const std::size_t sizes[3] = {wavelength_nm.size(), theta_deg.size(), phi_deg.size()};
    for (std::size_t k = index.size(); k-- > 0;) {
      const std::size_t n = k >= parameters.size() ? sizes[k - parameters.size()] : parameters[k].values.size();
      index[k] = point % n;
      point /= n;
    }
    return index;
  }
  [[nodiscard]] int schema_version() const { return parameters.empty() ? 1 : 2; }
  [[nodiscard]] int polarizations() const { return polarization == Polarization::both ? 2 : 1; }
  [[nodiscard]] std::size_t orders_count() const { return orders.size(); }
  [[nodiscard]] std::size_t harmonics_count() const {
    return std::size_t(2 * harmonics_x + 1) * std::size_t(2 * harmonics_y + 1);
  }
  bool operator==(const ResultLayout&) const = default;
};

/// How the results were produced, stored as root attributes and the /input group.
struct RunInfo {
  std::string backend;    ///< e.g. "cpu-fftw"
  std::string precision;  ///< "single" or "double"
  std::string formulation;  ///< "normal-vector" or "laurent" (files without the attribute read "laurent")
  std::string device;     ///< e.g. "CPU (16 threads)" or "NVIDIA H100 80GB HBM3"
  std::string input_units;
  std::string case_path;
  std::string case_yaml;  ///< the case file verbatim
  /// A digest of the content of every other file the case reads (material tables), so that a resume
  /// is refused when one changed; "" when there are none (and in files written before it existed).
  std::string inputs_digest;
  bool operator==(const RunInfo&) const = default;
};

/// solver/method's values, each the index of its name here (the dataset's attribute `methods`): 0 for a point
/// whose method was not recorded (a file written before the dataset existed, read back).
inline constexpr std::array<const char*, 4> method_names = {"not recorded", "gmres", "bicgstab", "direct"};

/// One sweep point. P = layout.polarizations() incident polarisations (index i), No orders (index o,
/// as layout.orders), Nz slices, Nm harmonics. Vectors are row-major with the shapes given.
/// Every member has its row in io/result_fields.hpp (its dataset, shape and unit), which writing,
/// reading, the point codec and operator== iterate; a member without a row does not compile.
struct PointResult {
  static constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> reflectance, transmittance;                  ///< [P][No] diffraction efficiencies R_m, T_m
  std::vector<std::complex<double>> jones_r, jones_t;              ///< [No][2][P]: outgoing (s, p) per incident i
  std::vector<double> reflected_direction, transmitted_direction;  ///< [No][3] unit (kx, ky, kz); NaN if evanescent
  double psi_deg = nan, delta_deg = nan;                           ///< order-0 reflection ellipsometry (P = 2 only)
  std::array<double, 16> mueller = [] {  ///< order-0 reflection Mueller matrix, row-major (P = 2 only)
    std::array<double, 16> m;
    m.fill(nan);
    return m;
  }();
  std::vector<double> absorption, energy_balance_error;  ///< [P]
  std::vector<std::int32_t> iterations;                  ///< [P] Krylov iterations
  std::vector<std::int32_t> matvecs;                     ///< [P] batched operator applications
  std::vector<double> residual;                          ///< [P] final relative residual
  std::vector<std::uint8_t> converged;                   ///< [P] 1 converged, 0 not
  /// The Krylov method that ran (numerics.solver.method with `auto` resolved): its index in method_names.
  std::uint8_t method = 0;
  double solve_seconds = 0;
  /// [phases] wall time per phase of the point's batch (physics/phase_times.hpp; shared by the batch's
  /// points, like solve_seconds); NaN where not recorded (writing: until record_writing()).
  std::array<double, physics::phase_count> phase_seconds = [] {
    std::array<double, physics::phase_count> s;
    s.fill(nan);
    return s;
  }();
  std::vector<std::complex<double>> field_harmonics;          ///< [P][Nz][3][Nm] (fields only)
  std::vector<std::vector<std::complex<double>>> field_maps;  ///< per map: [P][3][n_first][n_second] (fields only)
  // Accuracy on demand (layout.accuracy only): the settings the point's result was computed with and
  // the change of its efficiencies (Ψ, Δ) between the last rungs (io/SCHEMA.md §1.7.1).
  std::array<std::int32_t, 2> used_harmonics{-1, -1};  ///< M1, M2
  std::int32_t used_slices = -1;                       ///< in all, before Richardson's doubling
  double estimated_error = nan;                        ///< absolute, on efficiencies
  double psi_change_deg = nan, delta_change_deg = nan;  ///< P = 2 only
  std::uint8_t target_reached = 0;                     ///< 1: estimated_error ≤ the target
  bool operator==(const PointResult&) const;                  ///< bitwise equality of every value (NaN equals NaN)
};

/// "OUT.h5" → "OUT.h5.partial": where a run writes until it is complete.
std::string partial_path(const std::string& path);
/// "OUT.h5" → "OUT.h5.lock": the lock file of OutputLock.
std::string lock_path(const std::string& path);

/// The exclusive right to write OUT.h5 and OUT.h5.partial, taken before either is touched: an
/// flock(2) on OUT.h5.lock, which records the holder ("pid 1234 on host"). Only one run at a time
/// holds it; the lock dies with its process (a lock file left by a killed run is stale and reused),
/// and the destructor removes the file. Not copyable.
class OutputLock {
 public:
  /// Takes the lock, or throws OutputError naming the run that holds it (or why the lock file
  /// cannot be made: an unwritable directory is reported here, before anything is computed).
  explicit OutputLock(const std::string& path);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

/// Writes one result file, from one thread (HDF5 is built without thread safety). Not copyable;
/// movable. Every call either succeeds or throws OutputError (or InvalidArgument for a PointResult of
/// the wrong shape). An existing OUT.h5 stays untouched until finish() replaces it.
class ResultWriter {
 public:
  /// Starts a new file at partial_path(path) (replacing any earlier partial file) and writes the
  /// metadata, the input case and the sweep axes; datasets are allocated, unwritten values read NaN.
  static ResultWriter create(const std::string& path, const ResultLayout& layout, const RunInfo& info);
  /// Reopens partial_path(path) after an interruption. It must have been written for the same layout
  /// and run (case text, backend, precision, device): otherwise OutputError says what differs.
  static ResultWriter resume(const std::string& path, const ResultLayout& layout, const RunInfo& info);

  ResultWriter(ResultWriter&&) noexcept;
  ResultWriter& operator=(ResultWriter&&) noexcept;
  /// Closes the file; without finish() it stays at partial_path(path) for a later resume.
  ~ResultWriter();

  [[nodiscard]] const ResultLayout& layout() const;
  [[nodiscard]] bool done(std::size_t point) const;
  [[nodiscard]] std::size_t points_done() const;
  /// Writes a point's data and flushes the file, then its done flag and flushes again. Space for the
  /// point is claimed from the file system first: a full disk or a file-size limit throws
  /// OutputError naming the cause before HDF5 writes anything, and the file keeps every earlier point
  /// (and stays usable: close it and resume later). Should HDF5 itself fail while writing, the file
  /// is left as it is on disk (HDF5 is not asked to close it) and every later call throws.
  void write(std::size_t point, const PointResult& result);
  /// Stores `seconds`, the time the writes of one batch's points took, as the `writing` phase of
  /// each of them (points already written), and flushes. Failures throw OutputError as write().
  void record_writing(std::span<const std::size_t> points, double seconds);
  /// Every point must be done: closes the file, syncs it, renames it to the final path (unless that
  /// path is, by now, not a regular file, or a file that `replace` does not allow to replace: then
  /// OutputError, and OUT.h5.partial stays complete for a later resume), then syncs the directory.
  void finish(bool replace = false);

 private:
  struct State;
  explicit ResultWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Reads a result file (complete or partial) written with this schema version.
class ResultReader {
 public:
  explicit ResultReader(const std::string& path);
  ResultReader(ResultReader&&) noexcept;
  ResultReader& operator=(ResultReader&&) noexcept;
  ~ResultReader();

  [[nodiscard]] const ResultLayout& layout() const;
  [[nodiscard]] const RunInfo& info() const;
  [[nodiscard]] bool done(std::size_t point) const;
  [[nodiscard]] PointResult read(std::size_t point) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gratingsim::io
