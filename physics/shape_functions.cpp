#include "physics/shape_functions.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>

#include "core/error.hpp"

namespace gratingsim::physics {
namespace {

constexpr double pi = std::numbers::pi;
constexpr Complex I{0.0, 1.0};

double cross(Point u, Point v) { return u.x * v.y - u.y * v.x; }
double dot(Point u, Point v) { return u.x * v.x + u.y * v.y; }
Point operator-(Point u, Point v) { return {u.x - v.x, u.y - v.y}; }
Point operator+(Point u, Point v) { return {u.x + v.x, u.y + v.y}; }
Point operator*(double s, Point u) { return {s * u.x, s * u.y}; }
double norm(Point u) { return std::hypot(u.x, u.y); }

/// sin(t)/t, accurate near 0.
double sinc_unnormalised(double t) {
  return std::abs(t) < 1e-4 ? 1.0 - t * t / 6.0 : std::sin(t) / t;
}
/// 2 J1(q)/q, accurate near 0 (J1 from glibc's j1, POSIX: 20x faster than std::cyl_bessel_j, normal_field.cpp).
double jinc(double q) {
  return std::abs(q) < 1e-4 ? 1.0 - q * q / 8.0 : 2.0 * ::j1(q) / q;
}

// 16-point Gauss–Legendre nodes and weights on [−1, 1], computed once by Newton's method.
struct GaussLegendre16 {
  std::array<double, 16> x{}, w{};
  GaussLegendre16() {
    constexpr int n = 16;
    for (int i = 0; i < n; ++i) {
      double t = std::cos(pi * (i + 0.75) / (n + 0.5));
      double dp = 0;
      for (int it = 0; it < 100; ++it) {
        double p0 = 1, p1 = t;
        for (int k = 2; k <= n; ++k) {
          const double p2 = ((2 * k - 1) * t * p1 - (k - 1) * p0) / k;
          p0 = p1;
          p1 = p2;
        }
        dp = n * (t * p1 - p0) / (t * t - 1);
        const double step = p1 / dp;
        t -= step;
        if (std::abs(step) < 1e-16) break;
      }
      x[i] = t;
      w[i] = 2 / ((1 - t * t) * dp * dp);
    }
  }
};
const GaussLegendre16& gauss_legendre() {
  static const GaussLegendre16 rule;
  return rule;
}

using Region = PaintedCell::Region;
using Piece = PaintedCell::Piece;

Point ellipse_point(const Region& e, double t) {
  const double u = e.a * std::cos(t), v = e.b * std::sin(t);
  return {e.center.x + e.cos_rot * u - e.sin_rot * v, e.center.y + e.sin_rot * u + e.cos_rot * v};
}
Point ellipse_tangent(const Region& e, double t) {
  const double u = -e.a * std::sin(t), v = e.b * std::cos(t);
  return {e.cos_rot * u - e.sin_rot * v, e.sin_rot * u + e.cos_rot * v};
}
/// p in the ellipse's unit-circle frame.
Point to_unit_frame(const Region& e, Point p) {
  const Point d = p - e.center;
  return {(e.cos_rot * d.x + e.sin_rot * d.y) / e.a, (-e.sin_rot * d.x + e.cos_rot * d.y) / e.b};
}

bool contains(const Region& r, Point p) {
  if (r.ellipse) {
    const Point q = to_unit_frame(r, p);
    return q.x * q.x + q.y * q.y < 1.0;
  }
  bool inside = false;
  const auto& v = r.vertices;
  for (std::size_t i = 0, j = v.size() - 1; i < v.size(); j = i++)
    if ((v[i].y > p.y) != (v[j].y > p.y) && p.x < (v[j].x - v[i].x) * (p.y - v[i].y) / (v[j].y - v[i].y) + v[i].x)
      inside = !inside;
  return inside;
}

struct Box {
  double x0, x1, y0, y1;
};
Box bounding_box(const Region& r) {
  if (r.ellipse) {
    const double ex = std::hypot(r.a * r.cos_rot, r.b * r.sin_rot);
    const double ey = std::hypot(r.a * r.sin_rot, r.b * r.cos_rot);
    return {r.center.x - ex, r.center.x + ex, r.center.y - ey, r.center.y + ey};
  }
  Box b{r.vertices[0].x, r.vertices[0].x, r.vertices[0].y, r.vertices[0].y};
  for (const Point& p : r.vertices) {
    b.x0 = std::min(b.x0, p.x);
    b.x1 = std::max(b.x1, p.x);
    b.y0 = std::min(b.y0, p.y);
    b.y1 = std::max(b.y1, p.y);
  }
  return b;
}

Region shifted(Region r, Point s) {
  r.center = r.center + s;
  for (Point& p : r.vertices) p = p + s;
  return r;
}

double signed_area(std::span<const Point> v) {
  double a = 0;
  for (std::size_t i = 0, j = v.size() - 1; i < v.size(); j = i++) a += cross(v[j], v[i]);
  return a / 2;
}

/// Adds weight × segment a → b's term of ∫ e^{−iG·x} dx dy over the region on its left, by Green's theorem:
/// i (G_x d_y − G_y d_x)/|G|² sinc(G·d/2) e^{−iG·m} (d = b − a, m the midpoint; ½(a_x + b_x) d_y at G = 0),
/// for the G = (gx[i], gy[j]) at out[i·|gy| + j]. phase_x and phase_y: scratch of gx's and gy's sizes.
void add_segment_harmonics(Point a, Point b, Complex weight, std::span<const double> gx, std::span<const double> gy,
                           std::vector<Complex>& phase_x, std::vector<Complex>& phase_y, std::span<Complex> out) {
  const std::size_t k1 = gx.size(), k2 = gy.size();
  const Point m = 0.5 * (a + b), d = b - a;
  for (std::size_t i = 0; i < k1; ++i) phase_x[i] = std::polar(1.0, -gx[i] * m.x);
  for (std::size_t j = 0; j < k2; ++j) phase_y[j] = std::polar(1.0, -gy[j] * m.y);
  for (std::size_t i = 0; i < k1; ++i)
    for (std::size_t j = 0; j < k2; ++j) {
      const double g2 = gx[i] * gx[i] + gy[j] * gy[j];
      Complex integral;
      if (g2 == 0) {
        integral = 0.5 * (a.x + b.x) * d.y;
      } else {
        const double c = gx[i] * d.y - gy[j] * d.x;
        integral = I * (c / g2) * sinc_unnormalised(0.5 * (gx[i] * d.x + gy[j] * d.y)) * phase_x[i] * phase_y[j];
      }
      out[i * k2 + j] += weight * integral;
    }
}

/// The reciprocal vectors 2π n/Λ for n = −n_max … n_max.
std::vector<double> reciprocal(double period, int n_max) {
  std::vector<double> g(std::size_t(2 * n_max + 1));
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = 2 * pi * (int(i) - n_max) / period;
  return g;
}

bool segments_cross(Point a, Point b, Point c, Point d) {
  const double d1 = cross(b - a, c - a), d2 = cross(b - a, d - a);
  const double d3 = cross(d - c, a - c), d4 = cross(d - c, b - c);
  return ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0));
}

