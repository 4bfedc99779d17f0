// The normal-vector formulation's kernels (normal_field.hpp).
//
// 2D normal fields, built numerically on a raster of the unit cell (one construction for every
// shape: rectangles, ellipses, polygons, sloped polygons, overlapping shapes where the later one
// wins, rasters):
//  1. Raster: R × R pixels over the cell (R a power of two, default_normal_field_resolution(), at
//     least 8 pixels per shortest period of the 4M+1 kernel harmonics), pixel (ix, iy) centred at
//     (−Λx/2 + (ix + ½)Λx/R, −Λy/2 + (iy + ½)Λy/R). Area fraction a_r of every region r per pixel:
//     the painted map (PaintedCell::region_at, or the raster's pixel lookup) at the pixel's corners;
//     pixels whose corners disagree are supersampled on 8 × 8 sub-pixel centres.
//  2. Edge orientation: the structure tensor T = Σ_r ∇ã_r ∇ã_rᵀ of the area fractions, summed per material
//     first (material_classes: regions of one named material meet at no material edge), smoothed by
//     a Gaussian of width σ = 2 pixels (ã_r = G_σ * a_r, gradients spectral), itself smoothed by
//     G_ρ + w·G_ρw: ρ = 0.04·min(Λx, Λy) blends orientations near corners and carries them a few ρ
//     into each region; the far term (ρw = 0.25·min(Λx, Λy), w = 10⁻³) fills the rest of the cell
//     with the orientation of the nearest edges. All smoothing is spectral (periodic, isotropic in
//     physical units, so the field is covariant under the lattice's mirror and 90° symmetries).
//  3. n = the principal eigenvector of T: n nᵀ = ½[[1 + c, s], [s, 1 − c]], (c, s) = (Txx − Tyy,
//     2Txy)/|(Txx − Tyy, 2Txy)|. Only n nᵀ enters the formulation, so the sign of n is irrelevant
//     (no orientation is needed). On a straight edge away from corners T ∝ n nᵀ exactly. Where T
//     vanishes (no edge anywhere) n = x̂.
//  2′. A slice holding a single polygon (every slice of a sloped polygon; a sloped or period-spanning
//     rectangle) builds T from its exact edges instead: T = (G_ρ + w G_ρw) * Σ_e n_e n_eᵀ δ_e (δ_e the
//     line measure on edge e), its Fourier series exact per segment, i.e. the σ → 0 limit of step 2
//     without the raster's diagonal gradients at corners (which bias the field there by O(σ) in step 2).
//  2″. A slice holding a single upright rectangle narrower than the periods (or a four-vertex polygon that
//     is one) takes the nearest-edge field
//     instead of steps 1–4: x̂ where the nearest boundary point (of the rectangle or an image) lies on a
//     vertical edge, ŷ on a horizontal one, and in the corner gaps x̂ below the corner's outward diagonal
//     (rectangle_field_is_x). It is x̂ or ŷ on polygons (cut by the 45° lines through the corners), so
//     its coefficients are exact polygon transforms (rectangle_region_coefficients), with no raster.
//     Step 2′ gives an axis-aligned rectangle a binary field too (T_xy = 0), whose switch from x̂ to ŷ
//     follows the smoothed tensors' Txx = Tyy curve instead of these straight lines.
//  3′. A slice holding a single ellipse (or circle) takes the exact
//     field instead of steps 2–3: n ∥ ∇[(u/a)² + (v/b)²] in the ellipse's axes, measured from the
//     nearest periodic image of its centre (radial for a circle; ellipse_normal_field()).
//  4′. A slice holding a single circle (tapered too): the disk's coefficients in closed form (Bessel
//     functions, circle_region_coefficients()), the background's the whole cell's minus the disk's.
//  4. Coefficients: the pixel-exact transforms (sinc per pixel) of a_r n_i n_j per region and
//     ij ∈ {xx, xy, yy}, by 2D FFT (FFTW through conv::GridDft), kept for |n_i| ≤ 2M_i.
//     They depend on geometry only and are cached process-wide; per wavelength the kernels are sums
//     over regions with β_r = 2 − ε1/ε_r − ε_r/ε1 and γ_r = ε1/ε_r − 1 (both constant per region):
//     C_ij = χ δ_ij + Σ_r β_r coef_r,ij, γ n_i n_j = Σ_r γ_r coef_r,ij. χ keeps its exact transform.
//  5. Tilt (a slice holding one sloped shape alone, tilts_normal_field(); problems with sloped walls):
//     the wall of the shape moves outward at speed τ = dr/dz (SliceContent::wall_slopes: uniform for a
//     sloped polygon or tapered circle, (a′b cos²θ + b′a sin²θ)/|(b cos θ, a sin θ)| at parameter θ of a
//     tapered ellipse), so its true normal is (n_out, −τ)/√(1 + τ²) (n_out the outward in-plane normal;
//     the 1D tilted field's (1, 0, −dx/dz) in 1D). Three line measures of the boundary are smoothed by
//     the same filter as T (F = G_ρ + w G_ρw): v1 = F * (n_out δ), vτ = F * (τ n_out δ), μ = F * δ
//     (|v1| ≤ μ everywhere; v1 = μ n_out on a straight wall away from corners), their Fourier series
//     exact per polygon edge and by the 256-point trapezoidal rule on an ellipse (spectrally accurate),
//     kept where F > 1e-17. With N = n̂n̂ᵀ the in-plane field of steps 2–3′ (its sign is free) and
//     u = N v1/μ (along n̂, |u| ≤ 1), the tilt is
//       b = −g(|u|) N vτ/μ,  g(s) = f(s/w0)/s,  f(x) = 1 − (1 − x)³ for x < 1, 1 beyond,  w0 = 0.9,
//       n nᵀ = [[N, b], [bᵀ, |b|²]]/(1 + |b|²)   (b ∥ n̂: n ∝ (n̂, b·n̂), a unit field).
//     Near a wall |u| ≥ w0 (≥ 0.98 on the walls of the configs' circles), so b = −τ n_out there exactly
//     (the curvature's shrinking of vτ and v1 cancels for uniform τ); where walls cancel (the shape's
//     centre, midway between images) u → 0 and the field turns smoothly back into the plane (f(0) = 0,
//     b ≈ −3 N vτ/(w0 μ), no sign jump as n̂ flips). The coefficients are then step 4's, six maps per
//     region.
//  5′. A lone circle keeps step 4′'s closed forms: its field is tilted by a constant angle everywhere,
//     n = (ρ̂, −τ)/√(1 + τ²) (circle_region_coefficients).
//  5″. Several circles, some tapered, each inside its cell of the Voronoi diagram of all their centres and
//     periodic images (voronoi_circles: every pair's centres at least twice the larger radius apart): in the
//     Voronoi cell of circle k, n = (ρ̂_k, −τ_k)/√(1 + τ_k²), ρ̂_k radial from its centre, so every wall takes
//     its true normal as a lone tapered circle's does; the disks' coefficients in closed form, the whole
//     cell's by the raster (voronoi_circle_coefficients). Untilted slices of several shapes keep steps 1–4.
// A slice without shapes takes n = x̂ (any constant unit field is exact there).
// The field converges as R grows (validation/physics/test_normal_field.cpp measures it).
#include "physics/normal_field.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "convolution/cpu_fftw.hpp"
#include "core/error.hpp"

