// physics/discretisation.cpp's slice grid (slice_grid, the grid discretise() and the solve use)
// against the layer stack recomputed here: layers top to bottom, z = 0 the substrate's surface, layer
// l cut into n_l·factor equal slices, n_l its slice count or ceil(thickness / max_slice_thickness);
// slice k of a layer whose top is at z_top has centre z_top − (k + ½)·thickness/(n_l·factor).
// cut_into_steps against structure.hpp's TaperedEllipse: step j of n holds every shape at height
// h = thickness·(1 − (j + ½)/n), semi-axes linear in h, a line's width its trapezoid's there.
#include <array>
#include <cmath>
#include <numbers>
#include <random>
#include <variant>
#include <vector>

#include "core/error.hpp"
#include "physics/discretisation.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

TEST_CASE("slice grid: centres and thicknesses of every layer, top down, times the slice factor",
          "[physics][discretisation]") {
  std::uniform_real_distribution<double> thickness(0.05, 2.0);
  std::uniform_int_distribution<int> count(1, 7);
  Structure s;
  s.lattice = {1.0, 0.0};
  std::vector<double> heights;  // each layer's thickness
  std::vector<int> counts;      // each layer's slices, before the factor
  for (int l = 0; l < 4; ++l) {
    Layer layer;
    layer.thickness = thickness(test::rng());
    if (l == 2) {
      layer.max_slice_thickness = layer.thickness / 3.5;  // ceil(3.5) = 4 slices
      counts.push_back(4);
    } else {
      layer.slices = count(test::rng());
      counts.push_back(layer.slices);
    }
    heights.push_back(layer.thickness);
    s.layers.push_back(layer);
  }
  for (const int factor : {1, 2}) {
    const ZGrid grid = slice_grid(s, factor);
    std::vector<double> z, dz;
    double top = 0;
    for (const double h : heights) top += h;
    for (std::size_t l = 0; l < heights.size(); ++l) {
      const int n = counts[l] * factor;
      for (int k = 0; k < n; ++k) {
        z.push_back(top - (k + 0.5) * heights[l] / n);
        dz.push_back(heights[l] / n);
      }
      top -= heights[l];
    }
    REQUIRE(grid.z.size() == z.size());
    REQUIRE(grid.thickness.size() == z.size());
    for (std::size_t q = 0; q < z.size(); ++q) {
      CHECK(std::abs(grid.z[q] - z[q]) <= 1e-14 * 8);
      CHECK(std::abs(grid.thickness[q] - dz[q]) <= 1e-15 * 8);
    }
    // The grid the solve discretises on is this one, double for double.
    const Discretisation d = discretise(s, factor);
    CHECK(d.grid.z == grid.z);
    CHECK(d.grid.thickness == grid.thickness);
  }
  s.layers[1].thickness = -1;
  CHECK_THROWS_AS(slice_grid(s), InvalidArgument);
}