Region polygon_region(std::vector<Point> vertices, const std::string& what) {
  GS_EXPECTS(vertices.size() >= 3, what + ": a polygon needs at least 3 vertices, got " + std::to_string(vertices.size()));
  for (const Point& p : vertices)
    GS_EXPECTS(std::isfinite(p.x) && std::isfinite(p.y), what + ": polygon vertex is not finite");
  const std::size_t n = vertices.size();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 2; j < n; ++j) {
      if (i == 0 && j == n - 1) continue;  // adjacent through the closing edge
      GS_EXPECTS(!segments_cross(vertices[i], vertices[(i + 1) % n], vertices[j], vertices[(j + 1) % n]),
              what + ": polygon edges " + std::to_string(i) + " and " + std::to_string(j) +
                  " cross (the polygon must be simple)");
    }
  const double area = signed_area(vertices);
  Region r;
  r.vertices = std::move(vertices);
  const Box box = bounding_box(r);
  GS_EXPECTS(std::abs(area) > 1e-14 * (box.x1 - box.x0 + box.y1 - box.y0) * (box.x1 - box.x0 + box.y1 - box.y0),
          what + ": polygon has zero area");
  if (area < 0) std::reverse(r.vertices.begin(), r.vertices.end());
  return r;
}

Region to_region(const PlanarShape& shape, const Lattice& lattice, double ly, const std::string& what) {
  if (const auto* rect = std::get_if<Rectangle>(&shape)) {
    GS_EXPECTS(rect->width_x > 0, what + ": rectangle width_x must be positive, got " + std::to_string(rect->width_x));
    double cy = rect->center.y, wy = rect->width_y;
    if (lattice.one_dimensional()) {
      cy = 0;
      wy = ly;
    } else {
      GS_EXPECTS(wy > 0, what + ": rectangle width_y must be positive, got " + std::to_string(wy));
    }
    const double x0 = rect->center.x - rect->width_x / 2, x1 = rect->center.x + rect->width_x / 2;
    const double y0 = cy - wy / 2, y1 = cy + wy / 2;
    Region r;
    r.vertices = {{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}};
    return r;
  }
  GS_EXPECTS(!lattice.one_dimensional(),
          what + ": a 1D lattice (period_y = 0) takes only rectangles, trapezoid lines and rasters");
  if (const auto* e = std::get_if<Ellipse>(&shape)) {
    GS_EXPECTS(e->semi_axis_x > 0 && e->semi_axis_y > 0,
            what + ": ellipse semi-axes must be positive, got " + std::to_string(e->semi_axis_x) + ", " +
                std::to_string(e->semi_axis_y));
    Region r;
    r.ellipse = true;
    r.center = e->center;
    r.a = e->semi_axis_x;
    r.b = e->semi_axis_y;
    r.cos_rot = std::cos(e->rotation_deg * pi / 180);
    r.sin_rot = std::sin(e->rotation_deg * pi / 180);
    return r;
  }
  if (const auto* p = std::get_if<Polygon>(&shape)) return polygon_region(p->vertices, what);
  GS_EXPECTS(false, what + ": a raster must be the only shape of its slice");
}