namespace gratingsim::physics {
namespace {

constexpr double pi = std::numbers::pi;
constexpr Complex I{0.0, 1.0};
constexpr int supersampling = 8;                  // sub-pixels per axis in pixels crossed by an edge
constexpr double gradient_smoothing_pixels = 2;   // σ
constexpr double tensor_smoothing = 0.04;         // ρ / min(Λx, Λy)
constexpr double far_smoothing = 0.25;            // ρw / min(Λx, Λy)
constexpr double far_weight = 1e-3;               // w
constexpr double tilt_saturation = 0.9;           // w0 of step 5
constexpr int ellipse_wall_points = 256;          // trapezoidal rule on an ellipse's boundary (step 5)
/// Bytes of region coefficients kept across problems (every slice of a sweep's structure, so that
/// later wavelengths only combine them: problem case 4's 256 slices take 0.4 GiB).
constexpr std::size_t cache_bytes = std::size_t(1) << 30;

double sinc(double t) { return std::abs(t) < 1e-8 ? 1.0 : std::sin(pi * t) / (pi * t); }

using Grid = conv::GridBuffer;

/// FFTW's plans for R × R grids keeping the x frequencies |kx| ≤ kept (conv::GridDft), made once per
/// shape and shared by every thread (their transforms are const). Never destroyed: the plans must not
/// outlive FFTW's planner lock, a static of the convolution library.
const conv::GridDft& grid_dft(int r, int kept) {
  static std::mutex mutex;
  static auto* plans = new std::map<std::pair<int, int>, std::unique_ptr<conv::GridDft>>;
  const std::lock_guard lock(mutex);
  auto& plan = (*plans)[{r, kept}];
  if (!plan) plan = std::make_unique<conv::GridDft>(r, kept);
  return *plan;
}

/// In-place 2D DFT of an R × R row-major grid: forward e^{−2πi jk/R} unscaled, inverse scaled by 1/R².
void fft2(Grid& grid, int r, bool inverse) {
  if (!inverse) {
    grid_dft(r, 0).forward(grid);
    return;
  }
  grid_dft(r, 0).inverse(grid);
  for (Complex& v : grid) v /= double(r) * r;
}

/// The forward 2D DFT of an R × R grid at the x frequencies |kx| ≤ kept only (the other columns hold
/// row transforms alone).
void fft2_kept(Grid& grid, int r, int kept) { grid_dft(r, kept).forward_kept(grid); }

/// The inverse 2D DFT (scaled by 1/R²) of an R × R spectrum that is zero beyond |kx| ≤ kept.
void inverse_fft2_kept(Grid& grid, int r, int kept) {
  grid_dft(r, kept).inverse_kept(grid);
  for (Complex& v : grid) v /= double(r) * r;
}

/// Signed frequency of FFT index k; 0 at the Nyquist index where a derivative must stay real.
int signed_frequency(int k, int r) { return k < r / 2 ? k : k - r; }

struct Regions {
  int count = 0;
  std::function<int(Point)> at;  // region 0 background, 1 + k shape (or raster material) k
};

Regions regions_of(const Lattice& lattice, const SliceContent& slice) {
  Regions regions;
  const double lx = lattice.period_x, ly = lattice.period_y;
  const auto clamp_to_cell = [lx, ly](Point p) {
    return Point{std::clamp(p.x, -lx / 2, lx / 2), std::clamp(p.y, -ly / 2, ly / 2)};
  };
  if (const auto* raster = std::get_if<Raster>(&slice.shapes.front())) {
    GS_EXPECTS(slice.shapes.size() == 1, "a raster must be the only shape of its slice");
    GS_EXPECTS(raster->nx > 0 && raster->ny > 0 && raster->pixels.size() == std::size_t(raster->nx) * raster->ny,
            "raster: needs nx, ny > 0 and nx·ny pixels");
    regions.count = 1 + int(raster->materials.size());
    regions.at = [raster, lx, ly](Point p) {
      const int ix = std::clamp(int(std::floor((p.x / lx + 0.5) * raster->nx)), 0, raster->nx - 1);
      const int iy = std::clamp(int(std::floor((p.y / ly + 0.5) * raster->ny)), 0, raster->ny - 1);
      return raster->pixels[std::size_t(iy) * raster->nx + ix] + 1;
    };
    return regions;
  }
  auto cell = std::make_shared<PaintedCell>(lattice, slice.shapes);
  regions.count = 1 + int(slice.shapes.size());
  regions.at = [cell, clamp_to_cell](Point p) { return cell->region_at(clamp_to_cell(p)) + 1; };
  return regions;
}

/// Per region (0 the background, 1 + k shape or raster material k): its material.
std::vector<const Material*> region_materials(const SliceContent& slice) {
  std::vector<const Material*> materials{&slice.background};
  if (const auto* raster = std::get_if<Raster>(&slice.shapes.front())) {
    for (const Material& m : raster->materials) materials.push_back(&m);
    return materials;
  }
  for (const PlanarShape& s : slice.shapes)
    std::visit(
        [&](const auto& shape) {
          using T = std::decay_t<decltype(shape)>;
          if constexpr (!std::is_same_v<T, Raster>) materials.push_back(&shape.material);
        },
        s);
  return materials;
}

/// Per region (0 the background, 1 + k shape or raster material k): the first region of the same material, by name
/// (a case names each material once, io/case.cpp; unnamed materials are each their own). The boundary between two
/// regions of one material is no material edge: the structure tensor reads the area fractions summed per class,
/// so that a cross drawn as two overlapping rectangles, or a shape cut at the cell's edge into two, has the
/// union's field (an audit in session 36: two abutting rectangles differed from one by 0.7° in Ψ at M = 3).
std::vector<int> material_classes(const SliceContent& slice) {
  const std::vector<const Material*> materials = region_materials(slice);
  std::vector<int> classes(materials.size());
  for (std::size_t r = 0; r < materials.size(); ++r) {
    classes[r] = int(r);
    const std::string& name = materials[r]->name();
    if (name.empty()) continue;
    for (std::size_t q = 0; q < r; ++q)
      if (materials[q]->name() == name) {
        classes[r] = classes[q];
        break;
      }
  }
  return classes;
}

/// The area fractions `a` (per region) summed per material class (material_classes), classes in order.
std::vector<std::vector<double>> by_material(const std::vector<std::vector<double>>& a, const std::vector<int>& classes) {
  std::vector<std::vector<double>> sums;
  std::vector<std::size_t> place(classes.size());
  for (std::size_t reg = 0; reg < a.size(); ++reg) {
    const std::size_t c = std::size_t(classes[reg]);
    if (c == reg) {
      place[reg] = sums.size();
      sums.push_back(a[reg]);
      continue;
    }
    std::vector<double>& sum = sums[place[c]];
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += a[reg][i];
  }
  return sums;
}

std::vector<Complex> region_permittivities(const SliceContent& slice, double wavelength) {
  std::vector<Complex> eps;
  for (const Material* m : region_materials(slice)) eps.push_back(m->permittivity(wavelength));
  return eps;
}

/// Area fractions a_r per pixel, [r][iy·R + ix]. Rows in parallel where the caller is not in a parallel
/// region already (one slice geometry alone); each pixel is summed in the same order either way.
std::vector<std::vector<double>> area_fractions(const Lattice& lattice, const Regions& regions, int r) {
  const double lx = lattice.period_x, ly = lattice.period_y, hx = lx / r, hy = ly / r;
  std::vector<int> corner(std::size_t(r + 1) * (r + 1));
#pragma omp parallel for schedule(static)
  for (int iy = 0; iy <= r; ++iy)
    for (int ix = 0; ix <= r; ++ix) corner[std::size_t(iy) * (r + 1) + ix] = regions.at({-lx / 2 + ix * hx, -ly / 2 + iy * hy});
  std::vector<std::vector<double>> a(regions.count, std::vector<double>(std::size_t(r) * r, 0.0));
  constexpr double sub = 1.0 / (supersampling * supersampling);
#pragma omp parallel for schedule(dynamic, 8)
  for (int iy = 0; iy < r; ++iy)
    for (int ix = 0; ix < r; ++ix) {
      const std::size_t pixel = std::size_t(iy) * r + ix;
      const int c = corner[std::size_t(iy) * (r + 1) + ix];
      if (c == corner[std::size_t(iy) * (r + 1) + ix + 1] && c == corner[std::size_t(iy + 1) * (r + 1) + ix] &&
          c == corner[std::size_t(iy + 1) * (r + 1) + ix + 1]) {
        a[c][pixel] = 1;
        continue;
      }
      for (int sy = 0; sy < supersampling; ++sy)
        for (int sx = 0; sx < supersampling; ++sx) {
          const Point p{-lx / 2 + (ix + (sx + 0.5) / supersampling) * hx, -ly / 2 + (iy + (sy + 0.5) / supersampling) * hy};
          a[regions.at(p)][pixel] += sub;
        }
    }
  return a;
}

/// The single ellipse of `slice` when its exact field applies (one Ellipse; shapes never overlap their
/// periodic images, PaintedCell refuses that), else null.
const Ellipse* lone_ellipse(const SliceContent& slice) {
  return slice.shapes.size() == 1 ? std::get_if<Ellipse>(&slice.shapes.front()) : nullptr;
}

/// The vertices of the single rectangle or polygon of `slice` (step 2′; an upright rectangle narrower than the
/// periods takes step 2″ where it is not tilted), else empty.
std::vector<Point> lone_polygon(const SliceContent& slice) {
  if (slice.shapes.size() != 1) return {};
  if (const auto* p = std::get_if<Polygon>(&slice.shapes.front())) return p->vertices;
  if (const auto* b = std::get_if<Rectangle>(&slice.shapes.front())) {
    const double hx = b->width_x / 2, hy = b->width_y / 2, cx = b->center.x, cy = b->center.y;
    return {{cx - hx, cy - hy}, {cx + hx, cy - hy}, {cx + hx, cy + hy}, {cx - hx, cy + hy}};
  }
  return {};
}

/// A field given per pixel as `at(dx, dy)` → (n_x², n_x n_y, n_y²), (dx, dy) the pixel centre's offset from
/// `centre` taken to the nearest periodic image.
template <class Field>
NormalFieldRaster field_about(const Lattice& lattice, Point centre, int r, Field at) {
  const double lx = lattice.period_x, ly = lattice.period_y;
  NormalFieldRaster out;
  out.resolution = r;
  const std::size_t n = std::size_t(r) * r;
  out.xx.resize(n);
  out.xy.resize(n);
  out.yy.resize(n);
  for (int iy = 0; iy < r; ++iy)
    for (int ix = 0; ix < r; ++ix) {
      double dx = -lx / 2 + (ix + 0.5) * lx / r - centre.x, dy = -ly / 2 + (iy + 0.5) * ly / r - centre.y;
      dx -= lx * std::round(dx / lx);
      dy -= ly * std::round(dy / ly);
      const std::size_t i = std::size_t(iy) * r + ix;
      std::tie(out.xx[i], out.xy[i], out.yy[i]) = at(dx, dy);
    }
  return out;
}

/// The exact field of a lone ellipse (header comment, step 3′): at every pixel centre p, with
/// d = p − centre taken to the nearest periodic image and (u, v) = d in the ellipse's own axes,
/// n ∥ ∇[(u/a)² + (v/b)²] ∝ R(θ) (u/a², v/b²), the normal of the scaled (homothetic) ellipse through p
/// (radial for a circle). At the centre itself n = x̂.
NormalFieldRaster ellipse_normal_field(const Lattice& lattice, const Ellipse& e, int r) {
  const double c = std::cos(e.rotation_deg * pi / 180), s = std::sin(e.rotation_deg * pi / 180);
  const double a2 = e.semi_axis_x * e.semi_axis_x, b2 = e.semi_axis_y * e.semi_axis_y;
  return field_about(lattice, e.center, r, [&](double dx, double dy) {
    const double u = c * dx + s * dy, v = -s * dx + c * dy;     // ellipse axes
    const double gu = u / a2, gv = v / b2;                      // ∇q/2 in those axes
    const double gx = c * gu - s * gv, gy = s * gu + c * gv;    // back in x, y
    const double g2 = gx * gx + gy * gy;
    return g2 > 0 ? std::tuple{gx * gx / g2, gx * gy / g2, gy * gy / g2} : std::tuple{1.0, 0.0, 0.0};
  });
}

/// The single upright rectangle of `slice` when its nearest-edge field applies (it leaves a gap to its
/// images along both axes), else nothing. A polygon of four vertices forming an axis-aligned rectangle
/// counts as one, so that the same geometry gets the same field however it is written.
std::optional<Rectangle> lone_rectangle(const Lattice& lattice, const SliceContent& slice) {
  if (slice.shapes.size() != 1) return std::nullopt;
  std::optional<Rectangle> b;
  if (const auto* r = std::get_if<Rectangle>(&slice.shapes.front())) b = *r;
  if (const auto* p = std::get_if<Polygon>(&slice.shapes.front()); p && p->vertices.size() == 4) {
    const auto& v = p->vertices;
    const auto [x0, x1] = std::minmax({v[0].x, v[1].x, v[2].x, v[3].x});
    const auto [y0, y1] = std::minmax({v[0].y, v[1].y, v[2].y, v[3].y});
    const auto corner = [&](const Point& q) {
      return (q.x == x0 || q.x == x1) && (q.y == y0 || q.y == y1);
    };
    // Four distinct corners of the box (a simple polygon never repeats a vertex), each edge along an axis.
    bool axis_aligned = true;
    for (std::size_t i = 0; i < 4; ++i)
      axis_aligned = axis_aligned && corner(v[i]) && (v[i].x == v[(i + 1) % 4].x || v[i].y == v[(i + 1) % 4].y);
    if (axis_aligned && x1 > x0 && y1 > y0) {
      b.emplace();
      b->center = {0.5 * (x0 + x1), 0.5 * (y0 + y1)};
      b->width_x = x1 - x0;
      b->width_y = y1 - y0;
      b->material = p->material;
    }
  }
  if (b && b->width_x < lattice.period_x && b->width_y < lattice.period_y) return b;
  return std::nullopt;
}

/// Whether the nearest-edge field of rectangle `b` is x̂ at offset (u, v) from its centre, taken to the
/// nearest periodic image: inside, where the vertical edges are nearer than the horizontal ones; in the
/// gaps beside it along x (y), x̂ (ŷ); in the corner gaps, where the nearest boundary point is a corner,
/// x̂ below the corner's outward diagonal (nearer the vertical edge's line than the horizontal one's).
bool rectangle_field_is_x(const Rectangle& b, double u, double v) {
  const double a = std::abs(u) - b.width_x / 2, c = std::abs(v) - b.width_y / 2;  // signed distances outside
  if (a <= 0 && c <= 0) return -a < -c;
  if (c <= 0) return true;
  if (a <= 0) return false;
  return c < a;
}

/// The nearest-edge field of a lone rectangle on the raster (binary: n = x̂ or ŷ, n_x n_y = 0).
NormalFieldRaster rectangle_normal_field(const Lattice& lattice, const Rectangle& b, int r) {
  return field_about(lattice, b.center, r, [&](double dx, double dy) {
    return rectangle_field_is_x(b, dx, dy) ? std::tuple{1.0, 0.0, 0.0} : std::tuple{0.0, 0.0, 1.0};
  });
}

/// The part of convex polygon `v` where a·x + b·y < c (Sutherland–Hodgman against one line); empty when
/// nothing of area is left.
std::vector<Point> clip_half_plane(const std::vector<Point>& v, double a, double b, double c) {
  std::vector<Point> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const Point p = v[i], q = v[(i + 1) % v.size()];
    const double fp = a * p.x + b * p.y - c, fq = a * q.x + b * q.y - c;
    if (fp < 0) out.push_back(p);
    if ((fp < 0) != (fq < 0) && fp != fq) {
      const double t = fp / (fp - fq);
      out.push_back({p.x + t * (q.x - p.x), p.y + t * (q.y - p.y)});
    }
  }
  return out.size() >= 3 ? out : std::vector<Point>{};
}

/// Zeroed coefficients of `regions` regions × `components` maps for |n_i| ≤ n_i_max, from a raster of r pixels.
std::shared_ptr<RegionNormalCoefficients> zeroed_coefficients(int regions, int components, int n1_max, int n2_max, int r) {
  auto out = std::make_shared<RegionNormalCoefficients>();
  out->regions = regions;
  out->components = components;
  out->n1_max = n1_max;
  out->n2_max = n2_max;
  out->resolution = r;
  out->values.assign(std::size_t(regions) * components * out->size(), 0.0);
  return out;
}

/// The region coefficients of a lone rectangle's nearest-edge field (rectangle_field_is_x), exactly: the
/// field is x̂ or ŷ on polygons (per quadrant about the centre: inside, the part nearer the vertical edge,
/// cut off by the 45° line from the corner; the gap beside it along x; the part of the corner gap below
/// the corner's outward diagonal), so coef_r,xx is the sum of their transforms, coef_r,xy = 0 and
/// coef_r,yy the region's indicator minus coef_r,xx. No raster.
std::shared_ptr<const RegionNormalCoefficients> rectangle_region_coefficients(const Lattice& lattice, const Rectangle& b,
                                                                              int n1_max, int n2_max, int r) {
  const auto out = zeroed_coefficients(2, 3, n1_max, n2_max, r);
  const std::size_t size = out->size();
  const auto map = [&](int region, int ij) { return std::span<Complex>(out->values).subspan((region * 3 + ij) * size, size); };
  const std::span<Complex> background_xx = map(0, 0), background_yy = map(0, 2), inside_xx = map(1, 0),
                           inside_yy = map(1, 2);
  const double hx = b.width_x / 2, hy = b.width_y / 2, lx = lattice.period_x / 2, ly = lattice.period_y / 2;
  const auto box = [](double x0, double x1, double y0, double y1) {
    return std::vector<Point>{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}};
  };
  // Quadrant u, v ≥ 0 about the centre; the x̂ parts: inside where hx − u < hy − v, the gap beside, the corner
  // gap where v − hy < u − hx.
  const std::vector<Point> inside = clip_half_plane(box(0, hx, 0, hy), -1, 1, hy - hx);
  const std::vector<Point> beside = box(hx, lx, 0, hy);
  const std::vector<Point> corner = clip_half_plane(box(hx, lx, hy, ly), -1, 1, hy - hx);
  for (const double su : {-1.0, 1.0})
    for (const double sv : {-1.0, 1.0}) {
      const auto placed = [&](std::vector<Point> v) {
        for (Point& p : v) p = {b.center.x + su * p.x, b.center.y + sv * p.y};
        return v;
      };
      if (!inside.empty()) add_polygon_harmonics(placed(inside), lattice, n1_max, n2_max, inside_xx);
      add_polygon_harmonics(placed(beside), lattice, n1_max, n2_max, background_xx);
      if (!corner.empty()) add_polygon_harmonics(placed(corner), lattice, n1_max, n2_max, background_xx);
    }
  std::vector<Complex> indicator(size, 0.0);
  add_polygon_harmonics(box(b.center.x - hx, b.center.x + hx, b.center.y - hy, b.center.y + hy), lattice, n1_max,
                        n2_max, indicator);
  const std::size_t zero = std::size_t(n1_max) * (2 * n2_max + 1) + n2_max;
  for (std::size_t k = 0; k < size; ++k) {
    inside_yy[k] = indicator[k] - inside_xx[k];
    background_yy[k] = (k == zero ? 1.0 : 0.0) - indicator[k] - background_xx[k];
  }
  return out;
}

