#pragma once
// The normal-vector-field formulation (docs/normal-vector.md): its convolution problem and
// its kernels per slice.
//
// Unknown F (continuous across every edge), background ε1 (the superstrate), unit in-plane field n:
//     J = C F,  C = χ I + β n nᵀ,  β = 2 − ε1/ε − ε/ε1;     E = M F = F + D,  D = γ n nᵀ F,  γ = ε1/ε − 1.
// Per slice and right-hand side the convolution engine computes, from the inputs F_x, F_y, F_z:
//   2D (K = 7: k0 χ, k1 C_xx, k2 C_xy, k3 C_yy, k4 γn_x², k5 γn_xn_y, k6 γn_y²; P = 5):
//     o0 J_x = C_xx⊛F_x + C_xy⊛F_y, o1 J_y = C_xy⊛F_x + C_yy⊛F_y, o2 J_z = χ⊛F_z,
//     o3 D_x = γn_x²⊛F_x + γn_xn_y⊛F_y, o4 D_y = γn_xn_y⊛F_x + γn_y²⊛F_y;
//   1D (n = x̂; K = 3: k0 χ, k1 C_xx = 1 − ε1/ε, k2 γ; P = 4): J_x = C_xx⊛F_x, J_y = χ⊛F_y,
//     J_z = χ⊛F_z, D_x = γ⊛F_x.
//   1D tilted (n = (n_x, 0, n_z); K = 7: k0 χ, k1 C_xx, k2 C_xz, k3 C_zz, k4 γn_x², k5 γn_xn_z, k6 γn_z²;
//     P = 5): J_x = C_xx⊛F_x + C_xz⊛F_z, J_y = χ⊛F_y, J_z = C_xz⊛F_x + C_zz⊛F_z,
//     o3 D_x = γn_x²⊛F_x + γn_xn_z⊛F_z, o4 D_z = γn_xn_z⊛F_x + γn_z²⊛F_z.
//   2D tilted (n = (n_x, n_y, n_z); K = 12: k0..k5 C_xx, C_xy, C_xz, C_yy, C_yz, C_zz, k6..k11 γ n_i n_j
//     in the same order; P = 6, 18 terms): J_i = Σ_j C_ij⊛F_j, o3..o5 D_i = Σ_j γn_in_j⊛F_j.
// Outputs 0..2 are J; outputs from 3 on are the components of D in increasing axis order, the axes being
// those the D outputs read (n nᵀ is symmetric): d_axes().
// Kernels are in the engine's layout (convolution.hpp), |n_i| ≤ 2M_i, block k of a slice = kernel k.
//
// 1D gratings: C_xx and γ are piecewise constant in x; their coefficients are the exact transforms
// of shape_functions.hpp with the region values 1 − ε1/ε_r and ε1/ε_r − 1.
// 1D gratings with sloped walls (trapezoid lines, SliceContent::wall_slopes): a slice's walls are
// vertical steps of a wall that is not, and across a sloped wall it is the field along its true normal
// (1, 0, −dx/dz)/|·| whose D is continuous, so E_z jumps there and χ ⊛ E_z converges like 1/M
// (validation/results/tilted-normal-cpu.txt). The tilted field n = (cos φ, 0, sin φ) takes φ = −atan(dx/dz)
// on every wall and φ linear in x between neighbouring walls; its kernels are exact closed forms.
// 2D gratings: normal_field.cpp builds n on a raster (construction stated there): exact for a slice
// holding one ellipse (or circle), the structure tensor of the area fractions otherwise. A slice holding
// one sloped shape alone (a tapered ellipse, a sloped polygon, a trapezoid line) tilts that in-plane
// field n̂ out of the plane, n ∝ (n̂, t), with t = −(the wall's outward speed dr/dz) on the wall (its true
// normal) and t → 0 where no wall is near (step 5 there); a slice of several circles, some tapered, takes
// each circle's radial field tilted by its own wall's slope in that circle's Voronoi cell (step 5″); other
// sloped slices keep in-plane fields.
#include <complex>
#include <memory>
#include <string_view>
#include <vector>

#include "convolution/convolution.hpp"
#include "physics/shape_functions.hpp"