// --- Splitting the boundary curves at their mutual intersections ----------------------------

struct Curve {
  bool ellipse = false;
  Point a, b;       // segment
  int e = -1;       // ellipse index
  std::vector<double> cuts;  // segment parameters in [0, 1] or ellipse angles in [0, 2π)
};

Curve segment_curve(Point a, Point b) {
  Curve c;
  c.a = a;
  c.b = b;
  return c;
}
Curve ellipse_curve(int e) {
  Curve c;
  c.ellipse = true;
  c.e = e;
  return c;
}

double wrap_angle(double t) {
  t = std::fmod(t, 2 * pi);
  return t < 0 ? t + 2 * pi : t;
}

void intersect_segments(Curve& c1, Curve& c2, double eps) {
  const Point d1 = c1.b - c1.a, d2 = c2.b - c2.a, w = c2.a - c1.a;
  const double l1 = norm(d1), l2 = norm(d2);
  const double e1 = eps / l1, e2 = eps / l2;
  const double den = cross(d1, d2);
  if (std::abs(den) > 1e-12 * l1 * l2) {
    const double t = cross(w, d2) / den, u = cross(w, d1) / den;
    if (t >= -e1 && t <= 1 + e1 && u >= -e2 && u <= 1 + e2) {
      c1.cuts.push_back(std::clamp(t, 0.0, 1.0));
      c2.cuts.push_back(std::clamp(u, 0.0, 1.0));
    }
    return;
  }
  if (std::abs(cross(w, d1)) / l1 > eps) return;  // parallel, not collinear
  // Collinear: each segment is cut where the other one ends.
  for (Point p : {c2.a, c2.b}) {
    const double t = dot(p - c1.a, d1) / (l1 * l1);
    if (t > -e1 && t < 1 + e1) c1.cuts.push_back(std::clamp(t, 0.0, 1.0));
  }
  for (Point p : {c1.a, c1.b}) {
    const double u = dot(p - c2.a, d2) / (l2 * l2);
    if (u > -e2 && u < 1 + e2) c2.cuts.push_back(std::clamp(u, 0.0, 1.0));
  }
}

void intersect_segment_ellipse(Curve& seg, Curve& ell, const Region& e, double eps) {
  const Point p = to_unit_frame(e, seg.a), q = to_unit_frame(e, seg.b);
  const Point d = q - p;
  const double A = dot(d, d), B = 2 * dot(p, d), C = dot(p, p) - 1;
  const double disc = B * B - 4 * A * C;
  if (disc < 0) return;
  const double sq = std::sqrt(disc);
  const double qq = -0.5 * (B + (B >= 0 ? sq : -sq));  // stable roots
  const double e1 = eps / norm(seg.b - seg.a);
  for (double t : {qq / A, qq != 0 ? C / qq : qq / A}) {
    if (t < -e1 || t > 1 + e1) continue;
    t = std::clamp(t, 0.0, 1.0);
    seg.cuts.push_back(t);
    const Point r = p + t * d;
    ell.cuts.push_back(wrap_angle(std::atan2(r.y, r.x)));
  }
}