/// The harmonics |kx| ≤ c1, |ky| ≤ c2 where the smoothing filter G_ρ + w G_ρw exceeds e^{−40.5} ≈ 2.6e-18
/// (ρ|G| ≤ 9 along each axis): the series of steps 2, 2′ and 5 are built and inverse-transformed there only.
std::pair<int, int> filter_extent(const Lattice& lattice, int r) {
  const double rho = tensor_smoothing * std::min(lattice.period_x, lattice.period_y);
  return {std::min(r / 2 - 1, int(std::ceil(9 * lattice.period_x / (2 * pi * rho)))),
          std::min(r / 2 - 1, int(std::ceil(9 * lattice.period_y / (2 * pi * rho))))};
}

/// n nᵀ per pixel (steps 2 and 3 of the header comment).
/// `edges`: the lone polygon's vertices when the structure tensor is built from its exact edges (step 2′),
/// else null (the area fractions `a`).
NormalFieldRaster normal_field(const Lattice& lattice, const std::vector<std::vector<double>>& a, int r,
                               const std::vector<Point>* edges) {
  const double lx = lattice.period_x, ly = lattice.period_y;
  const std::size_t n = std::size_t(r) * r;
  const double sigma = gradient_smoothing_pixels * std::min(lx, ly) / r;
  const double rho = tensor_smoothing * std::min(lx, ly), rho_far = far_smoothing * std::min(lx, ly);
  std::vector<double> gx_of(r), gy_of(r), gx_d(r), gy_d(r);  // G components; derivative factors
  for (int k = 0; k < r; ++k) {
    gx_of[k] = 2 * pi * signed_frequency(k, r) / lx;
    gy_of[k] = 2 * pi * signed_frequency(k, r) / ly;
    gx_d[k] = k == r / 2 ? 0.0 : gx_of[k];
    gy_d[k] = k == r / 2 ? 0.0 : gy_of[k];
  }
  std::vector<double> txx(n, 0.0), txy(n, 0.0), tyy(n, 0.0);
  Grid grid(n), cross;
  const auto filter = [&](int kx, int ky) {  // G_ρ + w G_ρw, real and even
    const double g2 = gx_of[kx] * gx_of[kx] + gy_of[ky] * gy_of[ky];
    return std::exp(-0.5 * rho * rho * g2) + far_weight * std::exp(-0.5 * rho_far * rho_far * g2);
  };
  const auto [c1, c2] = filter_extent(lattice, r);
  const auto wrap = [r](int k) { return std::size_t(((k % r) + r) % r); };
  if (edges != nullptr) {
    // Step 2′: T = (G_ρ + w G_ρw) * Σ_e n_e n_eᵀ δ_e, the edge measure's Fourier series built exactly:
    // ∫_e e^{−ik·s} ds = L_e sinc(k·(p1 − p0)/2) e^{−ik·m_e} (m_e the midpoint), then evaluated at the
    // pixel centres x0 + j h (x0 = −Λ/2 + h/2) by the inverse DFT with the phase e^{ik·x0}.
    // (Overall scale is irrelevant: only the direction of T is used.)
    grid.assign(n, 0.0);
    cross.assign(n, 0.0);
    const double x0 = -lx / 2 + 0.5 * lx / r, y0 = -ly / 2 + 0.5 * ly / r;
    const std::size_t count = edges->size();
    const auto vertex = [&](std::size_t k) { return (*edges)[k % count]; };
    // An edge whose reverse is another edge moved by a lattice vector (a shape spanning a whole period,
    // e.g. a line drawn as a rectangle of width Λy) is no material edge: both are left out.
    const auto lattice_multiple = [](double d, double period) {
      return std::abs(d - period * std::round(d / period)) < 1e-12 * period;
    };
    const std::size_t row = std::size_t(2 * c1 + 1);
    std::vector<double> filtered(row * (2 * c2 + 1));  // the filter per kept harmonic, shared by every edge
    for (int j = -c2; j <= c2; ++j)
      for (int i = -c1; i <= c1; ++i) filtered[std::size_t(j + c2) * row + std::size_t(i + c1)] = filter(wrap(i), wrap(j));
    const auto on_image = [&](std::size_t e) {
      for (std::size_t f = 0; f < count; ++f) {
        const double dx = vertex(f).x - vertex(e + 1).x, dy = vertex(f).y - vertex(e + 1).y;
        if (f != e && lattice_multiple(dx, lx) && lattice_multiple(dy, ly) &&
            std::abs(vertex(f + 1).x - vertex(e).x - dx) < 1e-12 * lx &&
            std::abs(vertex(f + 1).y - vertex(e).y - dy) < 1e-12 * ly)
          return true;
      }
      return false;
    };
    for (std::size_t e = 0; e < count; ++e) {
      if (on_image(e)) continue;
      const Point p0 = vertex(e), p1 = vertex(e + 1);
      const double tx = p1.x - p0.x, ty = p1.y - p0.y, l2 = tx * tx + ty * ty;
      if (!(l2 > 0)) continue;
      const double length = std::sqrt(l2), mx = 0.5 * (p0.x + p1.x) - x0, my = 0.5 * (p0.y + p1.y) - y0;
      const Complex diagonal{ty * ty / l2, tx * tx / l2};  // (n_x², n_y²) with n = (t_y, −t_x)/L
      const double off_diagonal = -tx * ty / l2;
      for (int j = -c2; j <= c2; ++j)
        for (int i = -c1; i <= c1; ++i) {
          const std::size_t kx = wrap(i), ky = wrap(j), k = ky * r + kx;
          const double u = 0.5 * (gx_of[kx] * tx + gy_of[ky] * ty);
          const double sinc_u = std::abs(u) < 1e-12 ? 1.0 : std::sin(u) / u;
          const Complex w = length * sinc_u * filtered[std::size_t(j + c2) * row + std::size_t(i + c1)] *
                            std::polar(1.0, -(gx_of[kx] * mx + gy_of[ky] * my));
          grid[k] += w * diagonal;
          cross[k] += w * off_diagonal;
        }
    }
    inverse_fft2_kept(grid, r, c1);
    inverse_fft2_kept(cross, r, c1);
  }
  for (const auto& ar : a) {
    if (edges != nullptr) break;  // step 2′ built T already
    if (std::all_of(ar.begin(), ar.end(), [&](double v) { return v == ar[0]; })) continue;  // no edge
    for (std::size_t i = 0; i < n; ++i) grid[i] = ar[i];
    fft2(grid, r, false);
    // (∂x + i ∂y)(G_σ * a): both real gradients in one inverse transform.
    for (int ky = 0; ky < r; ++ky)
      for (int kx = 0; kx < r; ++kx) {
        const double g2 = gx_of[kx] * gx_of[kx] + gy_of[ky] * gy_of[ky];
        grid[std::size_t(ky) * r + kx] *= std::exp(-0.5 * sigma * sigma * g2) * (I * gx_d[kx] - gy_d[ky]);
      }
    fft2(grid, r, true);
    for (std::size_t i = 0; i < n; ++i) {
      const double gx = grid[i].real(), gy = grid[i].imag();
      txx[i] += gx * gx;
      txy[i] += gx * gy;
      tyy[i] += gy * gy;
    }
  }
  // Tensor smoothing with the filter: (Txx, Tyy) as one complex map, then Txy; the harmonics beyond the
  // filter's extent are dropped (the filter is below 2.6e-18 there).
  const auto smooth = [&](Grid& g) {
    fft2_kept(g, r, c1);
    for (int ky = 0; ky < r; ++ky)
      for (int kx = 0; kx < r; ++kx) {
        const int i = signed_frequency(kx, r), j = signed_frequency(ky, r);
        Complex& v = g[std::size_t(ky) * r + kx];
        v = std::abs(i) <= c1 && std::abs(j) <= c2 ? v * filter(kx, ky) : Complex(0);
      }
    inverse_fft2_kept(g, r, c1);
  };
  if (edges == nullptr) {
    for (std::size_t i = 0; i < n; ++i) grid[i] = {txx[i], tyy[i]};
    smooth(grid);
    cross.assign(txy.begin(), txy.end());
    smooth(cross);
  }
  NormalFieldRaster out;
  out.resolution = r;
  out.xx.resize(n);
  out.xy.resize(n);
  out.yy.resize(n);
  std::vector<double> h(n);
  double h_max = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = grid[i].real() - grid[i].imag(), e = 2 * cross[i].real();
    h[i] = std::sqrt(d * d + e * e);
    h_max = std::max(h_max, h[i]);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!(h[i] > 1e-12 * h_max)) {  // no edge anywhere (or a degenerate point at rounding level): x̂
      out.xx[i] = 1;
      out.xy[i] = out.yy[i] = 0;
      continue;
    }
    const double c = (grid[i].real() - grid[i].imag()) / h[i], s = 2 * cross[i].real() / h[i];
    out.xx[i] = 0.5 * (1 + c);
    out.xy[i] = 0.5 * s;
    out.yy[i] = 0.5 * (1 - c);
  }
  return out;
}