TEST_CASE("a layer holding a tapered ellipse is cut into one step per slice, every shape at the step's centre",
          "[physics][discretisation]") {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const Lattice lattice{1.0, 0.8};
  Layer layer;
  layer.thickness = 0.2 + 0.3 * u(test::rng());
  layer.slices = 5;
  const double bottom_a = 0.1 + 0.2 * u(test::rng()), top_b = 0.1 + 0.2 * u(test::rng());
  // Semi-axis a shrinks to 0 at 0.6 of the height (absent above: the two top steps), b grows.
  const TaperedEllipse tapered{
      {0.1, -0.05}, bottom_a, 0.05, -bottom_a * 2 / 3, top_b, 25.0, Material::constant_index(2.0)};
  const TrapezoidLine line{0.3, 0.2, 80.0, Material::constant_index(1.5)};
  const Rectangle rectangle{{-0.3, 0.2}, 0.1, 0.2, Material::constant_index(1.7)};
  layer.shapes = {tapered, line, rectangle};
  std::vector<std::vector<std::array<double, 2>>> rates;
  const Layer cut = cut_into_steps(layer, lattice, &rates);
  CHECK(cut.shapes.empty());
  REQUIRE(cut.steps.size() == 5);
  REQUIRE(rates.size() == 5);
  for (int j = 0; j < 5; ++j) {  // top step first
    const double f = 1 - (j + 0.5) / 5;  // the step centre's height over the thickness
    const double a = bottom_a * (1 - f / 0.6), b = 0.05 + (top_b - 0.05) * f;
    const auto& step = cut.steps[std::size_t(j)];
    INFO("step " << j);
    REQUIRE(step.size() == (a > 0 ? 3u : 2u));
    // SliceContent::wall_slopes of each shape (2D): the ellipse's semi-axis rates (constant: linear in
    // height), the line's half-width rate −cot 80° and nothing across y, the rectangle's none.
    const auto& rate = rates[std::size_t(j)];
    REQUIRE(rate.size() == step.size());
    std::size_t k = 0;
    if (a > 0) {
      CHECK(std::abs(rate[0][0] - (-bottom_a * 2 / 3 - bottom_a) / layer.thickness) <= 1e-13);
      CHECK(std::abs(rate[0][1] - (top_b - 0.05) / layer.thickness) <= 1e-13);
    }
    CHECK(std::abs(rate[k + (a > 0 ? 1 : 0)][0] + 1 / std::tan(80.0 * std::numbers::pi / 180)) <= 1e-14);
    CHECK(rate[k + (a > 0 ? 1 : 0)][1] == 0.0);
    CHECK(rate.back() == std::array{0.0, 0.0});
    if (a > 0) {
      const auto& e = std::get<Ellipse>(step[k++]);
      CHECK(std::abs(e.semi_axis_x - a) <= 1e-14);
      CHECK(std::abs(e.semi_axis_y - b) <= 1e-14);
      CHECK(e.rotation_deg == 25.0);
      CHECK(e.center.x == 0.1);
    }
    const auto& r = std::get<Rectangle>(step[k++]);  // the line: width 0.2 − 2h/tan 80° at h = f·thickness
    CHECK(std::abs(r.width_x - (0.2 - 2 * f * layer.thickness / std::tan(80.0 * std::numbers::pi / 180))) <= 1e-14);
    CHECK(r.width_y == 0.8);  // spans the period along y
    CHECK(r.center.x == 0.3);
    CHECK(std::get<Rectangle>(step[k]).width_x == 0.1);  // z-invariant shapes as they are
  }
  // A layer without a tapered ellipse is left as it is; a sloped polygon cannot share one's layer.
  Layer plain = layer;
  plain.shapes = {line, rectangle};
  CHECK(cut_into_steps(plain, lattice).steps.empty());
  layer.shapes.push_back(SlopedPolygon{Polygon{{{0, 0}, {0.1, 0}, {0, 0.1}}, Material::constant_index(1.5)}, 80});
  CHECK_THROWS_AS(cut_into_steps(layer, lattice), InvalidArgument);
}

TEST_CASE("2D sloped walls: discretise records each shape's wall rates, sloped_walls() names the tilted slices",
          "[physics][discretisation]") {
  // SliceContent::wall_slopes on a 2D lattice: a sloped polygon's edges move outward at −cot α, a lone
  // tapered circle's radius at (top − bottom)/thickness; vertical shapes leave the list empty.
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Structure s;
  s.lattice = {1.0, 1.0};
  s.superstrate = Material::constant_index(1.0);
  s.substrate = Material::constant_index(1.5);
  const double angle = 70 + 15 * u(test::rng()), cot = 1 / std::tan(angle * std::numbers::pi / 180);
  Layer polygon_layer;
  polygon_layer.thickness = 0.1;
  polygon_layer.slices = 3;
  polygon_layer.shapes = {SlopedPolygon{Polygon{{{-0.3, -0.3}, {0.3, -0.3}, {0.3, 0.3}, {-0.3, 0.3}}, Material::constant_index(2.0)},
                                        angle}};
  Layer circle_layer;
  circle_layer.thickness = 0.2;
  circle_layer.slices = 4;
  const double bottom = 0.2 + 0.1 * u(test::rng()), top = 0.1 + 0.1 * u(test::rng());
  circle_layer.shapes = {TaperedEllipse{{0, 0}, bottom, bottom, top, top, 0.0, Material::constant_index(2.0)}};
  Layer vertical;
  vertical.thickness = 0.1;
  vertical.slices = 2;
  vertical.shapes = {Rectangle{{0, 0}, 0.3, 0.4, Material::constant_index(2.0)}};
  s.layers = {polygon_layer, circle_layer, vertical};
  const Discretisation d = discretise(s);
  REQUIRE(d.content_of_slice.size() == 9);
  for (int p = 0; p < 9; ++p) {
    const SliceContent& c = d.contents.at(std::size_t(d.content_of_slice[std::size_t(p)]));
    INFO("slice " << p);
    if (p < 3) {
      REQUIRE(c.wall_slopes.size() == 1);
      CHECK(std::abs(c.wall_slopes[0][0] + cot) < 1e-14);
      CHECK(std::abs(c.wall_slopes[0][1] + cot) < 1e-14);
    } else if (p < 7) {
      REQUIRE(c.wall_slopes.size() == 1);
      CHECK(std::abs(c.wall_slopes[0][0] - (top - bottom) / 0.2) < 1e-13);
      CHECK(std::abs(c.wall_slopes[0][1] - (top - bottom) / 0.2) < 1e-13);
    } else {
      CHECK(c.wall_slopes.empty());
    }
  }
  CHECK(sloped_walls(s));
  // A sloped shape sharing its layer keeps the in-plane field; vertical walls none.
  s.layers = {vertical};
  CHECK_FALSE(sloped_walls(s));
  polygon_layer.shapes.push_back(vertical.shapes.front());
  s.layers = {polygon_layer};
  CHECK_FALSE(sloped_walls(s));
  // Several circles, some tapered (normal_field.cpp step 5″): tilted, each circle's rate recorded (an upright
  // one's 0); several upright circles, or a tapered circle beside an ellipse, not.
  Layer circles;
  circles.thickness = 0.2;
  circles.slices = 2;
  circles.shapes = {TaperedEllipse{{-0.25, 0}, 0.1, 0.1, 0.06, 0.06, 0.0, Material::constant_index(2.0)},
                    Ellipse{{0.25, 0.1}, 0.08, 0.08, 0.0, Material::constant_index(2.0)}};
  s.layers = {circles};
  CHECK(sloped_walls(s));
  const Discretisation dc = discretise(s);
  for (const SliceContent& c : dc.contents) {
    REQUIRE(c.wall_slopes.size() == 2);
    CHECK(std::abs(c.wall_slopes[0][0] - (0.06 - 0.1) / 0.2) < 1e-13);
    CHECK(c.wall_slopes[1] == std::array<double, 2>{0.0, 0.0});
  }
  circles.shapes[1] = Ellipse{{0.25, 0.1}, 0.08, 0.05, 0.0, Material::constant_index(2.0)};
  s.layers = {circles};
  CHECK_FALSE(sloped_walls(s));
  circles.shapes = {Ellipse{{-0.25, 0}, 0.1, 0.1, 0.0, Material::constant_index(2.0)},
                    Ellipse{{0.25, 0.1}, 0.08, 0.08, 0.0, Material::constant_index(2.0)}};
  s.layers = {circles};
  CHECK_FALSE(sloped_walls(s));
}