bool same_ellipse(const Region& e1, const Region& e2, double eps) {
  if (norm(e1.center - e2.center) > eps || std::abs(e1.a * e1.b - e2.a * e2.b) > eps * (e1.a + e1.b)) return false;
  for (int k = 0; k < 5; ++k) {
    const Point q = to_unit_frame(e2, ellipse_point(e1, 2 * pi * k / 5));
    if (std::abs(norm(q) - 1) > 1e-9) return false;
  }
  return true;
}

// Ellipse–ellipse intersections: roots of f(t) = |E1-frame(E2(t))|² − 1 over t ∈ [0, 2π), bracketed
// on 1024 samples and bisected to rounding. Tangential contacts (no sign change) are not cuts,
// which is harmless: the pieces on either side of a touching point separate the same regions.
void intersect_ellipses(Curve& c1, const Region& e1, Curve& c2, const Region& e2, double eps) {
  if (same_ellipse(e1, e2, eps)) return;  // coincident: merged as pieces later
  const auto f = [&](double t) {
    const Point q = to_unit_frame(e1, ellipse_point(e2, t));
    return dot(q, q) - 1;
  };
  constexpr int samples = 1024;
  double t0 = 0, f0 = f(0);
  for (int k = 1; k <= samples; ++k) {
    const double t1 = 2 * pi * k / samples, f1 = f(t1);
    if (f0 == 0 || (f0 < 0) != (f1 < 0)) {
      double lo = t0, hi = t1, flo = f0;
      if (f0 != 0)
        for (int it = 0; it < 200 && hi - lo > 1e-15; ++it) {
          const double mid = 0.5 * (lo + hi), fm = f(mid);
          if ((fm < 0) == (flo < 0)) {
            lo = mid;
            flo = fm;
          } else {
            hi = mid;
          }
        }
      const double t = f0 == 0 ? t0 : 0.5 * (lo + hi);
      c2.cuts.push_back(wrap_angle(t));
      const Point q = to_unit_frame(e1, ellipse_point(e2, t));
      c1.cuts.push_back(wrap_angle(std::atan2(q.y, q.x)));
    }
    t0 = t1;
    f0 = f1;
  }
}

void sort_unique(std::vector<double>& v, double tol) {
  std::sort(v.begin(), v.end());
  std::vector<double> out;
  for (double x : v)
    if (out.empty() || x - out.back() > tol) out.push_back(x);
  v = std::move(out);
}

}  // namespace

// --- PaintedCell ----------------------------------------------------------------------------