/// The boundary of a lone sloped shape (step 5) as straight segments (polygons, rectangles) or
/// quadrature points (ellipses), each with its outward unit normal and outward speed τ.
struct WallSegment {
  Point a, b, normal;
  double rate = 0;
};
struct WallPoint {
  Point p, normal;
  double rate = 0, length = 0;  // τ; the arc length the point stands for
};

void polygon_walls(std::vector<Point> v, double rate, std::vector<WallSegment>& out) {
  double area = 0;
  for (std::size_t i = 0, j = v.size() - 1; i < v.size(); j = i++) area += v[j].x * v[i].y - v[i].x * v[j].y;
  if (area < 0) std::reverse(v.begin(), v.end());  // counter-clockwise: the outward normal is (t_y, −t_x)/L
  for (std::size_t i = 0; i < v.size(); ++i) {
    const Point a = v[i], b = v[(i + 1) % v.size()];
    const double l = std::hypot(b.x - a.x, b.y - a.y);
    if (l > 0) out.push_back({a, b, {(b.y - a.y) / l, -(b.x - a.x) / l}, rate});
  }
}

/// n nᵀ of step 5 from the in-plane field `nn` (xx, xy, yy rescaled; xz, yz, zz set).
void tilt_field(const Lattice& lattice, const SliceContent& slice, NormalFieldRaster& nn) {
  const double lx = lattice.period_x, ly = lattice.period_y;
  const int r = nn.resolution;
  std::vector<WallSegment> segments;
  std::vector<WallPoint> points;
  const auto& rates = slice.wall_slopes.front();
  std::visit(
      [&](const auto& shape) {
        using T = std::decay_t<decltype(shape)>;
        if constexpr (std::is_same_v<T, Polygon>) {
          polygon_walls(shape.vertices, rates[0], segments);
        } else if constexpr (std::is_same_v<T, Rectangle>) {
          // Counter-clockwise from the bottom-left corner: bottom, right, top, left; a side spanning its period
          // (a line drawn as a rectangle of width Λy) has no walls across it.
          const double hx = shape.width_x / 2, hy = shape.width_y / 2, cx = shape.center.x, cy = shape.center.y;
          const Point c[4] = {{cx - hx, cy - hy}, {cx + hx, cy - hy}, {cx + hx, cy + hy}, {cx - hx, cy + hy}};
          const Point normal[4] = {{0, -1}, {1, 0}, {0, 1}, {-1, 0}};
          for (int e = 0; e < 4; ++e) {
            const bool along_x = e % 2 == 0;  // bottom and top: walls across y
            if (along_x ? shape.width_y >= ly : shape.width_x >= lx) continue;
            segments.push_back({c[e], c[(e + 1) % 4], normal[e], along_x ? rates[1] : rates[0]});
          }
        } else if constexpr (std::is_same_v<T, Ellipse>) {
          const double a = shape.semi_axis_x, b = shape.semi_axis_y, da = rates[0], db = rates[1];
          const double cr = std::cos(shape.rotation_deg * pi / 180), sr = std::sin(shape.rotation_deg * pi / 180);
          for (int j = 0; j < ellipse_wall_points; ++j) {
            const double t = 2 * pi * (j + 0.5) / ellipse_wall_points, ct = std::cos(t), st = std::sin(t);
            const double nu = b * ct, nv = a * st, norm = std::hypot(nu, nv);  // outward, in the ellipse's axes
            const double u = a * ct, v = b * st;
            WallPoint w;
            w.p = {shape.center.x + cr * u - sr * v, shape.center.y + sr * u + cr * v};
            w.normal = {(cr * nu - sr * nv) / norm, (sr * nu + cr * nv) / norm};
            w.rate = (da * b * ct * ct + db * a * st * st) / norm;
            w.length = std::hypot(a * st, b * ct) * 2 * pi / ellipse_wall_points;
            points.push_back(w);
          }
        }
      },
      slice.shapes.front());
  // The series at |n_i| ≤ c_i, where the filter exceeds e^{−40.5} ≈ 2.6e-18.
  const double rho = tensor_smoothing * std::min(lx, ly), rho_far = far_smoothing * std::min(lx, ly);
  const auto [c1, c2] = filter_extent(lattice, r);
  const std::size_t n = std::size_t(r) * r;
  Grid unit(n, 0.0), rate(n, 0.0), length(n, 0.0);  // v1, vτ (x + i y packed), μ
  const double x0 = -lx / 2 + 0.5 * lx / r, y0 = -ly / 2 + 0.5 * ly / r;
  const auto wrap = [r](int k) { return std::size_t(((k % r) + r) % r); };
  std::vector<Complex> ex(std::size_t(2 * c1 + 1)), ey(std::size_t(2 * c2 + 1));
  for (int i = -c1; i <= c1; ++i)
    for (int j = -c2; j <= c2; ++j) {
      const double gx = 2 * pi * i / lx, gy = 2 * pi * j / ly;
      const double f = std::exp(-0.5 * rho * rho * (gx * gx + gy * gy)) +
                       far_weight * std::exp(-0.5 * rho_far * rho_far * (gx * gx + gy * gy));
      Complex su = 0, sr = 0, sl = 0;
      for (const WallSegment& w : segments) {  // ∫ e^{−iG·s} ds = L sinc(G·d/2) e^{−iG·m}
        const double dx = w.b.x - w.a.x, dy = w.b.y - w.a.y, half = 0.5 * (gx * dx + gy * dy);
        const double l = std::hypot(dx, dy), sinc_half = std::abs(half) < 1e-12 ? 1.0 : std::sin(half) / half;
        const Complex e = l * sinc_half * std::polar(1.0, -(gx * 0.5 * (w.a.x + w.b.x) + gy * 0.5 * (w.a.y + w.b.y)));
        const Complex normal{w.normal.x, w.normal.y};
        su += e * normal;
        sr += e * w.rate * normal;
        sl += e;
      }
      for (const WallPoint& w : points) {
        const Complex e = w.length * std::polar(1.0, -(gx * w.p.x + gy * w.p.y));
        const Complex normal{w.normal.x, w.normal.y};
        su += e * normal;
        sr += e * w.rate * normal;
        sl += e;
      }
      // Evaluated at the pixel centres x0 + j h by the inverse DFT: the phase e^{iG·x0}.
      const Complex shift = f * std::polar(1.0, gx * x0 + gy * y0);
      const std::size_t k = wrap(j) * r + wrap(i);
      unit[k] = su * shift;
      rate[k] = sr * shift;
      length[k] = sl * shift;
    }
  inverse_fft2_kept(unit, r, c1);
  inverse_fft2_kept(rate, r, c1);
  inverse_fft2_kept(length, r, c1);
  double mu_max = 0;
  for (const Complex& m : length) mu_max = std::max(mu_max, m.real());
  nn.xz.assign(n, 0.0);
  nn.yz.assign(n, 0.0);
  nn.zz.assign(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const double mu = length[i].real();
    if (!(mu > 1e-12 * mu_max)) continue;  // no wall within reach: in-plane
    const double xx = nn.xx[i], xy = nn.xy[i], yy = nn.yy[i];
    const double v1x = unit[i].real() / mu, v1y = unit[i].imag() / mu, vtx = rate[i].real() / mu, vty = rate[i].imag() / mu;
    const double ux = xx * v1x + xy * v1y, uy = xy * v1x + yy * v1y, s = std::sqrt(ux * ux + uy * uy);  // |u|
    const double x = s / tilt_saturation;
    const double g = x >= 1 ? 1 / s : (s > 0 ? (1 - (1 - x) * (1 - x) * (1 - x)) / s : 3 / tilt_saturation);
    const double bx = -g * (xx * vtx + xy * vty), by = -g * (xy * vtx + yy * vty), b2 = bx * bx + by * by;
    const double q = 1 / (1 + b2);
    nn.xx[i] = xx * q;
    nn.xy[i] = xy * q;
    nn.yy[i] = yy * q;
    nn.xz[i] = bx * q;
    nn.yz[i] = by * q;
    nn.zz[i] = b2 * q;
  }
}

int power_of_two_at_least(int n) { return int(std::bit_ceil(unsigned(std::max(n, 1)))); }

