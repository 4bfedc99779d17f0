#include "physics/discretisation.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>

#include "core/error.hpp"

namespace gratingsim::physics {
namespace {

constexpr double pi = std::numbers::pi;

/// cot of a sidewall angle in degrees, checked to lie in (0°, 180°).
double sidewall_cot(double angle_deg, const std::string& what) {
  GS_EXPECTS(angle_deg > 0 && angle_deg < 180,
          what + ": sidewall angle must be in (0°, 180°), got " + std::to_string(angle_deg));
  return angle_deg == 90 ? 0.0 : std::cos(angle_deg * pi / 180) / std::sin(angle_deg * pi / 180);
}

Rectangle trapezoid_at(const TrapezoidLine& t, const Lattice& lattice, double height, const std::string& what) {
  const double cot = sidewall_cot(t.sidewall_angle_deg, what);
  const double width = t.bottom_width - 2 * height * cot;
  GS_EXPECTS(width > 0, what + ": trapezoid line width is " + std::to_string(width) + " at height " +
                         std::to_string(height) + " above the layer bottom (bottom width " +
                         std::to_string(t.bottom_width) + ", sidewall " + std::to_string(t.sidewall_angle_deg) +
                         "°): it must stay positive through the layer");
  Rectangle r;
  r.center = {t.center_x, 0};
  r.width_x = width;
  r.width_y = lattice.one_dimensional() ? 1.0 : lattice.period_y;
  r.material = t.material;
  return r;
}

Polygon sloped_at(const SlopedPolygon& s, double height, const std::string& what) {
  const double inset = height * sidewall_cot(s.sidewall_angle_deg, what);
  std::vector<Point> v = s.bottom.vertices;
  GS_EXPECTS(v.size() >= 3, what + ": a polygon needs at least 3 vertices");
  double area = 0;
  for (std::size_t i = 0, j = v.size() - 1; i < v.size(); j = i++) area += v[j].x * v[i].y - v[i].x * v[j].y;
  if (area < 0) std::reverse(v.begin(), v.end());
  const std::size_t n = v.size();
  // Inward unit normals of the counter-clockwise edges: the left normals.
  std::vector<Point> normal(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Point a = v[i], b = v[(i + 1) % n];
    const double len = std::hypot(b.x - a.x, b.y - a.y);
    GS_EXPECTS(len > 0, what + ": polygon has a zero-length edge");
    normal[i] = {-(b.y - a.y) / len, (b.x - a.x) / len};
  }
  // Each vertex moves to the intersection of its two offset edges: v + inset (n_a + n_b)/(1 + n_a·n_b).
  std::vector<Point> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Point na = normal[(i + n - 1) % n], nb = normal[i];
    const double denom = 1 + na.x * nb.x + na.y * nb.y;
    GS_EXPECTS(denom > 1e-12, what + ": polygon has a 180° spike at vertex " + std::to_string(i));
    out[i] = {v[i].x + inset * (na.x + nb.x) / denom, v[i].y + inset * (na.y + nb.y) / denom};
  }
  for (std::size_t i = 0; i < n; ++i) {
    const Point a = v[i], b = v[(i + 1) % n], c = out[i], d = out[(i + 1) % n];
    GS_EXPECTS((d.x - c.x) * (b.x - a.x) + (d.y - c.y) * (b.y - a.y) > 0,
            what + ": edge " + std::to_string(i) + " of the sloped polygon vanishes or turns over at height " +
                std::to_string(height) + " above the layer bottom (sidewall " +
                std::to_string(s.sidewall_angle_deg) + "° is too shallow for the layer's thickness)");
  }
  return Polygon{std::move(out), s.bottom.material};
}

/// Cheap size checks with the layer and shape named (the geometric ones follow in PaintedCell).
void check_sizes(const PlanarShape& shape, const std::string& what) {
  if (const auto* r = std::get_if<Rectangle>(&shape))
    GS_EXPECTS(r->width_x > 0 && r->width_y >= 0, what + ": rectangle widths must be positive, got " +
                                                   std::to_string(r->width_x) + " × " + std::to_string(r->width_y));
  if (const auto* e = std::get_if<Ellipse>(&shape))
    GS_EXPECTS(e->semi_axis_x > 0 && e->semi_axis_y > 0,
            what + ": ellipse semi-axes must be positive, got " + std::to_string(e->semi_axis_x) + ", " +
                std::to_string(e->semi_axis_y));
  if (const auto* p = std::get_if<Polygon>(&shape))
    GS_EXPECTS(p->vertices.size() >= 3, what + ": a polygon needs at least 3 vertices, got " +
                                         std::to_string(p->vertices.size()));
  if (const auto* r = std::get_if<Raster>(&shape))
    GS_EXPECTS(r->nx > 0 && r->ny > 0 && r->pixels.size() == std::size_t(r->nx) * r->ny,
            what + ": raster needs nx, ny > 0 and nx·ny pixels");
}

/// Whether a shape's cross-section changes with height: a trapezoid line or sloped polygon whose sidewall is not
/// vertical. At 90° sidewall_cot is exactly 0, so every slice samples the same cross-section bit for bit and the
/// layer's slices share one content: its kernels are computed once, not once per slice (session 25: the 1D
/// `line` of a case file is a 90° trapezoid line, and the thin metal's 32 slices took 2 ms of structure phase
/// on the dev CPU, 4 ms of a 39 ms single point on an H200).
bool varies_with_z(const Shape& s) {
  if (const auto* line = std::get_if<TrapezoidLine>(&s)) return line->sidewall_angle_deg != 90;
  if (const auto* polygon = std::get_if<SlopedPolygon>(&s)) return polygon->sidewall_angle_deg != 90;
  return false;
}

PlanarShape sample(const Shape& shape, const Lattice& lattice, double height, const std::string& what) {
  return std::visit(
      [&](const auto& s) -> PlanarShape {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, TrapezoidLine>) {
          return trapezoid_at(s, lattice, height, what);
        } else if constexpr (std::is_same_v<T, SlopedPolygon>) {
          return sloped_at(s, height, what);
        } else if constexpr (std::is_same_v<T, TaperedEllipse>) {
          GS_EXPECTS(false, what + ": a tapered ellipse is sampled per step of its layer (cut_into_steps)");
          return Ellipse{};
        } else {
          return s;
        }
      },
      shape);
}