PaintedCell::PaintedCell(const Lattice& lattice, std::span<const PlanarShape> shapes)
    : lx_(lattice.period_x), ly_(lattice.one_dimensional() ? 1.0 : lattice.period_y) {
  GS_EXPECTS(lattice.period_x > 0 && lattice.period_y >= 0,
          "lattice periods must be positive (period_y = 0 for a 1D grating), got " + std::to_string(lattice.period_x) +
              ", " + std::to_string(lattice.period_y));
  const double scale = std::max(lx_, ly_);
  const double eps = 1e-11 * scale;

  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const std::string what = "shape " + std::to_string(k);
    Region r = to_region(shapes[k], lattice, ly_, what);
    const Box box = bounding_box(r);
    GS_EXPECTS(box.x1 - box.x0 <= lx_ * (1 + 1e-12) && box.y1 - box.y0 <= ly_ * (1 + 1e-12),
            what + ": spans more than one period (" + std::to_string(box.x1 - box.x0) + " × " +
                std::to_string(box.y1 - box.y0) + " in a cell of " + std::to_string(lx_) + " × " +
                std::to_string(ly_) + "), so its periodic images would overlap");
    // Shift by whole periods so the bounding-box centre lies in the cell: then the images shifted by
    // at most one period along each axis cover every point of the cell.
    const double cx = 0.5 * (box.x0 + box.x1), cy = 0.5 * (box.y0 + box.y1);
    regions_.push_back(shifted(r, {-lx_ * std::floor(cx / lx_ + 0.5), -ly_ * std::floor(cy / ly_ + 0.5)}));
    const Box b = bounding_box(regions_.back());
    boxes_.push_back({b.x0 - eps, b.x1 + eps, b.y0 - eps, b.y1 + eps});
  }

  // Boundary curves: the cell's edges (counter-clockwise) and those of every image touching the cell.
  std::vector<Curve> curves;
  const Point corners[4] = {{-lx_ / 2, -ly_ / 2}, {lx_ / 2, -ly_ / 2}, {lx_ / 2, ly_ / 2}, {-lx_ / 2, ly_ / 2}};
  for (int i = 0; i < 4; ++i) curves.push_back(segment_curve(corners[i], corners[(i + 1) % 4]));
  for (const Region& r : regions_)
    for (int i = -1; i <= 1; ++i)
      for (int j = -1; j <= 1; ++j) {
        const Region img = shifted(r, {i * lx_, j * ly_});
        const Box b = bounding_box(img);
        if (b.x1 < -lx_ / 2 - eps || b.x0 > lx_ / 2 + eps || b.y1 < -ly_ / 2 - eps || b.y0 > ly_ / 2 + eps) continue;
        if (img.ellipse) {
          ellipses_.push_back(img);
          curves.push_back(ellipse_curve(int(ellipses_.size()) - 1));
        } else {
          const auto& v = img.vertices;
          for (std::size_t q = 0; q < v.size(); ++q) curves.push_back(segment_curve(v[q], v[(q + 1) % v.size()]));
        }
      }

  for (std::size_t i = 0; i < curves.size(); ++i)
    for (std::size_t j = i + 1; j < curves.size(); ++j) {
      Curve &c1 = curves[i], &c2 = curves[j];
      if (!c1.ellipse && !c2.ellipse) {
        intersect_segments(c1, c2, eps);
      } else if (!c1.ellipse) {
        intersect_segment_ellipse(c1, c2, ellipses_[c2.e], eps);
      } else if (!c2.ellipse) {
        intersect_segment_ellipse(c2, c1, ellipses_[c1.e], eps);
      } else {
        intersect_ellipses(c1, ellipses_[c1.e], c2, ellipses_[c2.e], eps);
      }
    }

  // Cut into pieces; keep those inside the closed cell.
  std::vector<Piece> pieces;
  const auto inside_cell = [&](Point p) { return std::abs(p.x) <= lx_ / 2 + eps && std::abs(p.y) <= ly_ / 2 + eps; };
  for (Curve& c : curves) {
    if (!c.ellipse) {
      c.cuts.push_back(0);
      c.cuts.push_back(1);
      sort_unique(c.cuts, 1e-13);
      const Point d = c.b - c.a;
      for (std::size_t k = 0; k + 1 < c.cuts.size(); ++k) {
        Piece p;
        p.a = c.a + c.cuts[k] * d;
        p.b = c.a + c.cuts[k + 1] * d;
        if (norm(p.b - p.a) > 1e-9 * scale && inside_cell(0.5 * (p.a + p.b))) pieces.push_back(p);
      }
      continue;
    }
    const Region& e = ellipses_[c.e];
    sort_unique(c.cuts, 1e-13);
    if (c.cuts.size() < 2) {  // a lone touching point does not cut the ellipse
      Piece p;
      p.arc = p.full = true;
      p.ellipse = c.e;
      p.t0 = 0;
      p.t1 = 2 * pi;
      if (inside_cell(e.center)) pieces.push_back(p);  // an uncut ellipse touching the cell lies in it
      continue;
    }
    for (std::size_t k = 0; k < c.cuts.size(); ++k) {
      Piece p;
      p.arc = true;
      p.ellipse = c.e;
      p.t0 = c.cuts[k];
      p.t1 = k + 1 < c.cuts.size() ? c.cuts[k + 1] : c.cuts[0] + 2 * pi;
      if ((p.t1 - p.t0) * std::max(e.a, e.b) > 1e-9 * scale && inside_cell(ellipse_point(e, 0.5 * (p.t0 + p.t1))))
        pieces.push_back(p);
    }
  }

  // Merge coincident pieces (shared edges, edges on the cell boundary, identical ellipses).
  const auto ends = [&](const Piece& p) -> std::array<Point, 3> {
    if (!p.arc) return {p.a, 0.5 * (p.a + p.b), p.b};
    const Region& e = ellipses_[p.ellipse];
    return {ellipse_point(e, p.t0), ellipse_point(e, 0.5 * (p.t0 + p.t1)), ellipse_point(e, p.t1)};
  };
  const double tol = 1e-9 * scale;
  const auto near = [&](Point u, Point v) { return norm(u - v) < tol; };
  std::vector<Piece> unique;
  for (const Piece& p : pieces) {
    const auto pe = ends(p);
    bool duplicate = false;
    for (const Piece& q : unique) {
      if (p.arc != q.arc || p.full != q.full) continue;
      if (p.full) {
        duplicate = same_ellipse(ellipses_[p.ellipse], ellipses_[q.ellipse], eps);
      } else {
        const auto qe = ends(q);
        duplicate = near(pe[1], qe[1]) && ((near(pe[0], qe[0]) && near(pe[2], qe[2])) ||
                                           (near(pe[0], qe[2]) && near(pe[2], qe[0])));
      }
      if (duplicate) break;
    }
    if (!duplicate) unique.push_back(p);
  }

  // The regions on either side, a hair off the midpoint along the left normal.
  const double delta = 1e-9 * scale;
  for (Piece& p : unique) {
    Point mid, tangent;
    if (p.arc) {
      const Region& e = ellipses_[p.ellipse];
      const double t = 0.5 * (p.t0 + p.t1);
      mid = ellipse_point(e, t);
      tangent = ellipse_tangent(e, t);
    } else {
      mid = 0.5 * (p.a + p.b);
      tangent = p.b - p.a;
    }
    const Point normal = (1 / norm(tangent)) * Point{-tangent.y, tangent.x};
    p.left = region_at(mid + delta * normal);
    p.right = region_at(mid - delta * normal);
    if (p.left != p.right) pieces_.push_back(p);
  }
}