std::string geometry_key(const Lattice& lattice, const SliceContent& slice, int n1_max, int n2_max, int resolution,
                         bool tilt) {
  std::string key;
  const auto put = [&](const auto& v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(lattice.period_x);
  put(lattice.period_y);
  put(n1_max);
  put(n2_max);
  put(resolution);
  put(tilt);
  if (tilt)
    for (const auto& rates : slice.wall_slopes) put(rates);
  for (const int c : material_classes(slice)) put(c);
  for (const PlanarShape& s : slice.shapes) {
    put(int(s.index()));
    std::visit(
        [&](const auto& shape) {
          using T = std::decay_t<decltype(shape)>;
          if constexpr (std::is_same_v<T, Rectangle>) {
            put(shape.center);
            put(shape.width_x);
            put(shape.width_y);
          } else if constexpr (std::is_same_v<T, Ellipse>) {
            put(shape.center);
            put(shape.semi_axis_x);
            put(shape.semi_axis_y);
            put(shape.rotation_deg);
          } else if constexpr (std::is_same_v<T, Polygon>) {
            put(shape.vertices.size());
            for (const Point& p : shape.vertices) put(p);
          } else {
            put(shape.nx);
            put(shape.ny);
            put(shape.materials.size());
            for (int v : shape.pixels) put(v);
          }
        },
        s);
  }
  return key;
}

/// Pixel-exact transforms of a·n_i n_j (ij ∈ {xx, xy, yy}, then xz, yz, zz where out.components = 6) on the
/// R × R raster, for |n_i| ≤ n_i_max, into region `reg` of `out`:
/// ĉ(n) = sinc(n1/R) sinc(n2/R) e^{iπ(n1 + n2)(1 − 1/R)} DFT[f](n mod R) / R².
void transform_region(std::span<const double> a, const NormalFieldRaster& nn, int r, RegionNormalCoefficients& out,
                      int reg) {
  const int nc = out.components;
  const int n1_max = out.n1_max, n2_max = out.n2_max, k2 = 2 * n2_max + 1;
  const std::size_t size = out.size(), n = std::size_t(r) * r;
  std::vector<Complex> phase_x(2 * n1_max + 1), phase_y(k2);
  for (int i = -n1_max; i <= n1_max; ++i)
    phase_x[i + n1_max] = sinc(double(i) / r) * std::polar(1.0, pi * i * (1 - 1.0 / r)) / double(r);
  for (int j = -n2_max; j <= n2_max; ++j)
    phase_y[j + n2_max] = sinc(double(j) / r) * std::polar(1.0, pi * j * (1 - 1.0 / r)) / double(r);
  const auto wrap = [r](int k) { return std::size_t(((k % r) + r) % r); };
  // Two real maps per transform: (xx, yy) and xy; tilted, (xy, zz) and (xz, yz) instead of xy alone.
  // Only the x frequencies |n1| ≤ n1_max are read below: the column transforms of the others are skipped.
  Grid both(n), cross(n), out_of_plane(nc == 6 ? n : 0);
  for (std::size_t i = 0; i < n; ++i) {
    both[i] = {a[i] * nn.xx[i], a[i] * nn.yy[i]};
    cross[i] = nc == 6 ? Complex{a[i] * nn.xy[i], a[i] * nn.zz[i]} : Complex{a[i] * nn.xy[i]};
    if (nc == 6) out_of_plane[i] = {a[i] * nn.xz[i], a[i] * nn.yz[i]};
  }
  fft2_kept(both, r, n1_max);
  fft2_kept(cross, r, n1_max);
  if (nc == 6) fft2_kept(out_of_plane, r, n1_max);
  for (int i = -n1_max; i <= n1_max; ++i)
    for (int j = -n2_max; j <= n2_max; ++j) {
      // Separate the transforms of the two real maps packed in `both`: X(k) = (H(k) + H(−k)*)/2,
      // Y(k) = (H(k) − H(−k)*)/(2i).
      const std::size_t at = wrap(j) * r + wrap(i), mirror = wrap(-j) * r + wrap(-i);
      const Complex h = both[at], hm = std::conj(both[mirror]);
      const Complex factor = phase_x[i + n1_max] * phase_y[j + n2_max];
      const std::size_t idx = std::size_t(i + n1_max) * k2 + (j + n2_max);
      const auto put = [&](int ij, Complex v) { out.values[std::size_t(reg * nc + ij) * size + idx] = factor * v; };
      put(0, 0.5 * (h + hm));
      put(2, (h - hm) / (2.0 * I));
      if (nc == 3) {
        put(1, cross[at]);
        continue;
      }
      const Complex c = cross[at], cm = std::conj(cross[mirror]), o = out_of_plane[at], om = std::conj(out_of_plane[mirror]);
      put(1, 0.5 * (c + cm));
      put(5, (c - cm) / (2.0 * I));
      put(3, 0.5 * (o + om));
      put(4, (o - om) / (2.0 * I));
    }
}

/// ∫_0^x u J1(u) du = −x J0(x) + ∫_0^x J0 = −x J0(x) + 2 Σ_{j≥0} J_{2j+1}(x) (Neumann's series), every
/// J_n(x) from Miller's backward recurrence J_{n−1} = (2n/x) J_n − J_{n+1} normalised by J0 + 2 Σ_{k≥1} J_{2k}
/// = 1, started far enough above x that the orders left out are below rounding (1e-14 relative against a
/// Simpson quadrature for x from 0.5 to 234); the Taylor series x³/6 − x⁵/80 + x⁷/2688 below x = 0.05,
/// where the two terms cancel.
double integral_u_j1(double x) {
  if (x < 0.05) return x * x * x * (1.0 / 6 - x * x * (1.0 / 80 - x * x / 2688));
  const int start = 2 * ((int(x) + 40 + int(std::sqrt(40.0 * x))) / 2) + 1;
  double next = 0, current = 1e-300, even_sum = 0, odd_sum = 0;  // J_{n+1}, J_n (unnormalised), Σ J_2k, Σ J_2j+1
  for (int n = start; n >= 1; --n) {
    (n % 2 == 0 ? even_sum : odd_sum) += current;
    const double previous = 2.0 * n / x * current - next;
    next = current;
    current = previous;
    if (std::abs(current) > 1e250) {  // rescaled to stay in range (only ratios matter)
      current *= 1e-250;
      next *= 1e-250;
      even_sum *= 1e-250;
      odd_sum *= 1e-250;
    }
  }
  return (-x * current + 2 * odd_sum) / (current + 2 * even_sum);  // current: J_0
}

/// The signed radial field ρ̂ = d/|d| of a circle centred at c (d to the nearest periodic image of c; x̂ at c
/// itself), per pixel as in ellipse_normal_field, as the (xx, yy) maps of a raster so that transform_region
/// transforms the pair (ρ̂_x, ρ̂_y) (xy zero).
NormalFieldRaster radial_components(const Lattice& lattice, Point c, int r) {
  const double lx = lattice.period_x, ly = lattice.period_y;
  NormalFieldRaster out;
  out.resolution = r;
  const std::size_t n = std::size_t(r) * r;
  out.xx.assign(n, 1.0);
  out.xy.assign(n, 0.0);
  out.yy.assign(n, 0.0);
  for (int iy = 0; iy < r; ++iy)
    for (int ix = 0; ix < r; ++ix) {
      double dx = -lx / 2 + (ix + 0.5) * lx / r - c.x, dy = -ly / 2 + (iy + 0.5) * ly / r - c.y;
      dx -= lx * std::round(dx / lx);
      dy -= ly * std::round(dy / ly);
      const double rho = std::sqrt(dx * dx + dy * dy);
      if (!(rho > 0)) continue;
      out.xx[std::size_t(iy) * r + ix] = dx / rho;
      out.yy[std::size_t(iy) * r + ix] = dy / rho;
    }
  return out;
}

/// Appends the bytes of `v` to a cache key.
template <class T>
void put_key(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

/// The whole-cell transforms of steps 4′/5′ and 5″, which depend on the cell, the range, the resolution and the
/// field's centres (and tilts), not on the radii: made once per key by `make`, under the lock (threads asking at
/// once wait for the first), and kept for the process (a few per structure; a map per caller). Keyed by value,
/// so no result depends on which slice or thread made it first.
template <class Make>
std::shared_ptr<const RegionNormalCoefficients> cached_cell(const std::string& key, Make make) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const RegionNormalCoefficients>> cells;
  const std::lock_guard lock(mutex);
  auto& entry = cells[key];
  if (!entry) entry = make();
  return entry;
}

/// The disk's part of step 4′ and 5′, unscaled by 1/(1 + τ²): at [ij·size + (i + n1_max)(2n2_max + 1) + j + n2_max],
/// ij = xx, xy, yy, and (tilted) xz, yz, zz, the transforms of the disk (centre c, radius R) times
/// ρ̂ρ̂ᵀ, −τρ̂ and τ² (circle_region_coefficients' formulas).
std::vector<Complex> disk_coefficients(const Lattice& lattice, Point centre, double radius, int n1_max, int n2_max,
                                       bool tilt, double tau) {
  const double lx = lattice.period_x, ly = lattice.period_y, area = lx * ly;
  const int k2 = 2 * n2_max + 1, nc = tilt ? 6 : 3;
  const std::size_t size = std::size_t(2 * n1_max + 1) * k2;
  std::vector<Complex> out(std::size_t(nc) * size);
  // J0(kR), J1(kR) and (tilted) ∫_0^{kR} u J1(u) du per (|n1|, |n2|): k is even in n1 and in n2 to the bit (IEEE
  // rounding is symmetric in sign, as is hypot), so a quarter of the harmonics' pairs serve all. J0, J1 from
  // glibc's j0, j1 (POSIX): about 50 ns a pair on the dev CPU against 1 µs for std::cyl_bessel_j, which was most of
  // a slice's time here (problem_case_3's structure phase); the two agree to 1.5e-14 absolute for x in [0, 100].
  struct Radial {
    double j0, j1, integral;
  };
  const int quarter = n2_max + 1;
  std::vector<Radial> radial(std::size_t(n1_max + 1) * quarter);
  for (int i = 0; i <= n1_max; ++i)
    for (int j = 0; j <= n2_max; ++j) {
      const double x = std::hypot(2 * pi * i / lx, 2 * pi * j / ly) * radius;
      radial[std::size_t(i) * quarter + j] = {::j0(x), ::j1(x), tilt ? integral_u_j1(x) : 0.0};
    }
  for (int i = -n1_max; i <= n1_max; ++i)
    for (int j = -n2_max; j <= n2_max; ++j) {
      const double gx = 2 * pi * i / lx, gy = 2 * pi * j / ly, k = std::hypot(gx, gy), x = k * radius;
      double d0 = pi * radius * radius / area, i2 = 0, cos2 = 1, sin2 = 0, c = 1, s = 0, i1 = 0;
      if (k > 0 && radius > 0) {
        const auto [j0, j1, integral] = radial[std::size_t(std::abs(i)) * quarter + std::abs(j)];
        d0 = 2 * pi * radius * radius * j1 / (x * area);
        i2 = (2 - 2 * j0 - x * j1) / (k * k);
        c = gx / k;  // cos ψ, sin ψ
        s = gy / k;
        cos2 = c * c - s * s;
        sin2 = 2 * c * s;
        i1 = integral / (k * k);
      }
      const Complex shift = std::polar(1.0, -(gx * centre.x + gy * centre.y));
      const std::size_t idx = std::size_t(i + n1_max) * k2 + (j + n2_max);
      const Complex d1 = -2.0 * pi * I / area * shift * i1;
      const Complex disk[6] = {shift * (d0 / 2 - pi / area * cos2 * i2), shift * (-pi / area * sin2 * i2),
                               shift * (d0 / 2 + pi / area * cos2 * i2), -tau * c * d1, -tau * s * d1,
                               tau * tau * shift * d0};
      for (int ij = 0; ij < nc; ++ij) out[std::size_t(ij) * size + idx] = disk[ij];
    }
  return out;
}

/// Step 4′, a lone circle of radius R centred at c. Its radial field is the same for every radius, so
/// the whole cell's transform T_ij of n_i n_j (the raster's, as step 4 with a ≡ 1) is made once per
/// centre and range (cached: every slice of a tapered circle shares it; it depends on nothing but its
/// key, so no result depends on which slice or thread made it), and the disk's own
/// coefficients are exact: with G = (2πn1/Λx, 2πn2/Λy) = k(cos ψ, sin ψ), A = ΛxΛy and the disk's
/// transforms of 1 and of e^{±2iφ} (φ the polar angle about c),
///   D0 = 2πR² J1(kR)/(kR A)   (πR²/A at k = 0),
///   D2 = −(2π/A) e^{±2iψ} I2,  I2 = ∫_0^R J2(kρ) ρ dρ = (2 − 2J0(kR) − kR J1(kR))/k²   (0 at k = 0),
/// and n_x² = (1 + cos 2φ)/2, n_x n_y = sin 2φ/2, n_y² = (1 − cos 2φ)/2:
///   disk_xx = e^{−iG·c}[D0/2 − (π/A) cos 2ψ I2], disk_xy = −e^{−iG·c}(π/A) sin 2ψ I2,
///   disk_yy = e^{−iG·c}[D0/2 + (π/A) cos 2ψ I2];   background = T − disk.
/// So the disk has no raster error at all, the background the raster's error of T alone, and a slice
/// costs (2M1 + 1)(2M2 + 1) pairs of Bessel functions (one per |n1|, |n2|) instead of four R × R FFTs
/// and the supersampled area fractions.
/// Tilted (step 5′, a tapered circle: its radius grows at τ = dR/dz): the field is the wall's true normal
/// everywhere, n = (ρ̂, −τ)/√(1 + τ²) (the radial field tilted by a constant angle), so with s = 1/(1 + τ²)
///   n nᵀ = s [[ρ̂ρ̂ᵀ, −τ ρ̂], [−τ ρ̂ᵀ, τ²]],
/// whose cell transforms are T_ij and those of ρ̂_x, ρ̂_y (cached with T) and of 1 (δ_n0), and whose disk
/// transforms are closed forms too: ρ̂_x = cos φ, ρ̂_y = sin φ give
///   D1 = −(2πi/A) e^{−iG·c} (cos ψ, sin ψ) I1,  I1 = ∫_0^R J1(kρ) ρ dρ = integral_u_j1(kR)/k²   (0 at k = 0).
/// A tilted circle thus costs what an upright one does. (Constant rather than fading away from the wall as
/// step 5's: the radial field's own centre and the cell's Voronoi lines, where the nearest image changes,
/// are its only kinks, as for the upright circle; there ρ̂_x, ρ̂_y jump, which for holes in a material is
/// a jump of the field inside that material, of size 2τ/(1 + τ²) at most.)
std::shared_ptr<const RegionNormalCoefficients> circle_region_coefficients(const Lattice& lattice, const Ellipse& e,
                                                                           int n1_max, int n2_max, int r, bool tilt,
                                                                           double tau) {
  const double lx = lattice.period_x, ly = lattice.period_y;
  std::string key;
  for (const double v : {lx, ly, e.center.x, e.center.y}) put_key(key, v);
  for (const int v : {n1_max, n2_max, r}) put_key(key, v);
  const auto cell = cached_cell(key, [&] {
    // Region 0: T_ij; region 1: the transforms of ρ̂_x (as xx) and ρ̂_y (as yy).
    const auto t = zeroed_coefficients(2, 3, n1_max, n2_max, r);
    // The radial field of the unit circle at this centre, n nᵀ = d dᵀ/|d|² with no radius in it
    // (a² = 1, no rotation). Built from the slice's own circle, its bits would vary with that
    // radius (d/R² is rounded before squaring) and so with whichever slice of a tapered circle
    // came first: a race between the threads building slices, which GMRES turns into 1e-8
    // differences in results.
    Ellipse unit_circle;
    unit_circle.center = e.center;
    unit_circle.semi_axis_x = unit_circle.semi_axis_y = 1;
    const std::vector<double> whole(std::size_t(r) * r, 1.0);
    transform_region(whole, ellipse_normal_field(lattice, unit_circle, r), r, *t, 0);
    transform_region(whole, radial_components(lattice, e.center, r), r, *t, 1);
    return t;
  });
  const auto out = zeroed_coefficients(2, tilt ? 6 : 3, n1_max, n2_max, r);
  const std::size_t size = out->size();
  const int nc = out->components;
  const double scale = tilt ? 1 / (1 + tau * tau) : 1.0;
  const std::vector<Complex> disk = disk_coefficients(lattice, e.center, e.semi_axis_x, n1_max, n2_max, tilt, tau);
  for (std::size_t idx = 0; idx < size; ++idx) {
    // ij = xx, xy, yy, then (tilted) xz, yz, zz: disk and whole cell.
    const Complex whole[6] = {cell->values[0 * size + idx], cell->values[1 * size + idx], cell->values[2 * size + idx],
                              -tau * cell->values[3 * size + idx], -tau * cell->values[5 * size + idx],
                              idx == size / 2 ? Complex(tau * tau) : Complex(0)};  // size / 2: harmonic (0, 0)
    for (int ij = 0; ij < nc; ++ij) {
      out->values[std::size_t(nc + ij) * size + idx] = scale * disk[std::size_t(ij) * size + idx];
      out->values[std::size_t(ij) * size + idx] = scale * (whole[ij] - disk[std::size_t(ij) * size + idx]);
    }
  }
  return out;
}

/// The circles of a slice that holds several of them (step 5″): every shape a circle (an Ellipse of equal
/// semi-axes), each inside its cell of the Voronoi diagram of all their centres and periodic images, so that
/// no disk reaches a line of that diagram: every pair's centres (nearest images) at least twice the larger
/// radius apart, every circle at most half a period across. Else nothing. taus: each circle's wall rate τ = dR/dz
/// (SliceContent::wall_slopes; 0 for an upright one).
struct VoronoiCircles {
  std::vector<Point> centres;
  std::vector<double> radii, taus;
};
std::optional<VoronoiCircles> voronoi_circles(const Lattice& lattice, const SliceContent& slice) {
  if (slice.shapes.size() < 2) return std::nullopt;
  const double lx = lattice.period_x, ly = lattice.period_y;
  VoronoiCircles out;
  for (const PlanarShape& s : slice.shapes) {
    const auto* e = std::get_if<Ellipse>(&s);
    if (!e || e->semi_axis_x != e->semi_axis_y || 2 * e->semi_axis_x > std::min(lx, ly)) return std::nullopt;
    out.centres.push_back(e->center);
    out.radii.push_back(e->semi_axis_x);
    out.taus.push_back(slice.wall_slopes.empty() ? 0.0 : slice.wall_slopes[out.taus.size()][0]);
  }
  for (std::size_t i = 0; i < out.centres.size(); ++i)
    for (std::size_t j = i + 1; j < out.centres.size(); ++j) {
      double dx = out.centres[i].x - out.centres[j].x, dy = out.centres[i].y - out.centres[j].y;
      dx -= lx * std::round(dx / lx);
      dy -= ly * std::round(dy / ly);
      if (std::hypot(dx, dy) < 2 * std::max(out.radii[i], out.radii[j])) return std::nullopt;
    }
  return out;
}

/// Step 5″'s field on the raster: at each pixel centre, d = the offset from the nearest of `centres` (periodic
/// images included, ties to the earlier one) and τ that centre's tilt: n = (d̂, −τ)/√(1 + τ²) (d̂ = x̂ at a
/// centre itself), the six maps of n nᵀ. No radius enters, so every slice of a layer of uniformly tapered
/// circles shares it.
NormalFieldRaster voronoi_tilted_field(const Lattice& lattice, std::span<const Point> centres,
                                       std::span<const double> taus, int r) {
  const double lx = lattice.period_x, ly = lattice.period_y;
  NormalFieldRaster out;
  out.resolution = r;
  const std::size_t n = std::size_t(r) * r;
  for (auto* map : {&out.xx, &out.xy, &out.yy, &out.xz, &out.yz, &out.zz}) map->resize(n);
  for (int iy = 0; iy < r; ++iy)
    for (int ix = 0; ix < r; ++ix) {
      const double px = -lx / 2 + (ix + 0.5) * lx / r, py = -ly / 2 + (iy + 0.5) * ly / r;
      std::size_t nearest = 0;
      double best = std::numeric_limits<double>::infinity(), ux = 1, uy = 0;
      for (std::size_t c = 0; c < centres.size(); ++c) {
        double dx = px - centres[c].x, dy = py - centres[c].y;
        dx -= lx * std::round(dx / lx);
        dy -= ly * std::round(dy / ly);
        const double d2 = dx * dx + dy * dy;
        if (d2 < best) {
          best = d2;
          nearest = c;
          const double rho = std::sqrt(d2);
          ux = rho > 0 ? dx / rho : 1.0;
          uy = rho > 0 ? dy / rho : 0.0;
        }
      }
      const double tau = taus[nearest], s = 1 / (1 + tau * tau);
      const std::size_t i = std::size_t(iy) * r + ix;
      out.xx[i] = s * ux * ux;
      out.xy[i] = s * ux * uy;
      out.yy[i] = s * uy * uy;
      out.xz[i] = -tau * s * ux;
      out.yz[i] = -tau * s * uy;
      out.zz[i] = tau * tau * s;
    }
  return out;
}

/// Step 5″, several circles, some tapered (each inside its Voronoi cell, voronoi_circles): each circle's wall
/// takes its true normal (ρ̂_k, −τ_k)/√(1 + τ_k²) as a lone tapered circle's does (step 5′), and the whole cell
/// the field of voronoi_tilted_field, constant tilt per Voronoi cell. Region 1 + k, disk k: its closed forms
/// (disk_coefficients, scaled by its 1/(1 + τ_k²)); region 0: the whole cell's raster transform minus every
/// disk's. The whole cell's transform depends on the centres and tilts alone: cached (every slice of a layer
/// of uniformly tapered circles shares it). Its only kinks are on the Voronoi lines between centres, outside
/// every disk (in the background: for pillars in the superstrate's medium, where β = γ = 0, they cost nothing).
std::shared_ptr<const RegionNormalCoefficients> voronoi_circle_coefficients(const Lattice& lattice,
                                                                            const VoronoiCircles& circles, int n1_max,
                                                                            int n2_max, int r) {
  const std::size_t count = circles.centres.size();
  const std::vector<double>& taus = circles.taus;
  std::string key;
  for (const double v : {lattice.period_x, lattice.period_y}) put_key(key, v);
  for (const int v : {n1_max, n2_max, r}) put_key(key, v);
  for (std::size_t k = 0; k < count; ++k)
    for (const double v : {circles.centres[k].x, circles.centres[k].y, taus[k]}) put_key(key, v);
  const auto cell = cached_cell(key, [&] {
    const auto t = zeroed_coefficients(1, 6, n1_max, n2_max, r);
    const std::vector<double> whole(std::size_t(r) * r, 1.0);
    transform_region(whole, voronoi_tilted_field(lattice, circles.centres, taus, r), r, *t, 0);
    return t;
  });
  const auto out = zeroed_coefficients(int(1 + count), 6, n1_max, n2_max, r);
  const std::size_t size = out->size();
  std::copy(cell->values.begin(), cell->values.end(), out->values.begin());
  for (std::size_t k = 0; k < count; ++k) {
    const double scale = 1 / (1 + taus[k] * taus[k]);
    const std::vector<Complex> disk =
        disk_coefficients(lattice, circles.centres[k], circles.radii[k], n1_max, n2_max, true, taus[k]);
    Complex* region = out->values.data() + (1 + k) * 6 * size;
    for (std::size_t i = 0; i < 6 * size; ++i) {
      region[i] = scale * disk[i];
      out->values[i] -= region[i];
    }
  }
  return out;
}

std::shared_ptr<const RegionNormalCoefficients> compute_region_coefficients(const Lattice& lattice,
                                                                            const SliceContent& slice, int n1_max,
                                                                            int n2_max, int r, bool tilt) {
  if (tilt && slice.shapes.size() > 1)  // tilts_normal_field: several circles, each inside its Voronoi cell
    return voronoi_circle_coefficients(lattice, *voronoi_circles(lattice, slice), n1_max, n2_max, r);
  const Ellipse* ellipse = lone_ellipse(slice);
  if (ellipse && ellipse->semi_axis_x == ellipse->semi_axis_y)
    return circle_region_coefficients(lattice, *ellipse, n1_max, n2_max, r, tilt, tilt ? slice.wall_slopes[0][0] : 0.0);
  if (const std::optional<Rectangle> rectangle = lone_rectangle(lattice, slice); rectangle && !tilt)
    return rectangle_region_coefficients(lattice, *rectangle, n1_max, n2_max, r);
  const Regions regions = regions_of(lattice, slice);
  const auto a = area_fractions(lattice, regions, r);
  const std::vector<Point> polygon = lone_polygon(slice);
  // The structure tensor reads the area fractions per material; the coefficients stay per region.
  NormalFieldRaster nn = ellipse ? ellipse_normal_field(lattice, *ellipse, r)
                         : polygon.empty() ? normal_field(lattice, by_material(a, material_classes(slice)), r, nullptr)
                                           : normal_field(lattice, {}, r, &polygon);
  if (tilt) tilt_field(lattice, slice, nn);
  const auto out = zeroed_coefficients(regions.count, tilt ? 6 : 3, n1_max, n2_max, r);
  for (int reg = 0; reg < regions.count; ++reg) {
    const auto& ar = a[reg];
    if (std::all_of(ar.begin(), ar.end(), [](double v) { return v == 0; })) continue;
    transform_region(ar, nn, r, *out, reg);
  }
  return out;
}

/// A 1D slice's normal field tilted in the xz plane along its sloped walls (normal_field.hpp): its
/// material edges (sorted, one period from the first) with the angle φ of n = (cos φ, 0, sin φ) there.
/// A wall of slope τ = dx/dz has tangent (τ, 1) and normal (1, −τ)/√(1 + τ²), so φ = −atan τ ∈ (−π/2, π/2).
/// Between two edges φ is linear in x; region r (−1 the background, k shape k) lies between edge j and j + 1.
struct TiltedEdges {
  std::vector<double> x, phi;
  std::vector<int> region;  ///< region between edge j and edge j + 1 (the last: up to x[0] + Λ)
};

TiltedEdges tilted_edges(const Lattice& lattice, const SliceContent& slice) {
  const double period = lattice.period_x;
  const PaintedCell cell(lattice, slice.shapes);
  const auto wrap = [&](double x) { return x - period * std::floor((x + period / 2) / period); };
  const auto region_at = [&](double x) { return cell.region_at({wrap(x), 0.0}); };
  // Candidate edges: every rectangle wall, wrapped into the cell; kept where the regions on either side differ.
  // (Which shape and side a kept edge belongs to follows from the regions beside it, below.)
  std::vector<double> walls;
  for (const PlanarShape& shape : slice.shapes) {
    const auto& r = std::get<Rectangle>(shape);
    if (r.width_x >= period) continue;  // spans the period: no wall
    walls.push_back(wrap(r.center.x - r.width_x / 2));
    walls.push_back(wrap(r.center.x + r.width_x / 2));
  }
  std::sort(walls.begin(), walls.end());
  const double hair = 1e-9 * period;
  TiltedEdges e;
  for (const double w : walls) {
    if (!e.x.empty() && w - e.x.back() < 2 * hair) continue;  // coincident walls: one edge
    const int left = region_at(w - hair), right = region_at(w + hair);
    if (left == right) continue;
    // The wall seen is the later-painted shape's: its left wall where it lies to the right, else its right wall.
    const int owner = std::max(left, right), side = owner == right ? 0 : 1;
    const double slope = slice.wall_slopes.empty() ? 0.0 : slice.wall_slopes[std::size_t(owner)][std::size_t(side)];
    e.x.push_back(w);
    e.phi.push_back(-std::atan(slope));
  }
  for (std::size_t j = 0; j < e.x.size(); ++j) {
    const double end = j + 1 < e.x.size() ? e.x[j + 1] : e.x[0] + period;
    e.region.push_back(region_at((e.x[j] + end) / 2));
  }
  return e;
}

/// (1/Λ) ∫_a^b e^{i(p x + q)} dx, stable as p → 0.
Complex interval_integral(double a, double b, double p, double q, double period) {
  const double length = b - a, half = p * length / 2;
  const double sinc = std::abs(half) < 1e-8 ? 1.0 - half * half / 6 : std::sin(half) / half;
  return std::exp(I * (p * (a + b) / 2 + q)) * (length * sinc / period);
}

/// The seven kernels of a 1D slice with the tilted field (normal_field.hpp's 1D tilted pattern),
/// exact: per interval between edges the material values are constant and n n^T = ½[[1 + cos 2φ,
/// sin 2φ], [sin 2φ, 1 − cos 2φ]] (xz block) with φ = φ_a + s(x − a), whose transforms are closed
/// forms (interval_integral of e^{±2iφ(x)} e^{−iG_n x}).
std::vector<Complex> tilted_kernels(const Lattice& lattice, const SliceContent& slice, double wavelength, int n1_max, const std::function<Complex(Complex)>& chi,
                                    const std::function<Complex(Complex)>& beta,
                                    const std::function<Complex(Complex)>& gamma) {
  const std::size_t size = std::size_t(2 * n1_max + 1);
  std::vector<Complex> out(7 * size, 0.0);
  TiltedEdges e = tilted_edges(lattice, slice);
  if (e.x.empty()) e = {{-lattice.period_x / 2}, {0.0}, {PaintedCell(lattice, slice.shapes).region_at({0.0, 0.0})}};
  const std::vector<Complex> eps = region_permittivities(slice, wavelength);  // [0] background, [1 + k] shape k
  const double period = lattice.period_x;
  for (std::size_t j = 0; j < e.x.size(); ++j) {
    const double a = e.x[j], b = j + 1 < e.x.size() ? e.x[j + 1] : e.x[0] + period;
    const double pa = e.phi[j], pb = e.phi[(j + 1) % e.x.size()], slope = (pb - pa) / (b - a);
    const Complex eps_r = eps[std::size_t(e.region[j] + 1)];
    const Complex x = chi(eps_r), bt = beta(eps_r), g = gamma(eps_r);
    for (int n = -n1_max; n <= n1_max; ++n) {
      const double k = 2 * pi * n / period;
      const Complex one = interval_integral(a, b, -k, 0.0, period);
      const Complex plus = interval_integral(a, b, 2 * slope - k, 2 * (pa - slope * a), period);
      const Complex minus = interval_integral(a, b, -2 * slope - k, -2 * (pa - slope * a), period);
      const Complex cos2 = (plus + minus) / 2.0, sin2 = (plus - minus) / (2.0 * I);
      const Complex xx = (one + cos2) / 2.0, xz = sin2 / 2.0, zz = (one - cos2) / 2.0;
      const std::size_t i = std::size_t(n + n1_max);
      out[0 * size + i] += x * one;
      out[1 * size + i] += x * one + bt * xx;
      out[2 * size + i] += bt * xz;
      out[3 * size + i] += x * one + bt * zz;
      out[4 * size + i] += g * xx;
      out[5 * size + i] += g * xz;
      out[6 * size + i] += g * zz;
    }
  }
  return out;
}

}  // namespace