/// SliceContent::wall_slopes of a shape as sampled from `shape` (zero for shapes that do not vary with z).
std::array<double, 2> wall_rates(const Shape& shape, const Lattice& lattice, const std::string& what) {
  if (const auto* line = std::get_if<TrapezoidLine>(&shape)) {
    const double cot = sidewall_cot(line->sidewall_angle_deg, what);
    return lattice.one_dimensional() ? std::array{cot, -cot} : std::array{-cot, 0.0};
  }
  if (const auto* polygon = std::get_if<SlopedPolygon>(&shape); polygon && !lattice.one_dimensional()) {
    const double cot = sidewall_cot(polygon->sidewall_angle_deg, what);
    return {-cot, -cot};
  }
  return {0.0, 0.0};
}

/// The slices of one layer (checked): its slice count, or ceil(thickness / max_slice_thickness)
/// rounded to a multiple of its steps, times slice_factor.
int slice_count(const Layer& layer, int slice_factor, const std::string& where) {
  GS_EXPECTS(layer.thickness > 0 && std::isfinite(layer.thickness),
          where + ": thickness must be positive, got " + std::to_string(layer.thickness));
  GS_EXPECTS(layer.slices >= 0, where + ": slice count must be ≥ 0, got " + std::to_string(layer.slices));
  GS_EXPECTS(layer.slices > 0 || layer.max_slice_thickness > 0,
          where + ": give a positive slice count or a positive max_slice_thickness (zero slices)");
  GS_EXPECTS(layer.steps.empty() || layer.shapes.empty(), where + ": give either shapes or steps, not both");
  const int steps = layer.steps.empty() ? 1 : int(layer.steps.size());
  int slices = layer.slices;
  if (slices == 0) slices = steps * int(std::ceil(layer.thickness / steps / layer.max_slice_thickness - 1e-12));
  GS_EXPECTS(slices % steps == 0, where + ": slice count " + std::to_string(slices) +
                                   " is not a multiple of its " + std::to_string(steps) + " steps");
  return slices * slice_factor;
}