int PaintedCell::region_at(Point p) const {
  if (std::abs(p.x) > lx_ / 2 || std::abs(p.y) > ly_ / 2) return -2;
  for (int k = int(regions_.size()) - 1; k >= 0; --k) {
    const auto& [x0, x1, y0, y1] = boxes_[std::size_t(k)];  // outside its box a region contains no point
    for (int i = -1; i <= 1; ++i)
      for (int j = -1; j <= 1; ++j) {
        const Point q{p.x - i * lx_, p.y - j * ly_};
        if (q.x >= x0 && q.x <= x1 && q.y >= y0 && q.y <= y1 && contains(regions_[k], q)) return k;
      }
  }
  return -1;
}

void add_polygon_harmonics(std::span<const Point> vertices, const Lattice& lattice, int n1_max, int n2_max,
                           std::span<Complex> out) {
  GS_EXPECTS(out.size() == std::size_t(2 * n1_max + 1) * std::size_t(2 * n2_max + 1),
             "add_polygon_harmonics: output of the wrong size");
  const Complex weight = (signed_area(vertices) < 0 ? -1.0 : 1.0) / (lattice.period_x * lattice.period_y);
  const std::vector<double> gx = reciprocal(lattice.period_x, n1_max), gy = reciprocal(lattice.period_y, n2_max);
  std::vector<Complex> phase_x(gx.size()), phase_y(gy.size());
  for (std::size_t i = 0; i < vertices.size(); ++i)
    add_segment_harmonics(vertices[i], vertices[(i + 1) % vertices.size()], weight, gx, gy, phase_x, phase_y, out);
}