std::string_view to_string(Formulation formulation) {
  return formulation == Formulation::normal_vector ? "normal-vector" : "laurent";
}

Formulation parse_formulation(std::string_view name) {
  if (name == "normal-vector") return Formulation::normal_vector;
  if (name == "laurent") return Formulation::laurent;
  GS_EXPECTS(false, "unknown formulation '" + std::string(name) + "' (expected normal-vector or laurent)");
}

bool tilts_normal_field(const Lattice& lattice, const SliceContent& slice) {
  if (lattice.one_dimensional() || slice.shapes.empty() || !slice.sloped()) return false;
  if (slice.shapes.size() == 1) return !std::holds_alternative<Raster>(slice.shapes.front());
  return voronoi_circles(lattice, slice).has_value();
}

conv::Problem normal_vector_problem(bool one_dimensional, bool tilted) {
  conv::Problem p;
  p.inputs = 3;
  if (tilted && !one_dimensional) {  // C and γ n nᵀ symmetric: kernel of (i, j) at sym[i][j], + 6 for γ
    constexpr int sym[3][3] = {{0, 1, 2}, {1, 3, 4}, {2, 4, 5}};
    p.kernels = 12;
    p.outputs = 6;
    p.pattern.clear();
    for (int o = 0; o < 6; ++o)
      for (int j = 0; j < 3; ++j) p.pattern.push_back({o, j, sym[o % 3][j] + (o >= 3 ? 6 : 0)});
  } else if (tilted) {
    p.kernels = 7;
    p.outputs = 5;
    p.pattern = {{0, 0, 1}, {0, 2, 2}, {1, 1, 0}, {2, 0, 2}, {2, 2, 3}, {3, 0, 4}, {3, 2, 5}, {4, 0, 5}, {4, 2, 6}};
  } else if (one_dimensional) {
    p.kernels = 3;
    p.outputs = 4;
    p.pattern = {{0, 0, 1}, {1, 1, 0}, {2, 2, 0}, {3, 0, 2}};
  } else {
    p.kernels = 7;
    p.outputs = 5;
    p.pattern = {{0, 0, 1}, {0, 1, 2}, {1, 0, 2}, {1, 1, 3}, {2, 2, 0}, {3, 0, 4}, {3, 1, 5}, {4, 0, 5}, {4, 1, 6}};
  }
  return p;
}

