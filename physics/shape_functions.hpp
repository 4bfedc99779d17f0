#pragma once
// Shape functions (docs/formulation.md §3): the Fourier coefficients of one slice's contrast
//     χ̂(n) = (1/(ΛxΛy)) ∫_cell χ(x, y) e^{−iG_n·r} dx dy,   G_n = 2π (n1/Λx, n2/Λy),
// for n ∈ [−2M1, 2M1] × [−2M2, 2M2], in the convolution engine's kernel layout
// (n1 + 2M1)·K2 + (n2 + 2M2), K_i = 4M_i + 1.
//
// Exact transforms of painted cells (rectangles, ellipses, polygons; later shapes win).
// The painted map P (the value of the last shape covering a point, else the background) times the
// indicator of the closed cell is piecewise constant, so by the divergence theorem its transform is
// a sum over the boundary curves that separate different values:
//     ∫ P e^{−iG·r} dA = Σ_pieces [P_left − P_right] · I_piece(G),
//     I(G) = (i/|G|²) ∫_piece e^{−iG·r} (G_x dy − G_y dx)   (G ≠ 0),   I(0) = ∫_piece x dy,
// with "left" the side to the left of the piece's direction. The pieces are the boundaries of every
// shape and of its periodic images that touch the cell, and the cell's own edges, split at all
// their mutual intersections (so each piece separates exactly two constant values), coincident
// pieces merged, and the values on either side found by evaluating the painted map a hair (1e-9 of
// the period) off the piece's midpoint. This is exact for any overlap pattern, non-convex polygons
// and shapes crossing the cell edge. Closed forms per piece: a straight piece (a polygon or
// rectangle edge, split or not) gives e^{−iG·m} sinc(G·d/2) (m midpoint, d = b − a); a whole
// ellipse gives πab·2J1(q)/q·e^{−iG·c}; only a partial elliptic arc (an ellipse cut by an overlap
// or the cell edge) is integrated numerically, by composite 16-point Gauss–Legendre quadrature
// sized so that the phase changes by less than ~2 rad per panel (converged to rounding).
// A shape without overlaps therefore reproduces the textbook closed forms: the rectangle's sinc
// product, the ellipse's Bessel form and the polygon's edge sum.
#include <array>
#include <complex>
#include <functional>
#include <span>
#include <variant>
#include <vector>

#include "physics/structure.hpp"

namespace gratingsim::physics {

/// A shape at one height (z-varying shapes already sampled).
using PlanarShape = std::variant<Rectangle, Ellipse, Polygon, Raster>;

/// One slice's lateral content.
struct SliceContent {
  Material background;
  std::vector<PlanarShape> shapes;
  /// Per shape, how its walls move with height z (z upward) where the slice samples a z-varying shape;
  /// empty when every wall is vertical. The normal-vector field follows them (normal_field.hpp).
  ///  1D lattices: the slopes dx/dz of its left and right walls (x − w/2 and x + w/2): a trapezoid line
  ///   +cot α on the left, −cot α on the right.
  ///  2D lattices: the rates of its half-extents along its own axes: an ellipse's d(semi-axis x)/dz and
  ///   d(semi-axis y)/dz (a tapered ellipse); a rectangle's d(width_x/2)/dz and d(width_y/2)/dz (a
  ///   trapezoid line spanning Λy: −cot α, 0); a polygon's outward edge speed, twice (a sloped
  ///   polygon: −cot α).
  std::vector<std::array<double, 2>> wall_slopes = {};
  [[nodiscard]] bool sloped() const {
    for (const auto& s : wall_slopes)
      if (s[0] != 0 || s[1] != 0) return true;
    return false;
  }
};

/// Adds (1/(ΛxΛy)) ∫_P e^{−iG·x} dx dy of the polygon `vertices` (simple, either orientation; exact per edge
/// by Green's theorem, as PaintedCell's straight pieces) to `out`, laid out as PaintedCell::harmonics'.
void add_polygon_harmonics(std::span<const Point> vertices, const Lattice& lattice, int n1_max, int n2_max,
                           std::span<Complex> out);

/// The geometry of a painted cell, analysed once; its transform for any values of the regions.
/// Takes rectangles, ellipses and polygons (not rasters). In a 1D lattice only rectangles, whose
/// y extent is then ignored (they are lines along y).
class PaintedCell {
 public:
  PaintedCell(const Lattice& lattice, std::span<const PlanarShape> shapes);

  /// Σ-coefficients of the map with value `background` outside all shapes and shape_values[k] on
  /// the visible part of shape k: χ̂(n) for |n1| ≤ n1_max, |n2| ≤ n2_max (n2_max = 0 in 1D), laid
  /// out as (n1 + n1_max)·(2 n2_max + 1) + n2 + n2_max.
  [[nodiscard]] std::vector<Complex> harmonics(Complex background, std::span<const Complex> shape_values, int n1_max,
                                               int n2_max) const;

  /// The region painted at p: the index of the last shape covering p (periodically), −1 for the
  /// background, −2 outside the closed unit cell.
  [[nodiscard]] int region_at(Point p) const;

  /// Number of boundary pieces that separate different regions (for diagnostics and tests).
  [[nodiscard]] std::size_t piece_count() const { return pieces_.size(); }

  struct Region {
    bool ellipse = false;
    std::vector<Point> vertices;  // polygon, counter-clockwise
    Point center;                 // ellipse
    double a = 0, b = 0, cos_rot = 1, sin_rot = 0;
  };
  struct Piece {
    bool arc = false;
    bool full = false;   // a whole, uncut ellipse
    Point a, b;          // segment ends
    int ellipse = -1;    // index into ellipses_ (arcs)
    double t0 = 0, t1 = 0;
    int left = -1, right = -1;  // regions on either side (−2 outside the cell, −1 background)
  };

 private:
  double lx_, ly_;
  std::vector<Region> regions_;       // one per shape, shifted so its bounding-box centre is in the cell
  std::vector<std::array<double, 4>> boxes_;  // per region: x0, x1, y0, y1, padded (region_at's quick reject)
  std::vector<Region> ellipses_;      // ellipse images that bound pieces
  std::vector<Piece> pieces_;
};

/// The exact transform of a raster's pixel map (see Raster), same layout as PaintedCell::harmonics.
/// values[i] is the value of materials[i]; pixels with index −1 take `background`.
std::vector<Complex> raster_harmonics(const Lattice& lattice, const Raster& raster, Complex background,
                                      std::span<const Complex> values, int n1_max, int n2_max);

/// The harmonics of the piecewise-constant map f(ε(x, y)) of a slice at `wavelength`: the same
/// exact transforms with each region's value f(ε_region), for |n_i| ≤ n_i_max (layout of
/// PaintedCell::harmonics). Rasters must be alone in their slice.
std::vector<Complex> material_harmonics(const Lattice& lattice, const SliceContent& slice, double wavelength,
                                        const std::function<Complex(Complex)>& f, int n1_max, int n2_max);

/// The contrast harmonics χ̂ = FT[ε/ε1 − 1] of a slice at `wavelength` in the kernel layout above
/// (n_max = 2M). Rasters must be alone in their slice.
std::vector<Complex> contrast_harmonics(const Lattice& lattice, const SliceContent& slice, double wavelength,
                                        Complex superstrate_permittivity, int m1, int m2);

}  // namespace gratingsim::physics