/// Σ thickness: the height of the stack's top (z = 0 is the substrate's surface).
double stack_height(const Structure& structure) {
  double top = 0;
  for (const Layer& layer : structure.layers) top += layer.thickness;
  return top;
}

}  // namespace

Layer cut_into_steps(const Layer& layer, const Lattice& lattice, std::vector<std::vector<std::array<double, 2>>>* rates) {
  const auto tapered = [](const Shape& s) { return std::holds_alternative<TaperedEllipse>(s); };
  if (std::none_of(layer.shapes.begin(), layer.shapes.end(), tapered)) return layer;
  GS_EXPECTS(layer.steps.empty(), "a layer holding a tapered ellipse is cut into steps: give no steps of its own");
  GS_EXPECTS(std::none_of(layer.shapes.begin(), layer.shapes.end(),
                          [](const Shape& s) { return std::holds_alternative<SlopedPolygon>(s); }),
             "a layer holding a tapered ellipse and a sloped polygon: the polygon's slope would be lost in its steps");
  const int slices = slice_count(layer, 1, "a layer holding a tapered ellipse");
  Layer cut = layer;
  cut.shapes.clear();
  for (int j = 0; j < slices; ++j) {  // top step first
    const double h = layer.thickness * (1 - (j + 0.5) / slices);
    const double f = h / layer.thickness;  // 0 at the bottom, 1 at the top
    const auto between = [f](double bottom, double top) { return bottom + (top - bottom) * f; };
    auto& step = cut.steps.emplace_back();
    std::vector<std::array<double, 2>> step_rates;
    for (const Shape& shape : layer.shapes) {
      if (const auto* e = std::get_if<TaperedEllipse>(&shape)) {
        const double a = between(e->bottom_semi_axis_x, e->top_semi_axis_x);
        const double b = between(e->bottom_semi_axis_y, e->top_semi_axis_y);
        if (a > 0 && b > 0) {
          step.push_back(Ellipse{e->center, a, b, e->rotation_deg, e->material});
          step_rates.push_back({(e->top_semi_axis_x - e->bottom_semi_axis_x) / layer.thickness,
                                (e->top_semi_axis_y - e->bottom_semi_axis_y) / layer.thickness});
        }
      } else {
        const std::string what = "a shape in a layer holding a tapered ellipse";
        // 1D: the lines of such a layer are vertical steps (sloped_walls() leaves it untilted).
        step_rates.push_back(lattice.one_dimensional() ? std::array{0.0, 0.0} : wall_rates(shape, lattice, what));
        if (const auto* line = std::get_if<TrapezoidLine>(&shape))
          step.push_back(trapezoid_at(*line, lattice, h, what));
        else
          step.push_back(shape);
      }
    }
    if (rates != nullptr) rates->push_back(std::move(step_rates));
  }
  return cut;
}

bool sloped_walls(const Structure& structure) {
  const bool one_dimensional = structure.lattice.one_dimensional();
  const auto sloped = [one_dimensional](const Shape& s) {
    if (const auto* line = std::get_if<TrapezoidLine>(&s)) return line->sidewall_angle_deg != 90;
    if (one_dimensional) return false;
    if (const auto* polygon = std::get_if<SlopedPolygon>(&s)) return polygon->sidewall_angle_deg != 90;
    if (const auto* e = std::get_if<TaperedEllipse>(&s))
      return e->top_semi_axis_x != e->bottom_semi_axis_x || e->top_semi_axis_y != e->bottom_semi_axis_y;
    return false;
  };
  const auto circle = [](const Shape& s) {
    if (const auto* e = std::get_if<Ellipse>(&s)) return e->semi_axis_x == e->semi_axis_y;
    if (const auto* e = std::get_if<TaperedEllipse>(&s))
      return e->bottom_semi_axis_x == e->bottom_semi_axis_y && e->top_semi_axis_x == e->top_semi_axis_y;
    return false;
  };
  // 1D: any sloped line (a layer holding a tapered ellipse samples its lines as vertical steps); 2D: a
  // sloped shape alone in its layer or step, or several circles some of which are tapered, the slices
  // normal_field.cpp tilts (where the circles keep apart: its step 5″; the other slices keep in-plane fields).
  const auto tilts = [&](const std::vector<Shape>& shapes) {
    if (one_dimensional)
      return std::any_of(shapes.begin(), shapes.end(), sloped) &&
             std::none_of(shapes.begin(), shapes.end(), [](const Shape& s) { return std::holds_alternative<TaperedEllipse>(s); });
    if (shapes.size() == 1) return sloped(shapes.front());
    return std::all_of(shapes.begin(), shapes.end(), circle) && std::any_of(shapes.begin(), shapes.end(), sloped);
  };
  for (const Layer& layer : structure.layers) {
    if (tilts(layer.shapes)) return true;
    for (const auto& step : layer.steps)
      if (tilts(step)) return true;
  }
  return false;
}