unsigned d_axes(const conv::Problem& problem) {
  if (problem.scalar()) return 0;
  unsigned axes = 0;
  for (const conv::Term& t : problem.pattern)
    if (t.output >= 3) axes |= 1u << t.input;
  GS_EXPECTS(problem.outputs == 3 + std::popcount(axes),
             "normal-vector pattern: its D outputs must read exactly the components they add to");
  return axes;
}

int default_normal_field_resolution(int m1, int m2) {
  return std::max(256, power_of_two_at_least(8 * (4 * std::max(m1, m2) + 1)));
}

namespace {

/// region_normal_coefficients' process-wide cache, newest first. An entry is made when its computation starts:
/// a thread asking for the same geometry meanwhile (Richardson's two solves side by side, solver.cpp) waits for
/// it instead of computing it again.
using Coefficients = std::shared_ptr<const RegionNormalCoefficients>;
struct CoefficientCache {
  struct Entry {
    std::string key;
    std::shared_future<Coefficients> value;
    std::size_t bytes = 0;  ///< 0 while being computed
    std::uint64_t id = 0;
  };
  std::mutex mutex;
  std::list<Entry> entries;
  std::size_t bytes = 0;
  std::uint64_t next_id = 0;
} coefficient_cache;

}  // namespace

void clear_normal_field_cache() {
  const std::lock_guard lock(coefficient_cache.mutex);
  coefficient_cache.entries.clear();
  coefficient_cache.bytes = 0;
}

