#pragma once
// The grating as plain data (docs/formulation.md §1, §3): a lattice, a superstrate (medium 1, incidence
// side, lossless), a substrate (medium 2, may absorb) and a stack of patterned layers between them.
//
// Coordinates: the unit cell is [−Λx/2, Λx/2] × [−Λy/2, Λy/2]; z = 0 is the top of the substrate and
// the layers are listed top to bottom, so the stack occupies 0 < z < H with H = Σ thickness.
// Lengths in any one unit, the same as the wavelength's. Angles in degrees.
//
// Shapes are painted in list order over the layer's background: where shapes overlap, the later one
// wins, exactly (shape_functions.hpp says how). A shape may cross the cell boundary (the pattern is
// periodic) but may not span more than one period along either axis.
#include <variant>
#include <vector>

#include "physics/materials.hpp"

namespace gratingsim::physics {

struct Point {
  double x = 0, y = 0;
};

/// Λx > 0; Λy > 0 for a crossed (bi-periodic) grating, Λy = 0 for a 1D grating (uniform in y,
/// solved with M2 = 0; then only rectangles, trapezoid lines and 1-row rasters make sense and
/// a rectangle's y extent is ignored).
///
/// rotation_deg (1D gratings only; 0 for 2D): the 1D grating described in the grating's own frame
/// (lines along y', period Λx along x') is turned counter-clockwise about +z by α = rotation_deg, seen
/// from above: its grating vector is G = (2π/Λx)(cos α, sin α), its lines run along (−sin α, cos α),
/// and every shape coordinate (line centres, raster columns) is measured along G. Order m1 has the
/// lateral wavevector k_ρ,inc + m1·G. solve() solves it in the grating's frame (incidence azimuth
/// φ − α) and returns everything in the lab frame (solver.hpp).
struct Lattice {
  double period_x = 0;
  double period_y = 0;
  double rotation_deg = 0;
  [[nodiscard]] bool one_dimensional() const { return period_y == 0; }
};

/// Axis-aligned rectangle wx × wy centred at (x, y).
struct Rectangle {
  Point center;
  double width_x = 0, width_y = 0;
  Material material;
};

/// Ellipse with semi-axes a (along x before rotation) and b, rotated counter-clockwise by
/// rotation_deg about its centre. a = b is a circle.
struct Ellipse {
  Point center;
  double semi_axis_x = 0, semi_axis_y = 0;
  double rotation_deg = 0;
  Material material;
};

/// Simple polygon (edges must not cross each other), vertices in either orientation, convex or not.
struct Polygon {
  std::vector<Point> vertices;
  Material material;
};

/// A pixel map over the whole unit cell: pixel (ix, iy) covers
/// x ∈ −Λx/2 + [ix, ix+1]·Λx/nx, y ∈ −Λy/2 + [iy, iy+1]·Λy/ny, and holds an index into `materials`,
/// or −1 for the layer background. Its transform is exact for the pixel map, so it approximates a
/// smooth pattern only to the pixel size (first-order in the pixel pitch at edges). A raster must be
/// the only shape of its slice. In a 1D lattice ny must be 1.
struct Raster {
  int nx = 0, ny = 0;
  std::vector<int> pixels;  ///< row-major, iy slow: pixels[iy·nx + ix]
  std::vector<Material> materials;
};

/// A line along y (spanning the whole period Λy) with a trapezoidal cross-section: width
/// bottom_width at the layer's bottom, narrowing by 2·h/tan(sidewall_angle) at height h above it
/// (90° = vertical walls, < 90° = narrower top, > 90° = re-entrant). Sampled at each slice's centre.
struct TrapezoidLine {
  double center_x = 0;
  double bottom_width = 0;
  double sidewall_angle_deg = 90;
  Material material;
};

/// A polygon extruded with tapered walls: at height h above the layer's bottom every edge of
/// `bottom` has moved inward (along its normal) by h/tan(sidewall_angle). Sampled at each slice's
/// centre; an edge that would vanish or turn over within the layer is an error.
struct SlopedPolygon {
  Polygon bottom;
  double sidewall_angle_deg = 90;
};

/// An ellipse whose semi-axes go linearly from the bottom values at the layer's bottom to the top
/// values at its top (a tapered hole or pillar; centre and rotation fixed). A layer holding one is
/// solved as one step per slice of its own count (before Richardson's doubling), each step holding
/// every shape of the layer at the step's centre height: this ellipse with its semi-axes there
/// (absent where one is ≤ 0), trapezoid lines as rectangles of their width there, spanning Λy. Such a
/// layer may hold neither sloped polygons nor steps (discretisation.hpp's cut_into_steps).
struct TaperedEllipse {
  Point center;
  double bottom_semi_axis_x = 0, bottom_semi_axis_y = 0;
  double top_semi_axis_x = 0, top_semi_axis_y = 0;
  double rotation_deg = 0;
  Material material;
};

using Shape = std::variant<Rectangle, Ellipse, Polygon, Raster, TrapezoidLine, SlopedPolygon, TaperedEllipse>;

struct Layer {
  double thickness = 0;
  /// Slice count; if 0, slices = ceil(thickness / max_slice_thickness). One of them must be set.
  int slices = 0;
  double max_slice_thickness = 0;
  Material background;
  std::vector<Shape> shapes;
  /// Optional general z-profile: the layer is cut into steps.size() equal sub-layers, each with its
  /// own shape list (top step first); replaces `shapes` and needs `slices` to be a multiple of the
  /// step count (when given).
  std::vector<std::vector<Shape>> steps;
};

struct Structure {
  Lattice lattice;
  Material superstrate;  ///< medium 1 (incidence side): must be lossless
  Material substrate;    ///< medium 2
  std::vector<Layer> layers;  ///< top to bottom; may be empty (a bare interface)
};

/// One plane wave incident from the superstrate: k = k1 (sinθ cosφ, sinθ sinφ, −cosθ).
struct Incidence {
  double wavelength = 0;
  double theta_deg = 0;  ///< polar angle from the −z axis, [0, 90)
  double phi_deg = 0;    ///< azimuth from the x axis
};

}  // namespace gratingsim::physics