TEST_CASE("slices of z-invariant geometry share one content, sloped walls take one per slice",
          "[physics][discretisation]") {
  // A 90° trapezoid line (the case file's `line`) and a 90° sloped polygon sample the same cross-section at
  // every height (sidewall_cot(90°) is exactly 0), so their layer's slices share one content, equal to the
  // layer's cross-section; a line at another angle gets a content per slice, its width the trapezoid's there.
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double width = 0.3 + 0.2 * u(test::rng()), angle = 80 + 5 * u(test::rng()), thickness = 0.12;
  const Material m = Material::constant_index(2.0);
  Structure s;
  s.lattice = {1.0, 0.0};
  s.superstrate = Material::constant_index(1.0);
  s.substrate = Material::constant_index(1.5);
  Layer vertical, sloped;
  vertical.thickness = sloped.thickness = thickness;
  vertical.slices = sloped.slices = 5;
  vertical.shapes = {TrapezoidLine{0.05, width, 90, m}};
  sloped.shapes = {TrapezoidLine{0.05, width, angle, m}};
  s.layers = {vertical, sloped};
  for (int factor : {1, 2}) {
    const Discretisation d = discretise(s, factor);
    const int per_layer = 5 * factor;
    REQUIRE(d.content_of_slice.size() == std::size_t(2 * per_layer));
    REQUIRE(d.contents.size() == std::size_t(1 + per_layer));
    const double cot = std::cos(angle * std::numbers::pi / 180) / std::sin(angle * std::numbers::pi / 180);
    for (int p = 0; p < 2 * per_layer; ++p) {
      INFO("factor " << factor << ", slice " << p);
      const SliceContent& c = d.contents.at(std::size_t(d.content_of_slice[std::size_t(p)]));
      REQUIRE(c.shapes.size() == 1);
      const auto* r = std::get_if<Rectangle>(&c.shapes[0]);
      REQUIRE(r != nullptr);
      if (p < per_layer) {
        CHECK(d.content_of_slice[std::size_t(p)] == 0);
        CHECK(r->width_x == width);
      } else {
        CHECK(d.content_of_slice[std::size_t(p)] == p - per_layer + 1);
        const double height = thickness * (1 - (p - per_layer + 0.5) / per_layer);  // above the layer's bottom
        CHECK(std::abs(r->width_x - (width - 2 * height * cot)) < 1e-14);
      }
    }
  }
  // The 2D sloped polygon at 90°: one content for its layer.
  s.lattice = {1.0, 1.0};
  Layer prism;
  prism.thickness = thickness;
  prism.slices = 4;
  prism.shapes = {SlopedPolygon{Polygon{{{-0.3, -0.2}, {0.3, -0.2}, {0.1, 0.3}}, m}, 90}};
  s.layers = {prism};
  const Discretisation d = discretise(s);
  CHECK(d.contents.size() == 1);
  CHECK(d.content_of_slice == std::vector<int>(4, 0));
}
