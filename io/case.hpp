#pragma once
// A problem case: what a YAML case file describes, parsed strictly, converted to internal units and
// checked for physical sense before any solve. The reference for the YAML keys is io/SCHEMA.md.
//
// Internal units: every length is in nanometres (the `_nm` members), whatever the file's `units:`;
// angles are in degrees. Materials are physics::Material models in nanometres (refractive index
// n + iκ, κ ≥ 0 for loss with time dependence exp(−iωt), docs/formulation.md §1).
//
// This is io's description of a case (plain structs, no vendor types), close to the file;
// io/problem.hpp maps it onto the physics library's structs.
#include <array>
#include <complex>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "convolution/convolution.hpp"
#include "physics/preconditioner.hpp"
#include "core/error.hpp"
#include "io/case_options.hpp"
#include "physics/materials.hpp"
#include "physics/normal_field.hpp"

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

// --- Problem --------------------------------------------------------------------------------
/// Shape coordinates are in the unit cell [−Λx/2, Λx/2) × [−Λy/2, Λy/2), centred on the origin.
/// Lines running along y (spanning the period Λy), centred at x = center. Their width goes linearly
/// from bottom_width at the layer's bottom to top_width at its top (equal for `line`; different for
/// `trapezoid`: sloped sidewalls, sampled per slice — "layered shape functions").
struct LineShape {
  double center_nm = 0;
  double bottom_width_nm = 0, top_width_nm = 0;
};
/// An axis-aligned rectangle (2D lattices only).
struct RectangleShape {
  double center_x_nm = 0, center_y_nm = 0;
  double width_x_nm = 0, width_y_nm = 0;
};
/// An ellipse, rotated counter-clockwise by rotation_deg, whose diameters go linearly from the
/// layer's bottom to its top (a circle has equal diameters; a tapered hole or pillar different bottom
/// and top values). 2D lattices only.
struct EllipseShape {
  double center_x_nm = 0, center_y_nm = 0;
  double rotation_deg = 0;
  double bottom_diameter_x_nm = 0, bottom_diameter_y_nm = 0;
  double top_diameter_x_nm = 0, top_diameter_y_nm = 0;
};
/// A simple polygon, vertices (x, y) in order (either orientation) at the layer's bottom; with a
/// sidewall angle α ≠ 90° every edge moves inward by h/tan α at height h above the bottom.
struct PolygonShape {
  std::vector<std::array<double, 2>> vertices_nm;
  double sidewall_angle_deg = 90;
};
struct Shape {
  std::string material;
  std::variant<LineShape, RectangleShape, EllipseShape, PolygonShape> geometry;
};

/// One layer of the patterned region, cut into `slices` slices of equal thickness.
/// A uniform film has no shapes (background is its material). Shapes are painted in order over the
/// background: where they overlap, the later shape wins.
struct Layer {
  std::string name;
  double thickness_nm = 0;
  int slices = 1;
  std::string background;
  std::vector<Shape> shapes;
};

/// The lattice; without period_y the grating is 1D: invariant along y, no y-harmonics.
struct Lattice {
  double period_x_nm = 0;
  std::optional<double> period_y_nm;
  [[nodiscard]] bool is_1d() const { return !period_y_nm.has_value(); }
};

// --- Illumination, numerics, output ----------------------------------------------------------
/// Sweeps over the polar angle θ (from the surface normal, [0, 90)) and azimuth φ (from the x axis);
/// every (θ, φ) pair is solved, for s, p or both incident polarisations.
struct Incidence {
  std::vector<double> theta_deg{0.0}, phi_deg{0.0};
  Polarization polarization = Polarization::both;
};

enum class SolverMethod { gmres, bicgstab, direct };
std::string_view to_string(SolverMethod method);

struct SolverOptions {
  SolverMethod method = SolverMethod::gmres;
  int restart = 40;         ///< GMRES restart length
  double tolerance = 1e-8;  ///< relative residual at which iterations stop
  int max_iterations = 500;
  /// auto (averaged for 1D, coarse for 2D lattices, when it fits in a quarter of the memory left), averaged,
  /// coarse, none
  /// (physics/preconditioner.hpp)
  physics::Preconditioning preconditioner = physics::Preconditioning::automatic;
};

/// A place in the case file (1-based), for a value checked only later (by the application).
struct SourceLocation {
  std::string file;
  int line = 0, column = 0;
};

struct Numerics {
  /// M1, M2: orders m_i ∈ [−M_i, M_i]; M2 = 0 for 1D lattices. With harmonics: auto, the largest the
  /// ladder may reach (AccuracyTarget::max_harmonics), which is what the memory check uses.
  int harmonics_x = 0, harmonics_y = 0;
  std::optional<AccuracyTarget> accuracy;  ///< nullopt: the harmonics and slices as given
  bool richardson = false;               ///< also solve at twice the slices and extrapolate (docs/formulation.md §12)
  conv::Precision precision = conv::Precision::double_;
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

struct Case {
  std::string path;  ///< the case file as given ("<string>" or a chosen name for parse_case)
  std::string yaml;  ///< the file's text, verbatim (stored in the output)
  LengthUnit input_units = LengthUnit::nm;
  std::string description;

  std::vector<double> wavelength_nm;  ///< vacuum wavelengths, in the order given
  Incidence incidence;
  Lattice lattice;
  std::string superstrate, substrate;                               ///< material names (superstrate lossless)
  std::vector<Layer> layers;                                        ///< top to bottom; the substrate interface is z = 0
  std::map<std::string, physics::Material, std::less<>> materials;  ///< every material referenced (nm)
  Numerics numerics;
  OutputOptions output;
  std::vector<std::string> warnings;  ///< located, "FILE:LINE:COLUMN: warning: ..."
  /// Every file the case was read from: the case file (load_case only), then each material table, as
  /// opened. A run refuses to write its result over any of them.
  std::vector<std::string> inputs;

  /// Sweep points: wavelengths × θ × φ.
  [[nodiscard]] std::size_t points() const;
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

/// Memory (bytes) the physics solver needs for one wavelength of the case: physics::estimate_bytes
/// for all (θ, φ) of a wavelength batched together, at the finest slicing (twice the slices with
/// Richardson extrapolation; with slices: auto, numerics.max_slices) and the most harmonics. Cases
/// needing more than the machine's memory are refused on reading.
std::size_t estimated_solver_bytes(const Case& c);

}  // namespace gratingsim::io
