#pragma once
// A problem case: what a YAML case file describes, parsed strictly, converted to internal units and
// checked for physical sense before any solve. The reference for the YAML keys is io/SCHEMA.md.
//
// Internal units: every length is in nanometres (the `_nm` members), whatever the file's `units:`;
// angles are in degrees. Materials are physics::Material models in nanometres (refractive index
// n + iκ, κ ≥ 0 for loss with time dependence exp(−iωt), docs/formulation.md §1).
//
// The grating is the physics library's own structure (physics/structure.hpp), with a map from its
// objects to where the file gave them; io keeps what is not physics (sweeps, numerics, outputs,
// provenance). io/problem.hpp adds the solver options and the result layout.
#include <complex>
#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "convolution/convolution.hpp"
#include "physics/krylov.hpp"
#include "physics/preconditioner.hpp"
#include "core/error.hpp"
#include "io/case_options.hpp"
#include "physics/materials.hpp"
#include "physics/normal_field.hpp"
#include "physics/structure.hpp"

namespace gratingsim::io {

/// An error in a case file or a file it references, located at the offending text.
/// what() is "FILE:LINE:COLUMN: error: MESSAGE" (line and column 1-based, as editors count).
class CaseError : public InvalidArgument {
 public:
  CaseError(std::string file, int line, int column, std::string message);
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] int line() const { return line_; }
  [[nodiscard]] int column() const { return column_; }
  [[nodiscard]] const std::string& message() const { return message_; }

 private:
  std::string file_;
  int line_;
  int column_;
  std::string message_;
};

/// The length unit of a case file (`units:`); everything is converted to nanometres on reading.
enum class LengthUnit { nm, um, m };
std::string_view to_string(LengthUnit unit);  ///< "nm", "um", "m"
double nanometres_per(LengthUnit unit);       ///< 1, 1e3, 1e9

// --- Structure ------------------------------------------------------------------------------
/// A place in the case file (1-based) and the YAML path of the value there ("layers[1].thickness";
/// empty for the top level), for a value checked only after reading (by the application, or by a
/// later check of the reader).
struct SourceLocation {
  std::string file;
  int line = 0, column = 0;
  std::string path;
};

/// Where each object of Case::structure was given: layer i of the structure is layers[i], its shape k
/// (in the layer's own list, before any cutting into steps) is layers[i].shapes[k].
struct LayerSource {
  std::string name;  ///< the layer's name, "layer<i>" when the file gives none
  SourceLocation at, thickness;
  SourceLocation slices;  ///< where 'slices' was given; line 0 where the default rule chose the count
  std::vector<SourceLocation> shapes;
};
struct StructureSource {
  SourceLocation lattice, superstrate, substrate;  ///< superstrate: the case's top level when defaulted
  std::vector<LayerSource> layers;
};

// --- Illumination, numerics, output ----------------------------------------------------------
/// Sweeps over the polar angle θ (from the surface normal, [0, 90)) and azimuth φ (from the x axis);
/// every (θ, φ) pair is solved, for s, p or both incident polarisations (physics::Incidence is one
/// of its waves).
struct IncidenceSweep {
  std::vector<double> theta_deg{0.0}, phi_deg{0.0};
  Polarization polarization = Polarization::both;
};

/// The case's choices for the linear solver (physics::SolverOptions takes them, with its own defaults).
struct SolverOptions {
  /// the file's auto (physics::Method::automatic: BiCGStab on 2D lattices without metal, else GMRES), gmres, bicgstab
  /// or direct (dense_lu); a restart without a method chooses gmres
  physics::Method method = physics::Method::automatic;
  int restart = 40;         ///< GMRES restart length
  double tolerance = 1e-8;  ///< relative residual at which iterations stop
  int max_iterations = 500;
  /// auto (averaged for 1D, coarse for 2D lattices, when it fits in a quarter of the memory left), averaged,
  /// coarse, none
  /// (physics/preconditioner.hpp)
  physics::Preconditioning preconditioner = physics::Preconditioning::automatic;
};

struct Numerics {
  /// M1, M2: orders m_i ∈ [−M_i, M_i]; M2 = 0 for 1D lattices. With harmonics: auto, the largest the
  /// ladder may reach (AccuracyTarget::max_harmonics), which is what the memory check uses.
  int harmonics_x = 0, harmonics_y = 0;
  std::optional<AccuracyTarget> accuracy;  ///< nullopt: the harmonics and slices as given
  bool richardson = false;               ///< also solve at twice the slices and extrapolate (docs/formulation.md §12)
  Precision precision = Precision::double_;
  std::optional<conv::Backend> backend;  ///< nullopt: "auto", the application picks
  /// Where numerics.backend was given (nullopt when absent): a backend that cannot run here is
  /// reported there.
  std::optional<SourceLocation> backend_location;
  /// normal-vector (docs/normal-vector.md, the default) or laurent (J = χ ⊛ E)
  physics::Formulation formulation = physics::Formulation::normal_vector;
  SolverOptions solver;
};

/// A real-space map of the total field, synthesised from its harmonics at the slice centres:
/// xz at y = position, yz at x = position (lateral points across one period, vertically the slice
/// centres), or xy in the slice containing height z = position (points_first × points_second over the
/// unit cell).
struct FieldPlane {
  PlaneKind kind = PlaneKind::xz;
  double position_nm = 0;
  int points_first = 64;  ///< along x (xz, xy) or y (yz)
  int points_second = 0;  ///< along y for xy; 0 for xz and yz (the slice centres)
};
struct OutputOptions {
  bool fields = false;             ///< total-field harmonics per slice and the field maps
  std::vector<FieldPlane> planes;  ///< empty when fields is false
};