ZGrid slice_grid(const Structure& structure, int slice_factor) {
  GS_EXPECTS(slice_factor >= 1, "slice factor must be ≥ 1");
  ZGrid grid;
  double top = stack_height(structure);
  for (std::size_t l = 0; l < structure.layers.size(); ++l) {
    const Layer& layer = structure.layers[l];
    const int slices = slice_count(layer, slice_factor, "layer " + std::to_string(l));
    const double dz = layer.thickness / slices;
    for (int k = 0; k < slices; ++k) {
      grid.z.push_back(top - (k + 0.5) * dz);
      grid.thickness.push_back(dz);
    }
    top -= layer.thickness;
  }
  return grid;
}

Discretisation discretise(const Structure& structure, int slice_factor) {
  const Lattice& lattice = structure.lattice;
  GS_EXPECTS(lattice.period_x > 0, "lattice period_x must be positive, got " + std::to_string(lattice.period_x));
  GS_EXPECTS(lattice.period_y >= 0, "lattice period_y must be positive (or 0 for a 1D grating), got " +
                                     std::to_string(lattice.period_y));
  Discretisation d;
  d.grid = slice_grid(structure, slice_factor);  // checks every layer's thickness and slice count
  double top = stack_height(structure);
  std::size_t first = 0;  // the layer's first slice
  for (std::size_t l = 0; l < structure.layers.size(); ++l) {
    std::vector<std::vector<std::array<double, 2>>> step_rates;  // per step and shape, where tapered ellipses made the steps
    const Layer layer = cut_into_steps(structure.layers[l], lattice, &step_rates);
    const std::string where = "layer " + std::to_string(l);
    const int steps = layer.steps.empty() ? 1 : int(layer.steps.size());
    const int slices = slice_count(layer, slice_factor, where);
    const double bottom = top - layer.thickness;
    // z-varying shapes must be valid through the whole layer, not only at the slice centres.
    for (int step = 0; step < steps; ++step) {
      const auto& shapes = layer.steps.empty() ? layer.shapes : layer.steps[step];
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        const std::string what = where + ", shape " + std::to_string(i);
        check_sizes(sample(shapes[i], lattice, 0, what), what);
        if (varies_with_z(shapes[i])) sample(shapes[i], lattice, layer.thickness, what);
      }
    }
    int shared_content = -1;  // content index per step for z-invariant geometry
    int shared_step = -1;
    for (int k = 0; k < slices; ++k) {
      const double zc = d.grid.z[first + std::size_t(k)];
      d.layer_of_slice.push_back(int(l));
      const int step = int((std::int64_t(k) * steps) / slices);
      const auto& shapes = layer.steps.empty() ? layer.shapes : layer.steps[step];
      bool z_varying = false;
      for (const Shape& s : shapes) z_varying = z_varying || varies_with_z(s);
      if (!z_varying && step == shared_step) {
        d.content_of_slice.push_back(shared_content);
        continue;
      }
      SliceContent content;
      content.background = layer.background;
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        const std::string what = where + ", shape " + std::to_string(i);
        content.shapes.push_back(sample(shapes[i], lattice, zc - bottom, what));
        content.wall_slopes.push_back(step_rates.empty() ? wall_rates(shapes[i], lattice, what)
                                                         : step_rates[std::size_t(step)][i]);
      }
      if (!content.sloped()) content.wall_slopes.clear();
      d.contents.push_back(std::move(content));
      d.content_of_slice.push_back(int(d.contents.size()) - 1);
      if (!z_varying) {
        shared_step = step;
        shared_content = d.content_of_slice.back();
      }
    }
    first += std::size_t(slices);
    top = bottom;
  }
  return d;
}

}  // namespace gratingsim::physics