std::vector<Complex> PaintedCell::harmonics(Complex background, std::span<const Complex> shape_values, int n1_max,
                                            int n2_max) const {
  GS_EXPECTS(shape_values.size() == regions_.size(), "PaintedCell::harmonics: expected " +
                                                      std::to_string(regions_.size()) + " shape values, got " +
                                                      std::to_string(shape_values.size()));
  GS_EXPECTS(n1_max >= 0 && n2_max >= 0, "PaintedCell::harmonics: negative harmonic range");
  const int k1 = 2 * n1_max + 1, k2 = 2 * n2_max + 1;
  std::vector<Complex> out(std::size_t(k1) * k2, 0.0);
  const auto value = [&](int region) -> Complex {
    return region == -2 ? Complex(0) : region == -1 ? background : shape_values[region];
  };
  const std::vector<double> gx = reciprocal(lx_, n1_max), gy = reciprocal(ly_, n2_max);
  const double g_max = std::hypot(gx.back(), gy.back());
  const double inv_area = 1 / (lx_ * ly_);
  std::vector<Complex> phase_x(k1), phase_y(k2);

  for (const Piece& p : pieces_) {
    const Complex jump = (value(p.left) - value(p.right)) * inv_area;
    if (jump == Complex(0)) continue;
    if (!p.arc) {
      add_segment_harmonics(p.a, p.b, jump, gx, gy, phase_x, phase_y, out);
      continue;
    }
    const Region& e = ellipses_[p.ellipse];
    if (p.full) {
      for (int i = 0; i < k1; ++i) phase_x[i] = std::polar(1.0, -gx[i] * e.center.x);
      for (int j = 0; j < k2; ++j) phase_y[j] = std::polar(1.0, -gy[j] * e.center.y);
      for (int i = 0; i < k1; ++i)
        for (int j = 0; j < k2; ++j) {
          const double u = e.cos_rot * gx[i] + e.sin_rot * gy[j], v = -e.sin_rot * gx[i] + e.cos_rot * gy[j];
          const double q = std::hypot(e.a * u, e.b * v);
          out[std::size_t(i) * k2 + j] += jump * (pi * e.a * e.b * jinc(q)) * phase_x[i] * phase_y[j];
        }
      continue;
    }
    // Partial arc: composite Gauss–Legendre, ≤ ~2 rad of phase per 16-point panel.
    const auto& gl = gauss_legendre();
    const double span = p.t1 - p.t0;
    const int panels = std::max(1, int(std::ceil(span * (std::max(e.a, e.b) * g_max + 1) / 2)));
    const double h = span / panels;
    std::vector<Complex> acc(out.size(), 0.0);
    for (int panel = 0; panel < panels; ++panel)
      for (int g = 0; g < 16; ++g) {
        const double t = p.t0 + h * (panel + 0.5 * (gl.x[g] + 1)), w = 0.5 * h * gl.w[g];
        const Point r = ellipse_point(e, t), dr = ellipse_tangent(e, t);
        for (int i = 0; i < k1; ++i) phase_x[i] = std::polar(w, -gx[i] * r.x);
        for (int j = 0; j < k2; ++j) phase_y[j] = std::polar(1.0, -gy[j] * r.y);
        for (int i = 0; i < k1; ++i)
          for (int j = 0; j < k2; ++j) {
            const bool zero = i == n1_max && j == n2_max;
            const double c = zero ? r.x * dr.y : gx[i] * dr.y - gy[j] * dr.x;
            acc[std::size_t(i) * k2 + j] += c * (zero ? Complex(w) : phase_x[i] * phase_y[j]);
          }
      }
    for (int i = 0; i < k1; ++i)
      for (int j = 0; j < k2; ++j) {
        const double g2 = gx[i] * gx[i] + gy[j] * gy[j];
        const std::size_t idx = std::size_t(i) * k2 + j;
        out[idx] += jump * (g2 == 0 ? acc[idx] : I * acc[idx] / g2);
      }
  }
  return out;
}

// --- Rasters ----------------------------------------------------------------------------------