// --- Parameters ------------------------------------------------------------------------------
/// A parameter swept over its own values (`parameters: {cd: [80, 90, 100]}`, io/SCHEMA.md §1.11): an
/// axis of the run's sweep, before the wavelength.
struct ParameterAxis {
  std::string name;
  std::vector<double> values;  ///< as written (parameters carry no unit: the expressions using them do)
  SourceLocation at;           ///< the parameter's values in the file
};
/// A parameter computed from others (`parameters: {half: "${cd}/2"}`): not an axis.
struct DerivedParameter {
  std::string name;
  std::string expression;  ///< io/expression.hpp
  SourceLocation at;
};

struct Case {
  std::string path;  ///< the case file as given ("<string>" or a chosen name for parse_case)
  std::string base_directory;  ///< where relative table paths are found (case_at reads them again)
  std::string yaml;  ///< the file's text, verbatim (stored in the output)
  LengthUnit input_units = LengthUnit::nm;
  std::string description;

  std::vector<double> wavelength_nm;  ///< vacuum wavelengths, in the order given
  IncidenceSweep incidence;
  /// The grating in nm, as the physics library solves it: 1D lattices have period_y = 0 (and
  /// lattice.rotation_deg the file's lattice.rotation_deg, 0 without it); every
  /// layer's slice count is set (the file's, or the default); materials carry the case's names.
  /// Lines are TrapezoidLines (sidewall angle from the bottom and top widths), circles and ellipses
  /// Ellipses (semi-axes half the diameters) or TaperedEllipses, polygons Polygons or SlopedPolygons.
  physics::Structure structure;
  StructureSource structure_source;                                 ///< where each of its objects was given
  std::map<std::string, physics::Material, std::less<>> materials;  ///< every material referenced, by name (nm)
  Numerics numerics;
  OutputOptions output;
  std::vector<std::string> warnings;  ///< located, "FILE:LINE:COLUMN: warning: ..."
  /// Every file the case was read from: the case file (load_case only), then each material table, as
  /// opened. A run refuses to write its result over any of them.
  std::vector<std::string> inputs;

  /// The parameter axes, in file order (empty: a case without parameters), and the computed ones.
  std::vector<ParameterAxis> parameters;
  std::vector<DerivedParameter> derived_parameters;
  /// The values of every parameter (axes and computed) this Case's structure and materials were
  /// built with: by load_case, the first value of each axis (case_at: any).
  std::map<std::string, double, std::less<>> parameter_values;

  /// Sweep points: parameter points × wavelengths × θ × φ.
  [[nodiscard]] std::size_t points() const;
  /// Points of the parameter sweep: the product of the axes' lengths (1 without parameters).
  [[nodiscard]] std::size_t parameter_points() const;
  /// The axes' values at parameter point `index` (row-major over `parameters`, the first axis slowest).
  [[nodiscard]] std::vector<double> parameter_point(std::size_t index) const;
  /// Incident polarisations solved per point: 1 or 2.
  [[nodiscard]] int polarizations() const { return incidence.polarization == Polarization::both ? 2 : 1; }
  [[nodiscard]] double total_thickness_nm() const;
  [[nodiscard]] int total_slices() const;
  [[nodiscard]] const physics::Material& material(std::string_view name) const;
};

/// Reads, parses and checks a case file. Throws CaseError (located) on any error in the file or in a
/// file it references (material tables, relative to the case file's directory); other I/O failures
/// (unreadable file) also as CaseError located at line 0.
Case load_case(const std::string& path);
/// The same for YAML text already in memory; `name` is used in messages, relative table paths are
/// resolved against `base_directory`.
Case parse_case(std::string_view yaml, const std::string& name, const std::string& base_directory = ".");

/// The case at one point of its parameters, for the sweep (io::make_problem) and for fitting:
/// `values` holds one number per axis of c.parameters, in order (any values, not only the sweep's).
/// The case's text is read again with those values (its tables too, from c.base_directory), through
/// every check load_case applies, so the result is exactly the Case a literal file with those numbers
/// would give (parameters aside). An invalid geometry there throws CaseError located at the offending
/// value, its message starting "at the parameter point NAME = VALUE, ...: ". InvalidArgument when
/// `values` does not have one value per axis. The result keeps c's parameter axes (it is one point of
/// them; parameter_values says which): solve its structure with the solver options of
/// make_problem(c) (io/problem.hpp), e.g. physics::solve(case_at(c, v).structure, incidences,
/// problem.solver), rather than make_problem(case_at(c, v)), which would build every point again.
Case case_at(const Case& c, std::span<const double> values);
/// The gratings (what physics::solve takes) at several parameter vectors: case_at(c, v).structure for
/// each v, in order; the first invalid one throws as case_at.
std::vector<physics::Structure> structures_at(const Case& c, const std::vector<std::vector<double>>& values);

/// Memory (bytes) the physics solver needs for one wavelength of the case: physics::estimate_bytes
/// for all (θ, φ) of a wavelength batched together, at the finest slicing (twice the slices with
/// Richardson extrapolation; with slices: auto, numerics.max_slices) and the most harmonics. Cases
/// needing more than the machine's memory are refused on reading.
std::size_t estimated_solver_bytes(const Case& c);

}  // namespace gratingsim::io