namespace gratingsim::physics {

/// How the contrast current is computed: the normal-vector field (docs/normal-vector.md, the default) or
/// Laurent's rule J = χ ⊛ E on the field E itself (docs/formulation.md §5, the scalar convolution).
enum class Formulation { normal_vector, laurent };
std::string_view to_string(Formulation formulation);  ///< "normal-vector" / "laurent"
/// Parses "normal-vector" or "laurent"; throws InvalidArgument otherwise.
Formulation parse_formulation(std::string_view name);

/// The convolution problem of one slice group: Q = 3 inputs (F_x, F_y, F_z), the pattern above
/// (1D: K = 3, P = 4; 1D tilted: K = 7, P = 5; 2D: K = 7, P = 5; 2D tilted: K = 12, P = 6). Sizes (n1,
/// n2, slices, per_slice = right-hand sides) are the caller's. tilted: for structures with sloped walls
/// (discretisation.hpp's sloped_walls()).
conv::Problem normal_vector_problem(bool one_dimensional, bool tilted = false);

/// The field components that a pattern's outputs 3, 4, ... add to (E = F + D), as a bit mask (bit i:
/// D_i present, at output 3 + the number of lower bits set): 0 for Laurent's scalar problem, 0b001 for
/// 1D, 0b101 for 1D tilted, 0b011 for 2D, 0b111 for 2D tilted.
/// z_operator.hpp's d_output() finds D_i's output.
unsigned d_axes(const conv::Problem& problem);

/// Pixels per axis of the raster on which 2D normal fields are built when the caller gives none: the
/// smallest power of two ≥ 8·(4·max(M1, M2) + 1), at least 256.
int default_normal_field_resolution(int m1, int m2);

/// The K kernels of one slice at `wavelength`, concatenated (kernel k at k·(4M1+1)(4M2+1)).
/// resolution: raster pixels per axis for 2D slices with shapes (0: the default above); unused in 1D.
/// tilted: the tilted pattern's kernels (1D: seven, needed for slices with sloped walls; 2D: twelve).
std::vector<Complex> normal_vector_kernels(const Lattice& lattice, const SliceContent& slice, double wavelength,
                                           Complex superstrate_permittivity, int m1, int m2, int resolution = 0,
                                           bool tilted = false);

/// The geometry-only part of a 2D slice's normal field: per region r (0 the slice background, 1 + k
/// shape k, or 1 + k a raster's material k) and ij ∈ {xx, xy, yy} (components = 3), or {xx, xy, yy, xz,
/// yz, zz} for a tilted field (components = 6), the coefficients of a_r n_i n_j (a_r the region's
/// indicator) for |n_i| ≤ n_i_max, at [(r·components + ij)·size + (n1 + n1_max)(2n2_max+1) + n2 +
/// n2_max]. Cached process-wide by geometry (shapes, wall slopes where tilted, lattice, range,
/// resolution), up to 1 GiB, least recently used out: a sweep's later wavelengths reuse every slice's; threads
/// asking for one geometry at once share one computation (the later ones wait for it).
/// tilted: tilt the field where tilts_normal_field() says (components = 6 there, 3 elsewhere).
struct RegionNormalCoefficients {
  int regions = 0, components = 3, n1_max = 0, n2_max = 0, resolution = 0;
  std::vector<Complex> values;
  [[nodiscard]] std::size_t size() const { return std::size_t(2 * n1_max + 1) * (2 * n2_max + 1); }
  [[nodiscard]] const Complex* at(int region, int ij) const { return values.data() + (region * components + ij) * size(); }
};
std::shared_ptr<const RegionNormalCoefficients> region_normal_coefficients(const Lattice& lattice, const SliceContent& slice,
                                                           int n1_max, int n2_max, int resolution, bool tilted = false);
/// Empties region_normal_coefficients' cache: a benchmark's repeated solve then pays the normal fields as a
/// call with a new geometry does (a fit's step).
void clear_normal_field_cache();

/// Whether the 2D field of `slice` is tilted: a lone rectangle, ellipse or polygon with sloped walls, or
/// several circles, some with sloped walls, each inside its cell of the Voronoi diagram of their centres
/// (normal_field.cpp, step 5″).
bool tilts_normal_field(const Lattice& lattice, const SliceContent& slice);

/// The unit field's n n^T on the raster (for tests and diagnostics): row-major iy slow, pixel centres
/// (−Λx/2 + (ix + ½)Λx/R, −Λy/2 + (iy + ½)Λy/R), maps xx, xy, yy, and xz, yz, zz where tilted (else
/// empty). The field the solver uses (exact for a lone ellipse, normal_field.cpp; tilted where
/// tilts_normal_field and `tilted`); with exact_where_possible = false always the in-plane
/// structure-tensor construction.
struct NormalFieldRaster {
  int resolution = 0;
  std::vector<double> xx, xy, yy, xz, yz, zz;
};
NormalFieldRaster normal_field_raster(const Lattice& lattice, const SliceContent& slice, int resolution,
                                      bool exact_where_possible = true, bool tilted = false);

}  // namespace gratingsim::physics