std::vector<Complex> raster_harmonics(const Lattice& lattice, const Raster& raster, Complex background,
                                      std::span<const Complex> values, int n1_max, int n2_max) {
  GS_EXPECTS(raster.nx > 0 && raster.ny > 0, "raster: nx and ny must be positive, got " + std::to_string(raster.nx) +
                                              " × " + std::to_string(raster.ny));
  GS_EXPECTS(!lattice.one_dimensional() || raster.ny == 1, "raster: a 1D lattice needs ny = 1, got " +
                                                            std::to_string(raster.ny));
  GS_EXPECTS(raster.pixels.size() == std::size_t(raster.nx) * raster.ny,
          "raster: expected nx·ny = " + std::to_string(std::size_t(raster.nx) * raster.ny) + " pixels, got " +
              std::to_string(raster.pixels.size()));
  GS_EXPECTS(values.size() == raster.materials.size(), "raster: one value per material expected");
  for (int idx : raster.pixels)
    GS_EXPECTS(idx >= -1 && idx < int(raster.materials.size()),
            "raster: pixel material index " + std::to_string(idx) + " out of range (−1 = background)");
  const double lx = lattice.period_x, ly = lattice.one_dimensional() ? 1.0 : lattice.period_y;
  const int k1 = 2 * n1_max + 1, k2 = 2 * n2_max + 1;
  // χ̂(n) = sinc(n1/nx) sinc(n2/ny)/(nx ny) · Σ_pixels v e^{−iG·r_centre}   (sinc t = sin πt/(πt)),
  // evaluated separably: rows first.
  std::vector<Complex> rows(std::size_t(raster.ny) * k1, 0.0);
  for (int iy = 0; iy < raster.ny; ++iy)
    for (int ix = 0; ix < raster.nx; ++ix) {
      const int idx = raster.pixels[std::size_t(iy) * raster.nx + ix];
      const Complex v = idx < 0 ? background : values[idx];
      const double x = -lx / 2 + (ix + 0.5) * lx / raster.nx;
      for (int i = 0; i < k1; ++i) rows[std::size_t(iy) * k1 + i] += v * std::polar(1.0, -2 * pi * (i - n1_max) * x / lx);
    }
  std::vector<Complex> out(std::size_t(k1) * k2, 0.0);
  for (int iy = 0; iy < raster.ny; ++iy) {
    const double y = -ly / 2 + (iy + 0.5) * ly / raster.ny;
    for (int j = 0; j < k2; ++j) {
      const Complex phase = std::polar(1.0, -2 * pi * (j - n2_max) * y / ly);
      for (int i = 0; i < k1; ++i) out[std::size_t(i) * k2 + j] += rows[std::size_t(iy) * k1 + i] * phase;
    }
  }
  for (int i = 0; i < k1; ++i)
    for (int j = 0; j < k2; ++j)
      out[std::size_t(i) * k2 + j] *= sinc_unnormalised(pi * (i - n1_max) / raster.nx) *
                                      sinc_unnormalised(pi * (j - n2_max) / raster.ny) /
                                      (double(raster.nx) * raster.ny);
  return out;
}

std::vector<Complex> material_harmonics(const Lattice& lattice, const SliceContent& slice, double wavelength,
                                        const std::function<Complex(Complex)>& f, int n1_max, int n2_max) {
  GS_EXPECTS(n1_max >= 0 && n2_max >= 0, "harmonic ranges must be ≥ 0");
  GS_EXPECTS(!lattice.one_dimensional() || n2_max == 0,
          "a 1D lattice (period_y = 0) has no y-harmonics, got a range of " + std::to_string(n2_max));
  const auto value = [&](const Material& m) { return f(m.permittivity(wavelength)); };
  const Complex background = value(slice.background);
  if (slice.shapes.empty()) {
    std::vector<Complex> out(std::size_t(2 * n1_max + 1) * (2 * n2_max + 1), 0.0);
    out[std::size_t(n1_max) * (2 * n2_max + 1) + n2_max] = background;
    return out;
  }
  if (const auto* raster = std::get_if<Raster>(&slice.shapes.front())) {
    GS_EXPECTS(slice.shapes.size() == 1, "a raster must be the only shape of its slice");
    std::vector<Complex> values;
    for (const Material& m : raster->materials) values.push_back(value(m));
    return raster_harmonics(lattice, *raster, background, values, n1_max, n2_max);
  }
  std::vector<Complex> values;
  for (const PlanarShape& s : slice.shapes)
    std::visit(
        [&](const auto& shape) {
          using T = std::decay_t<decltype(shape)>;
          if constexpr (std::is_same_v<T, Raster>) {
            GS_EXPECTS(false, "a raster must be the only shape of its slice");
          } else {
            values.push_back(value(shape.material));
          }
        },
        s);
  return PaintedCell(lattice, slice.shapes).harmonics(background, values, n1_max, n2_max);
}

std::vector<Complex> contrast_harmonics(const Lattice& lattice, const SliceContent& slice, double wavelength,
                                        Complex superstrate_permittivity, int m1, int m2) {
  GS_EXPECTS(m1 >= 0 && m2 >= 0, "harmonic counts M1, M2 must be ≥ 0");
  GS_EXPECTS(!lattice.one_dimensional() || m2 == 0, "a 1D lattice (period_y = 0) needs M2 = 0, got " + std::to_string(m2));
  return material_harmonics(
      lattice, slice, wavelength, [&](Complex eps) { return eps / superstrate_permittivity - 1.0; }, 2 * m1, 2 * m2);
}

}  // namespace gratingsim::physics