std::shared_ptr<const RegionNormalCoefficients> region_normal_coefficients(const Lattice& lattice,
                                                                           const SliceContent& slice, int n1_max,
                                                                           int n2_max, int resolution, bool tilted) {
  GS_EXPECTS(!lattice.one_dimensional(), "normal fields on a raster are for 2D lattices");
  GS_EXPECTS(!slice.shapes.empty(), "region_normal_coefficients: the slice has no shape");
  GS_EXPECTS(resolution >= 8 && std::has_single_bit(unsigned(resolution)),
          "normal-field raster resolution must be a power of two ≥ 8, got " + std::to_string(resolution));
  GS_EXPECTS(2 * std::max(n1_max, n2_max) < resolution,
          "normal-field raster of " + std::to_string(resolution) + " pixels is too coarse for harmonics up to " +
              std::to_string(std::max(n1_max, n2_max)));
  // Least recently used first out, bounded by cache_bytes (a hit moves to the front).
  CoefficientCache& cache = coefficient_cache;
  const bool tilt = tilted && tilts_normal_field(lattice, slice);
  const std::string key = geometry_key(lattice, slice, n1_max, n2_max, resolution, tilt);
  std::promise<Coefficients> promise;
  std::uint64_t id = 0;
  {
    std::unique_lock lock(cache.mutex);
    for (auto it = cache.entries.begin(); it != cache.entries.end(); ++it)
      if (it->key == key) {
        cache.entries.splice(cache.entries.begin(), cache.entries, it);
        const std::shared_future<Coefficients> value = it->value;
        lock.unlock();
        return value.get();  // waits while another thread computes it; its exception, if it failed
      }
    id = cache.next_id++;
    cache.entries.push_front({key, promise.get_future().share(), 0, id});
  }
  const auto own = [&] {  // this call's entry, unless cleared or evicted meanwhile (under the lock)
    return std::find_if(cache.entries.begin(), cache.entries.end(), [&](const auto& e) { return e.id == id; });
  };
  Coefficients value;
  try {
    value = compute_region_coefficients(lattice, slice, n1_max, n2_max, resolution, tilt);
  } catch (...) {
    {
      const std::lock_guard lock(cache.mutex);
      if (const auto it = own(); it != cache.entries.end()) cache.entries.erase(it);  // the next call tries again
    }
    promise.set_exception(std::current_exception());
    throw;
  }
  promise.set_value(value);
  const std::lock_guard lock(cache.mutex);
  if (const auto it = own(); it != cache.entries.end()) {
    it->bytes = value->values.size() * sizeof(Complex);
    cache.bytes += it->bytes;
  }
  while (cache.bytes > cache_bytes && cache.entries.size() > 1) {
    cache.bytes -= cache.entries.back().bytes;
    cache.entries.pop_back();
  }
  return value;
}

NormalFieldRaster normal_field_raster(const Lattice& lattice, const SliceContent& slice, int resolution,
                                      bool exact_where_possible, bool tilted) {
  GS_EXPECTS(!lattice.one_dimensional() && !slice.shapes.empty(), "normal_field_raster: a 2D slice with shapes");
  const std::vector<Point> polygon = exact_where_possible ? lone_polygon(slice) : std::vector<Point>{};
  const Ellipse* ellipse = lone_ellipse(slice);
  const std::optional<Rectangle> rectangle = lone_rectangle(lattice, slice);
  const bool tilt = tilted && tilts_normal_field(lattice, slice);
  if (tilt && slice.shapes.size() > 1) {  // several circles: step 5″ (exact_where_possible or not)
    const VoronoiCircles circles = *voronoi_circles(lattice, slice);
    return voronoi_tilted_field(lattice, circles.centres, circles.taus, resolution);
  }
  if (rectangle && exact_where_possible && !tilt) return rectangle_normal_field(lattice, *rectangle, resolution);
  NormalFieldRaster nn = ellipse && exact_where_possible ? ellipse_normal_field(lattice, *ellipse, resolution)
                         : !polygon.empty()
                             ? normal_field(lattice, {}, resolution, &polygon)
                             : normal_field(lattice,
                                            by_material(area_fractions(lattice, regions_of(lattice, slice), resolution),
                                                        material_classes(slice)),
                                            resolution, nullptr);
  if (!tilt) return nn;
  if (ellipse && ellipse->semi_axis_x == ellipse->semi_axis_y && exact_where_possible) {  // step 5′: constant tilt
    const double tau = slice.wall_slopes[0][0], scale = 1 / (1 + tau * tau);
    const NormalFieldRaster radial = radial_components(lattice, ellipse->center, resolution);
    nn.xz.resize(nn.xx.size());
    nn.yz.resize(nn.xx.size());
    nn.zz.assign(nn.xx.size(), tau * tau * scale);
    for (std::size_t i = 0; i < nn.xx.size(); ++i) {
      nn.xx[i] *= scale;
      nn.xy[i] *= scale;
      nn.yy[i] *= scale;
      nn.xz[i] = -tau * scale * radial.xx[i];
      nn.yz[i] = -tau * scale * radial.yy[i];
    }
    return nn;
  }
  tilt_field(lattice, slice, nn);
  return nn;
}

std::vector<Complex> normal_vector_kernels(const Lattice& lattice, const SliceContent& slice, double wavelength,
                                           Complex eps1, int m1, int m2, int resolution, bool tilted) {
  GS_EXPECTS(m1 >= 0 && m2 >= 0, "harmonic counts M1, M2 must be ≥ 0");
  const int n1 = 2 * m1, n2 = 2 * m2;
  const std::size_t size = std::size_t(2 * n1 + 1) * (2 * n2 + 1), zero = std::size_t(n1) * (2 * n2 + 1) + n2;
  const auto nonzero = [](Complex eps) {
    GS_EXPECTS(eps != Complex(0), "the normal-vector formulation needs ε ≠ 0 in every material (it uses 1/ε)");
    return eps;
  };
  const auto chi = [&](Complex eps) { return eps / eps1 - 1.0; };
  const auto beta = [&](Complex eps) { return 2.0 - eps1 / nonzero(eps) - eps / eps1; };
  const auto gamma = [&](Complex eps) { return eps1 / nonzero(eps) - 1.0; };
  const auto harmonics = [&](const std::function<Complex(Complex)>& f) {
    return material_harmonics(lattice, slice, wavelength, f, n1, n2);
  };
  std::vector<Complex> out;
  // 1D: the pattern of a problem with sloped walls is the tilted one (2D slices may keep in-plane fields).
  GS_EXPECTS(tilted || !slice.sloped() || !lattice.one_dimensional(), "a slice with sloped walls needs the tilted normal field");
  const bool has_raster = !slice.shapes.empty() && std::holds_alternative<Raster>(slice.shapes.front());
  if (tilted && lattice.one_dimensional() && !slice.shapes.empty() && !has_raster)
    return tilted_kernels(lattice, slice, wavelength, n1, chi, beta, gamma);
  if (lattice.one_dimensional()) {  // n = x̂: C_xx = χ + β = 1 − ε1/ε, exact transforms
    for (const auto& f : {std::function<Complex(Complex)>(chi), std::function<Complex(Complex)>([&](Complex eps) {
                            return 1.0 - eps1 / nonzero(eps);
                          }),
                          std::function<Complex(Complex)>(gamma)}) {
      const auto k = harmonics(f);
      out.insert(out.end(), k.begin(), k.end());
    }
    if (tilted) {  // a uniform or raster slice (vertical walls) in the tilted layout: C_xz = 0, C_zz = χ, γn_xn_z = γn_z² = 0
      const std::vector<Complex> x(out.begin(), out.begin() + std::ptrdiff_t(size));
      out.resize(7 * size, 0.0);
      std::copy(out.begin() + std::ptrdiff_t(2 * size), out.begin() + std::ptrdiff_t(3 * size),
                out.begin() + std::ptrdiff_t(4 * size));
      std::fill(out.begin() + std::ptrdiff_t(2 * size), out.begin() + std::ptrdiff_t(4 * size), 0.0);
      std::copy(x.begin(), x.end(), out.begin() + std::ptrdiff_t(3 * size));
    }
    return out;
  }
  // The kernels of C = χ I + β n nᵀ and of γ n nᵀ per component ij: in-plane K = 7 (χ, C_xx, C_xy, C_yy,
  // γ xx, γ xy, γ yy), tilted K = 12 (C_xx, C_xy, C_xz, C_yy, C_yz, C_zz, then γ in that order).
  // ij = 0..5 is xx, xy, yy, xz, yz, zz (RegionNormalCoefficients' order).
  constexpr int in_plane_c[3] = {1, 2, 3}, tilted_c[6] = {0, 1, 3, 2, 4, 5};
  const int components = tilted ? 6 : 3, gamma_offset = tilted ? 6 : 3;
  const int* c_kernel = tilted ? tilted_c : in_plane_c;
  const std::vector<Complex> x = harmonics(chi);
  out.assign((tilted ? 12 : 7) * size, 0.0);
  const auto kernel = [&](int k) { return out.data() + k * size; };
  if (!tilted) std::copy(x.begin(), x.end(), kernel(0));
  for (int ij : {0, 2, 5})  // the diagonal's χ
    if (ij < components) std::copy(x.begin(), x.end(), kernel(c_kernel[ij]));
  if (slice.shapes.empty()) {  // uniform slice: n = x̂
    const Complex eps = slice.background.permittivity(wavelength);
    kernel(c_kernel[0])[zero] += beta(eps);
    kernel(c_kernel[0] + gamma_offset)[zero] += gamma(eps);
    return out;
  }
  const auto coef = region_normal_coefficients(lattice, slice, n1, n2,
                                               resolution > 0 ? resolution : default_normal_field_resolution(m1, m2),
                                               tilted);
  const std::vector<Complex> eps = region_permittivities(slice, wavelength);
  GS_EXPECTS(int(eps.size()) == coef->regions, "normal field: region count mismatch");
  for (int r = 0; r < coef->regions; ++r) {
    const Complex b = beta(eps[r]), g = gamma(eps[r]);
    for (int ij = 0; ij < coef->components; ++ij) {  // an in-plane slice of a tilted problem: xz = yz = zz = 0
      const Complex* nn = coef->at(r, ij);
      Complex *c = kernel(c_kernel[ij]), *d = kernel(c_kernel[ij] + gamma_offset);
      for (std::size_t i = 0; i < size; ++i) {
        c[i] += b * nn[i];
        d[i] += g * nn[i];
      }
    }
  }
  return out;
}

}  // namespace gratingsim::physics
