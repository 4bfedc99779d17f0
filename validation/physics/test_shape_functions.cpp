// Shape functions χ̂(n) (docs/formulation.md §3) against independent references: the closed forms written
// out here from the formulation's formulas, decompositions into rectangles, and a brute-force
// scanline quadrature of the painted cell (later shapes win) with its own point-in-shape painter.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include "physics/shape_functions.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;
using C = std::complex<double>;

namespace {
constexpr double pi = std::numbers::pi;

double sinc(double t) { return t == 0 ? 1.0 : std::sin(pi * t) / (pi * t); }

/// docs/formulation.md §3: Δχ (wx wy/(ΛxΛy)) sinc(n1 wx/Λx) sinc(n2 wy/Λy) e^{−i2π(n1 x0/Λx + n2 y0/Λy)}.
C rectangle_ft(double lx, double ly, Point c, double wx, double wy, int n1, int n2) {
  return (wx * wy / (lx * ly)) * sinc(n1 * wx / lx) * sinc(n2 * wy / ly) *
         std::polar(1.0, -2 * pi * (n1 * c.x / lx + n2 * c.y / ly));
}
/// docs/formulation.md §3: (πab/(ΛxΛy)) 2J1(q)/q, q = 2π sqrt((n1 a/Λx)² + (n2 b/Λy)²), times the centre's phase.
C ellipse_ft(double lx, double ly, Point c, double a, double b, int n1, int n2) {
  const double q = 2 * pi * std::hypot(n1 * a / lx, n2 * b / ly);
  const double jinc = q == 0 ? 1.0 : 2 * std::cyl_bessel_j(1.0, q) / q;
  return (pi * a * b / (lx * ly)) * jinc * std::polar(1.0, -2 * pi * (n1 * c.x / lx + n2 * c.y / ly));
}

std::size_t at(int n1, int n2, int n1_max, int n2_max) { return std::size_t(n1 + n1_max) * (2 * n2_max + 1) + n2 + n2_max; }

// --- Brute-force reference: scanlines with exact x-integration ----------------------------
struct TestShape {
  bool ellipse;
  std::vector<Point> poly;  // any orientation
  Point c;
  double a = 0, b = 0, rot = 0;  // radians
};

TestShape polygon_shape(std::vector<Point> v) {
  TestShape t;
  t.ellipse = false;
  t.poly = std::move(v);
  return t;
}

bool inside(const TestShape& s, Point p) {
  if (s.ellipse) {
    const double dx = p.x - s.c.x, dy = p.y - s.c.y;
    const double u = (std::cos(s.rot) * dx + std::sin(s.rot) * dy) / s.a;
    const double v = (-std::sin(s.rot) * dx + std::cos(s.rot) * dy) / s.b;
    return u * u + v * v < 1;
  }
  bool in = false;
  const auto& v = s.poly;
  for (std::size_t i = 0, j = v.size() - 1; i < v.size(); j = i++)
    if ((v[i].y > p.y) != (v[j].y > p.y) && p.x < (v[j].x - v[i].x) * (p.y - v[i].y) / (v[j].y - v[i].y) + v[i].x)
      in = !in;
  return in;
}

/// x where the horizontal line y crosses the shape's boundary (no images).
void crossings(const TestShape& s, double y, std::vector<double>& xs) {
  if (s.ellipse) {
    // Points c + R(a cos t, b sin t) with y-coordinate y: solve in x numerically via the quadratic
    // of the implicit form in x.
    const double cr = std::cos(s.rot), sr = std::sin(s.rot), dy = y - s.c.y;
    // u = (cr dx + sr dy)/a, v = (−sr dx + cr dy)/b, u² + v² = 1 → A dx² + B dx + C = 0.
    const double A = cr * cr / (s.a * s.a) + sr * sr / (s.b * s.b);
    const double B = 2 * dy * (cr * sr / (s.a * s.a) - sr * cr / (s.b * s.b));
    const double Cc = dy * dy * (sr * sr / (s.a * s.a) + cr * cr / (s.b * s.b)) - 1;
    const double disc = B * B - 4 * A * Cc;
    if (disc > 0) {
      xs.push_back(s.c.x + (-B - std::sqrt(disc)) / (2 * A));
      xs.push_back(s.c.x + (-B + std::sqrt(disc)) / (2 * A));
    }
    return;
  }
  const auto& v = s.poly;
  for (std::size_t i = 0, j = v.size() - 1; i < v.size(); j = i++)
    if ((v[i].y > y) != (v[j].y > y)) xs.push_back(v[i].x + (y - v[i].y) * (v[j].x - v[i].x) / (v[j].y - v[i].y));
}

TestShape shift(TestShape s, double dx, double dy) {
  s.c.x += dx;
  s.c.y += dy;
  for (Point& p : s.poly) {
    p.x += dx;
    p.y += dy;
  }
  return s;
}

/// y values where the scanline integrand is not smooth: vertices, ellipse extremes, cell edges.
std::vector<double> events(double ly, const std::vector<TestShape>& images) {
  std::vector<double> ys{-ly / 2, ly / 2};
  for (const TestShape& s : images) {
    if (s.ellipse) {
      const double ey = std::hypot(s.a * std::sin(s.rot), s.b * std::cos(s.rot));
      ys.insert(ys.end(), {s.c.y - ey, s.c.y + ey});
    } else {
      for (const Point& p : s.poly) ys.push_back(p.y);
    }
  }
  std::vector<double> inside;
  for (double y : ys)
    if (y >= -ly / 2 && y <= ly / 2) inside.push_back(y);
  std::sort(inside.begin(), inside.end());
  return inside;
}

/// χ̂(n) of the painted cell (later wins, periodic images at ±1 period): in y, the midpoint rule
/// on about `rows` scanlines placed within the bands between events (so no row straddles an edge
/// parallel to x); in x, exact integration of e^{−i gx x} between consecutive crossings.
std::vector<C> scanline_reference(double lx, double ly, const std::vector<TestShape>& shapes, C background,
                                  const std::vector<C>& values, int n1_max, int n2_max, int rows) {
  std::vector<TestShape> images;
  std::vector<int> owner;
  for (std::size_t k = 0; k < shapes.size(); ++k)
    for (int i = -1; i <= 1; ++i)
      for (int j = -1; j <= 1; ++j) {
        images.push_back(shift(shapes[k], i * lx, j * ly));
        owner.push_back(int(k));
      }
  const auto paint = [&](Point p) {
    for (int k = int(images.size()) - 1; k >= 0; --k)  // images of later shapes come later
      if (inside(images[k], p)) return values[owner[k]];
    return background;
  };
  const int k1 = 2 * n1_max + 1, k2 = 2 * n2_max + 1;
  std::vector<C> out(std::size_t(k1) * k2, 0.0);
  const std::vector<double> ys = events(ly, images);
  for (std::size_t band = 0; band + 1 < ys.size(); ++band) {
    const double height = ys[band + 1] - ys[band];
    if (height <= 0) continue;
    const int band_rows = std::max(4, int(std::ceil(rows * height / ly)));
    const double dy = height / band_rows;
    for (int row = 0; row < band_rows; ++row) {
      const double y = ys[band] + (row + 0.5) * dy;
      std::vector<double> xs{-lx / 2, lx / 2};
      for (const TestShape& s : images) crossings(s, y, xs);
      std::sort(xs.begin(), xs.end());
      for (std::size_t q = 0; q + 1 < xs.size(); ++q) {
        const double x0 = std::max(xs[q], -lx / 2), x1 = std::min(xs[q + 1], lx / 2);
        if (x1 <= x0) continue;
        const C v = paint({0.5 * (x0 + x1), y});
        for (int n1 = -n1_max; n1 <= n1_max; ++n1) {
          const double gx = 2 * pi * n1 / lx;
          const C ix = n1 == 0 ? C(x1 - x0) : (std::polar(1.0, -gx * x1) - std::polar(1.0, -gx * x0)) / C(0, -gx);
          for (int n2 = -n2_max; n2 <= n2_max; ++n2)
            out[at(n1, n2, n1_max, n2_max)] += v * ix * std::polar(dy, -2 * pi * n2 * y / ly) / (lx * ly);
        }
      }
    }
  }
  return out;
}

double max_abs_diff(const std::vector<C>& a, const std::vector<C>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

Material eps(C e) { return Material::constant_permittivity(e); }

}  // namespace

TEST_CASE("single shapes reproduce the closed forms of docs/formulation.md §3", "[physics][shapes]") {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto& rng = test::rng();
  const double lx = 1.3, ly = 0.9;
  const Lattice lattice{lx, ly};
  const int n1_max = 6, n2_max = 5;
  for (int trial = 0; trial < 5; ++trial) {
    const Point c{lx * (u(rng) - 0.5) * 3, ly * (u(rng) - 0.5) * 3};  // anywhere: periodic
    const double wx = lx * (0.05 + 0.95 * u(rng)), wy = ly * (0.05 + 0.95 * u(rng));
    const C value(u(rng) - 0.5, u(rng));
    const PlanarShape rect = Rectangle{c, wx, wy, {}};
    const auto got = PaintedCell(lattice, {&rect, 1}).harmonics(0.0, {&value, 1}, n1_max, n2_max);
    double err = 0;
    for (int n1 = -n1_max; n1 <= n1_max; ++n1)
      for (int n2 = -n2_max; n2 <= n2_max; ++n2)
        err = std::max(err, std::abs(got[at(n1, n2, n1_max, n2_max)] - value * rectangle_ft(lx, ly, c, wx, wy, n1, n2)));
    INFO("rectangle at (" << c.x << ", " << c.y << ") " << wx << " × " << wy);
    CHECK(err < 1e-13);

    // Ellipse, inside the cell (uncut: the Bessel closed form), and cut by the cell edge (arcs).
    for (bool cut : {false, true}) {
      const double a = 0.45 * lx * (0.2 + 0.8 * u(rng)), b = 0.45 * ly * (0.2 + 0.8 * u(rng));
      const Point e0 = cut ? Point{lx / 2 - 0.3 * a, -ly / 2 + 0.2 * b}
                           : Point{(lx / 2 - a) * (2 * u(rng) - 1), (ly / 2 - b) * (2 * u(rng) - 1)};
      const PlanarShape ell = Ellipse{e0, a, b, 0, {}};
      PaintedCell cell(lattice, {&ell, 1});
      const auto got_e = cell.harmonics(0.0, {&value, 1}, n1_max, n2_max);
      double err_e = 0;
      for (int n1 = -n1_max; n1 <= n1_max; ++n1)
        for (int n2 = -n2_max; n2 <= n2_max; ++n2)
          err_e = std::max(err_e, std::abs(got_e[at(n1, n2, n1_max, n2_max)] - value * ellipse_ft(lx, ly, e0, a, b, n1, n2)));
      INFO("ellipse at (" << e0.x << ", " << e0.y << ") a = " << a << ", b = " << b << (cut ? ", cut by the cell edge" : ""));
      CHECK(err_e < 1e-12);
    }
  }
}

TEST_CASE("rotated ellipse and polygons: exact transforms", "[physics][shapes]") {
  const double lx = 1.0, ly = 1.2;
  const Lattice lattice{lx, ly};
  const int n1_max = 5, n2_max = 5;
  const C value(2.0, 0.5);
  SECTION("a circle is invariant under rotation; a rotated ellipse equals the rotated-frequency formula") {
    const PlanarShape e1 = Ellipse{{0.1, -0.05}, 0.3, 0.3, 0, {}}, e2 = Ellipse{{0.1, -0.05}, 0.3, 0.3, 37, {}};
    const auto a = PaintedCell(lattice, {&e1, 1}).harmonics(0.0, {&value, 1}, n1_max, n2_max);
    const auto b = PaintedCell(lattice, {&e2, 1}).harmonics(0.0, {&value, 1}, n1_max, n2_max);
    CHECK(max_abs_diff(a, b) < 1e-14);
    // An ellipse with semi-axes (0.35, 0.15) rotated by 90° is the axis-aligned (0.15, 0.35) one.
    const PlanarShape e3 = Ellipse{{0.0, 0.1}, 0.35, 0.15, 90, {}}, e4 = Ellipse{{0.0, 0.1}, 0.15, 0.35, 0, {}};
    CHECK(max_abs_diff(PaintedCell(lattice, {&e3, 1}).harmonics(0.0, {&value, 1}, n1_max, n2_max),
                       PaintedCell(lattice, {&e4, 1}).harmonics(0.0, {&value, 1}, n1_max, n2_max)) < 1e-13);
  }
  SECTION("a non-convex polygon equals its decomposition into rectangles") {
    // An L: [−0.4, 0.3] × [−0.5, −0.2] ∪ [−0.4, −0.1] × [−0.2, 0.45], given clockwise.
    const PlanarShape ell_shape =
        Polygon{{{-0.4, -0.5}, {-0.4, 0.45}, {-0.1, 0.45}, {-0.1, -0.2}, {0.3, -0.2}, {0.3, -0.5}}, {}};
    const auto got = PaintedCell(lattice, {&ell_shape, 1}).harmonics(0.0, {&value, 1}, n1_max, n2_max);
    double err = 0;
    for (int n1 = -n1_max; n1 <= n1_max; ++n1)
      for (int n2 = -n2_max; n2 <= n2_max; ++n2) {
        const C ref = value * (rectangle_ft(lx, ly, {-0.05, -0.35}, 0.7, 0.3, n1, n2) +
                               rectangle_ft(lx, ly, {-0.25, 0.125}, 0.3, 0.65, n1, n2));
        err = std::max(err, std::abs(got[at(n1, n2, n1_max, n2_max)] - ref));
      }
    CHECK(err < 1e-13);
  }
  SECTION("invalid shapes are refused with a message") {
    const PlanarShape bowtie = Polygon{{{-0.2, -0.2}, {0.3, 0.2}, {0.3, -0.2}, {-0.2, 0.3}}, {}};
    CHECK_THROWS_WITH(PaintedCell(lattice, {&bowtie, 1}), Catch::Contains("must be simple"));
    const PlanarShape wide = Rectangle{{0, 0}, 1.5, 0.2, {}};
    CHECK_THROWS_WITH(PaintedCell(lattice, {&wide, 1}), Catch::Contains("more than one period"));
    const PlanarShape negative = Ellipse{{0, 0}, -0.1, 0.2, 0, {}};
    CHECK_THROWS_WITH(PaintedCell(lattice, {&negative, 1}), Catch::Contains("semi-axes must be positive"));
    const PlanarShape circle = Ellipse{{0, 0}, 0.1, 0.1, 0, {}};
    CHECK_THROWS_WITH(PaintedCell(Lattice{1.0, 0.0}, {&circle, 1}), Catch::Contains("1D lattice"));
  }
}

TEST_CASE("add_polygon_harmonics adds a lone polygon's transform, against scanlines", "[physics][shapes]") {
  // Random star-shaped (so simple) polygons of 5 to 9 vertices in either orientation, some across the cell's
  // edges, on a rectangular lattice; the transform is added to random values already in `out`.
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto& rng = test::rng();
  const double px = 1.0, py = 1.3;
  const Lattice lat{px, py};
  const int nx = 4, ny = 3;
  for (int trial = 0; trial < 4; ++trial) {
    const int count = 5 + int(5 * u(rng));
    const Point centre{px * (u(rng) - 0.5), py * (u(rng) - 0.5)};
    // Jittered angles keep every gap below π, so that the centre sees every edge (star-shaped).
    const double turn = 2 * pi * u(rng);
    std::vector<Point> vertices;
    for (int k = 0; k < count; ++k) {
      const double t = turn + 2 * pi * (k + 0.8 * u(rng)) / count, r = 0.1 + 0.3 * u(rng);
      vertices.push_back({centre.x + r * std::cos(t), centre.y + r * std::sin(t)});
    }
    if (u(rng) < 0.5) std::reverse(vertices.begin(), vertices.end());
    const std::vector<C> before = test::random_complex<double>(std::size_t(2 * nx + 1) * (2 * ny + 1));
    std::vector<C> out = before;
    add_polygon_harmonics(vertices, lat, nx, ny, out);
    std::vector<C> added(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) added[i] = out[i] - before[i];
    const auto ref = scanline_reference(px, py, {polygon_shape(vertices)}, C(0.0), {C(1.0)}, nx, ny, 20000);
    INFO("trial " << trial << ", " << count << " vertices");
    CHECK(max_abs_diff(added, ref) < 1e-6);  // the reference's own error is ~1e-7 at 20000 rows
  }
}

TEST_CASE("overlaps: later shapes win, exactly", "[physics][shapes]") {
  const double lx = 1.0, ly = 1.0;
  const Lattice lattice{lx, ly};
  const int n1_max = 4, n2_max = 4;
  SECTION("nested rectangles: outer + (inner − outer) contrast on the inner one") {
    const std::vector<PlanarShape> shapes{Rectangle{{0.05, 0}, 0.6, 0.5, {}}, Rectangle{{0.1, 0.05}, 0.2, 0.2, {}}};
    const std::vector<C> v{C(3, 0.1), C(-0.5, 0)};
    const auto got = PaintedCell(lattice, shapes).harmonics(0.25, v, n1_max, n2_max);
    double err = 0;
    for (int n1 = -n1_max; n1 <= n1_max; ++n1)
      for (int n2 = -n2_max; n2 <= n2_max; ++n2) {
        C ref = (v[0] - 0.25) * rectangle_ft(lx, ly, {0.05, 0}, 0.6, 0.5, n1, n2) +
                (v[1] - v[0]) * rectangle_ft(lx, ly, {0.1, 0.05}, 0.2, 0.2, n1, n2);
        if (n1 == 0 && n2 == 0) ref += 0.25;
        err = std::max(err, std::abs(got[at(n1, n2, n1_max, n2_max)] - ref));
      }
    CHECK(err < 1e-13);
    // Swapping the order hides the inner rectangle entirely.
    const std::vector<PlanarShape> swapped(shapes.rbegin(), shapes.rend());
    const std::vector<C> v_swapped{v[1], v[0]};
    const auto hidden = PaintedCell(lattice, swapped).harmonics(0.25, v_swapped, n1_max, n2_max);
    const PlanarShape outer = shapes[0];
    CHECK(max_abs_diff(hidden, PaintedCell(lattice, {&outer, 1}).harmonics(0.25, {&v[0], 1}, n1_max, n2_max)) < 1e-13);
  }
  SECTION("two partially overlapping rectangles of the same material count their overlap once") {
    const std::vector<PlanarShape> cross{Rectangle{{0, 0}, 0.6, 0.2, {}}, Rectangle{{0, 0}, 0.2, 0.6, {}}};
    const std::vector<C> v{C(1.5), C(1.5)};
    const auto got = PaintedCell(lattice, cross).harmonics(0.0, v, n1_max, n2_max);
    double err = 0;
    for (int n1 = -n1_max; n1 <= n1_max; ++n1)
      for (int n2 = -n2_max; n2 <= n2_max; ++n2) {
        const C ref = 1.5 * (rectangle_ft(lx, ly, {0, 0}, 0.6, 0.2, n1, n2) + rectangle_ft(lx, ly, {0, 0}, 0.2, 0.6, n1, n2) -
                             rectangle_ft(lx, ly, {0, 0}, 0.2, 0.2, n1, n2));
        err = std::max(err, std::abs(got[at(n1, n2, n1_max, n2_max)] - ref));
      }
    CHECK(err < 1e-13);
  }
  SECTION("random overlapping rectangles, ellipses and a non-convex polygon across the cell edge vs scanlines") {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    auto& rng = test::rng();
    const double px = 1.1, py = 0.8;
    const Lattice lat{px, py};
    for (int trial = 0; trial < 2; ++trial) {
      std::vector<PlanarShape> shapes;
      std::vector<TestShape> mirror;
      std::vector<C> values;
      const auto add_rect = [&](Point c, double wx, double wy) {
        shapes.push_back(Rectangle{c, wx, wy, {}});
        mirror.push_back(polygon_shape({{c.x - wx / 2, c.y - wy / 2}, {c.x + wx / 2, c.y - wy / 2},
                                        {c.x + wx / 2, c.y + wy / 2}, {c.x - wx / 2, c.y + wy / 2}}));
      };
      const auto add_ellipse = [&](Point c, double a, double b, double rot_deg) {
        Ellipse e;
        e.center = c;
        e.semi_axis_x = a;
        e.semi_axis_y = b;
        e.rotation_deg = rot_deg;
        shapes.emplace_back(std::in_place_type<Ellipse>, std::move(e));
        TestShape t{true, {}, c, a, b, rot_deg * pi / 180};
        mirror.push_back(t);
      };
      const auto add_polygon = [&](std::vector<Point> v) {
        shapes.push_back(Polygon{v, {}});
        mirror.push_back(polygon_shape(v));
      };
      add_rect({px * (u(rng) - 0.5), py * (u(rng) - 0.5)}, px * (0.3 + 0.5 * u(rng)), py * (0.3 + 0.5 * u(rng)));
      add_ellipse({px * 0.45, py * (u(rng) - 0.5)}, 0.25 * px, 0.2 * py, 360 * u(rng));  // crosses x = Λx/2
      const double ox = px * (u(rng) - 0.5) * 0.4, oy = -py * 0.45;  // crosses y = −Λy/2
      add_polygon({{ox - 0.3, oy - 0.1}, {ox + 0.3, oy - 0.1}, {ox + 0.3, oy + 0.25}, {ox + 0.05, oy + 0.05},
                   {ox - 0.3, oy + 0.3}});  // non-convex (a notch)
      add_ellipse({px * (u(rng) - 0.5) * 0.5, py * (u(rng) - 0.5) * 0.5}, 0.2 * px, 0.3 * py, 0);
      for (std::size_t k = 0; k < shapes.size(); ++k) values.push_back(C(1 + 2 * u(rng), 0.5 * u(rng)));
      const C background(0.3, 0.05);
      const int nx = 3, ny = 3;
      const PaintedCell cell(lat, shapes);
      const auto got = cell.harmonics(background, values, nx, ny);
      const auto ref = scanline_reference(px, py, mirror, background, values, nx, ny, 20000);
      INFO("pieces " << cell.piece_count());
      CHECK(max_abs_diff(got, ref) < 1e-6);  // the reference's own error is ~1e-7 at 20000 rows
      // The painted value agrees with the independent painter at random points.
      for (int i = 0; i < 200; ++i) {
        const Point p{px * (u(rng) - 0.5), py * (u(rng) - 0.5)};
        const int region = cell.region_at(p);
        C expected = background;
        for (int k = int(mirror.size()) - 1; k >= 0 && expected == background; --k)
          for (int a = -1; a <= 1; ++a)
            for (int b = -1; b <= 1; ++b)
              if (expected == background && inside(shift(mirror[k], a * px, b * py), p)) expected = values[k];
        CHECK((region < 0 ? background : values[region]) == expected);
      }
    }
  }
}

TEST_CASE("rasters: exact for the pixel map, first-order for the shape it samples", "[physics][shapes]") {
  const double lx = 1.0, ly = 0.8;
  const Lattice lattice{lx, ly};
  const int n1_max = 4, n2_max = 4;
  // A rectangle on pixel boundaries is represented exactly.
  Raster r;
  r.nx = 20;
  r.ny = 16;
  r.materials = {eps(2.0)};
  r.pixels.assign(std::size_t(r.nx) * r.ny, -1);
  for (int iy = 4; iy < 10; ++iy)
    for (int ix = 3; ix < 12; ++ix) r.pixels[std::size_t(iy) * r.nx + ix] = 0;
  const C values[] = {C(1.7, 0.2)};
  const auto got = raster_harmonics(lattice, r, 0.0, values, n1_max, n2_max);
  // Pixels ix 3..11 → x ∈ [−0.35, 0.1]; iy 4..9 → y ∈ [−0.2, 0.1].
  double err = 0;
  for (int n1 = -n1_max; n1 <= n1_max; ++n1)
    for (int n2 = -n2_max; n2 <= n2_max; ++n2)
      err = std::max(err, std::abs(got[at(n1, n2, n1_max, n2_max)] -
                                   values[0] * rectangle_ft(lx, ly, {-0.125, -0.05}, 0.45, 0.3, n1, n2)));
  CHECK(err < 1e-13);
  // A sampled circle converges to the Bessel form as the pixels shrink.
  double previous = 1;
  for (int n : {64, 256}) {
    Raster c;
    c.nx = c.ny = n;
    c.materials = {eps(2.0)};
    c.pixels.resize(std::size_t(n) * n);
    for (int iy = 0; iy < n; ++iy)
      for (int ix = 0; ix < n; ++ix) {
        const double x = -lx / 2 + (ix + 0.5) * lx / n, y = -ly / 2 + (iy + 0.5) * ly / n;
        c.pixels[std::size_t(iy) * n + ix] = std::hypot(x / 0.3, y / 0.25) < 1 ? 0 : -1;
      }
    const auto gc = raster_harmonics(lattice, c, 0.0, values, n1_max, n2_max);
    double e = 0;
    for (int n1 = -n1_max; n1 <= n1_max; ++n1)
      for (int n2 = -n2_max; n2 <= n2_max; ++n2)
        e = std::max(e, std::abs(gc[at(n1, n2, n1_max, n2_max)] - values[0] * ellipse_ft(lx, ly, {0, 0}, 0.3, 0.25, n1, n2)));
    INFO("pixels " << n << ": max error " << e);
    CHECK(e < 0.02 * 64.0 / n);
    CHECK(e < previous);
    previous = e;
  }
}

TEST_CASE("contrast harmonics: χ = ε/ε1 − 1 of background and shapes", "[physics][shapes]") {
  const Lattice lattice{1.0, 0.0};  // 1D: rectangles are lines, their y extent ignored
  SliceContent slice;
  slice.background = eps(1.0);
  slice.shapes.push_back(Rectangle{{0.1, 123.0}, 0.4, 7.0, eps(4.0)});
  const C eps1 = 2.0;
  const auto chi = contrast_harmonics(lattice, slice, 1.0, eps1, 3, 0);
  REQUIRE(chi.size() == 13);
  for (int n = -6; n <= 6; ++n) {
    const C ref = (4.0 / 2.0 - 1.0 - (1.0 / 2.0 - 1.0)) * 0.4 * sinc(n * 0.4) * std::polar(1.0, -2 * pi * n * 0.1) +
                  (n == 0 ? C(1.0 / 2.0 - 1.0) : C(0));
    CHECK(std::abs(chi[n + 6] - ref) < 1e-14);
  }
}
