// Case → physics problem, physics results → result-file points (see problem.hpp).
#include "io/problem.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numbers>
#include <set>
#include <type_traits>
#include <variant>
#include <string>
#include <span>

#include "core/host_memory.hpp"
#include "physics/discretisation.hpp"
#include "physics/floquet.hpp"

namespace gratingsim::io {

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

std::vector<double> grid(double lo, double hi, int n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[std::size_t(i)] = lo + (hi - lo) * double(i) / double(n - 1);
  return v;
}

/// The bytes of everything a solve reads from a structure: its lattice, every number of its layers and shapes, and
/// each material's name and permittivity at `wavelengths`. Two structures that solve alike have equal fingerprints.
class StructureFingerprint {
 public:
  StructureFingerprint(const physics::Structure& s, std::span<const double> wavelengths) : wavelengths_(wavelengths) {
    put(s.lattice.period_x, s.lattice.period_y, s.lattice.rotation_deg);
    material(s.superstrate);
    material(s.substrate);
    for (const physics::Layer& layer : s.layers) {
      put(layer.thickness, layer.slices, layer.max_slice_thickness, layer.shapes.size(), layer.steps.size());
      material(layer.background);
      shapes(layer.shapes);
      for (const auto& step : layer.steps) shapes(step);
    }
  }
  [[nodiscard]] const std::string& bytes() const { return bytes_; }

 private:
  template <class... T>
  void put(const T&... values) {
    (bytes_.append(reinterpret_cast<const char*>(&values), sizeof(values)), ...);
  }
  void material(const physics::Material& m) {
    put(m.name().size());
    bytes_ += m.name();
    for (const double w : wavelengths_) put(m.permittivity(w));
  }
  void point(const physics::Point& p) { put(p.x, p.y); }
  void shapes(const std::vector<physics::Shape>& list) {
    for (const physics::Shape& shape : list) {
      put(shape.index());
      std::visit(
          [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, physics::Rectangle>) {
              point(x.center), put(x.width_x, x.width_y), material(x.material);
            } else if constexpr (std::is_same_v<T, physics::Ellipse>) {
              point(x.center), put(x.semi_axis_x, x.semi_axis_y, x.rotation_deg), material(x.material);
            } else if constexpr (std::is_same_v<T, physics::Polygon>) {
              polygon(x);
            } else if constexpr (std::is_same_v<T, physics::Raster>) {
              put(x.nx, x.ny, x.pixels.size(), x.materials.size());
              bytes_.append(reinterpret_cast<const char*>(x.pixels.data()), x.pixels.size() * sizeof(int));
              for (const physics::Material& m : x.materials) material(m);
            } else if constexpr (std::is_same_v<T, physics::TrapezoidLine>) {
              put(x.center_x, x.bottom_width, x.sidewall_angle_deg), material(x.material);
            } else if constexpr (std::is_same_v<T, physics::SlopedPolygon>) {
              polygon(x.bottom), put(x.sidewall_angle_deg);
            } else {
              point(x.center);
              put(x.bottom_semi_axis_x, x.bottom_semi_axis_y, x.top_semi_axis_x, x.top_semi_axis_y, x.rotation_deg);
              material(x.material);
            }
          },
          shape);
    }
  }
  void polygon(const physics::Polygon& p) {
    put(p.vertices.size());
    for (const physics::Point& v : p.vertices) point(v);
    material(p.material);
  }
  std::span<const double> wavelengths_;
  std::string bytes_;
};

}  // namespace

Problem make_problem(Case c) {
  // What load_case guarantees, checked again for a case edited after reading (the Python module): an empty sweep
  // solved nothing and returned empty arrays, a NaN period failed deep in the solver with an unrelated message.
  GS_EXPECTS(!c.wavelength_nm.empty() && !c.incidence.theta_deg.empty() && !c.incidence.phi_deg.empty(),
             "the case has no sweep point: wavelength_nm, incidence.theta_deg and incidence.phi_deg need a value each");
  for (const double w : c.wavelength_nm)
    GS_EXPECTS(std::isfinite(w) && w > 0, "wavelengths must be finite and > 0, got " + std::to_string(w));
  const physics::Lattice& lattice = c.structure.lattice;
  GS_EXPECTS(std::isfinite(lattice.period_x) && lattice.period_x > 0 && std::isfinite(lattice.period_y) &&
                 lattice.period_y >= 0 && std::isfinite(lattice.rotation_deg),
             "the lattice needs a finite period_x > 0, period_y ≥ 0 (0: a 1D grating) and a finite rotation_deg");
  Problem p;
  auto& o = p.solver;
  o.m1 = c.numerics.harmonics_x;
  o.m2 = c.numerics.harmonics_y;
  o.method = c.numerics.solver.method;
  o.gmres_restart = c.numerics.solver.restart;
  o.tolerance = c.numerics.solver.tolerance;
  o.max_iterations = c.numerics.solver.max_iterations;
  o.preconditioner = c.numerics.solver.preconditioner;
  o.richardson = c.numerics.richardson;
  if (c.numerics.backend) o.backend = *c.numerics.backend;
  o.precision = c.numerics.precision;
  o.formulation = c.numerics.formulation;
  o.on_unconverged = physics::OnUnconverged::mark;
  o.keep_fields = c.output.fields;
  o.memory_limit_bytes = host_memory_bytes();  // a control group's limit where lower than the physical memory

  ResultLayout& l = p.layout;
  for (const auto& axis : c.parameters) l.parameters.push_back({axis.name, axis.values});
  l.wavelength_nm = c.wavelength_nm;
  l.theta_deg = c.incidence.theta_deg;
  l.phi_deg = c.incidence.phi_deg;
  l.polarization = c.incidence.polarization;
  l.fields = c.output.fields;
  if (l.fields) {
    l.harmonics_x = o.m1;
    l.harmonics_y = o.m2;
    // The finest grid the solve uses (Richardson: twice the slices).
    l.slice_center_nm = physics::slice_grid(c.structure, c.numerics.richardson ? 2 : 1).z;
    const double hx = c.structure.lattice.period_x / 2, hy = c.structure.lattice.period_y / 2;
    for (const auto& plane : c.output.planes) {
      MapLayout m{plane.kind, plane.position_nm, {}, {}};
      switch (plane.kind) {
        case PlaneKind::xz:
          m.first_nm = grid(-hx, hx, plane.points_first);
          m.second_nm = l.slice_center_nm;
          break;
        case PlaneKind::yz:
          m.first_nm = grid(-hy, hy, plane.points_first);
          m.second_nm = l.slice_center_nm;
          break;
        case PlaneKind::xy:
          m.first_nm = grid(-hx, hx, plane.points_first);
          m.second_nm = grid(-hy, hy, plane.points_second);
          break;
      }
      l.maps.push_back(std::move(m));
    }
  }
  l.accuracy = c.numerics.accuracy;
  // With parameters every point's structure comes from the YAML at its values. The case's own structure is the
  // first point's as read; changed since (the Python module lets a caller edit it), it would apply to the first
  // point alone and the others would not see the change: refused (an audit of session 36 met exactly that).
  if (!c.parameters.empty() || !c.derived_parameters.empty()) {
    std::vector<double> values;  // those the case was read at (load_case: each axis's first)
    for (const ParameterAxis& axis : c.parameters) values.push_back(c.parameter_values.at(axis.name));
    const physics::Structure first = case_at(c, values).structure;
    GS_EXPECTS(StructureFingerprint(first, c.wavelength_nm).bytes() ==
                   StructureFingerprint(c.structure, c.wavelength_nm).bytes(),
               "the case's structure was changed after it was read, but a case with parameters builds every parameter "
               "point's structure from its YAML: change the YAML (or the dict given to from_dict) instead");
  }
  p.structures.push_back(c.structure);
  for (std::size_t index = 1; index < c.parameter_points(); ++index)
    p.structures.push_back(case_at(c, c.parameter_point(index)).structure);
  p.source = std::move(c);
  // With harmonics: auto the case's harmonics are the ladder's most (AccuracyTarget::max_harmonics):
  // the orders stored are those propagating at any point at any rung. The file's shape is fixed
  // before the first solve, so they are found from the sweep, not from the solves.
  // With parameters (which may change the period or the media), those of every parameter point.
  std::set<std::array<int, 2>> orders;
  for (const auto& structure : p.structures)
    for (const auto& order : physics::propagating_orders(structure, l.wavelength_nm, l.theta_deg, l.phi_deg, o.m1,
                                                         o.m2, o.rayleigh_tolerance))
      orders.insert(order);
  l.orders = p.structures.size() == 1
                 ? physics::propagating_orders(p.structure(), l.wavelength_nm, l.theta_deg, l.phi_deg, o.m1, o.m2,
                                               o.rayleigh_tolerance)
                 : std::vector<std::array<int, 2>>(orders.begin(), orders.end());
  if (l.orders.empty()) l.orders = {{0, 0}};  // order 0 always reflects into the lossless superstrate
  if (l.accuracy && l.accuracy->harmonics) {
    // The ladder's first rung: every propagating order of the sweep inside [−M_i, M_i], and at least
    // first_auto_harmonics (a coarser truncation says nothing about convergence).
    int highest_x = 0, highest_y = 0;
    for (const auto& o : l.orders) highest_x = std::max(highest_x, std::abs(o[0])), highest_y = std::max(highest_y, std::abs(o[1]));
    o.m1 = std::min(o.m1, std::max(first_auto_harmonics, highest_x));
    if (o.m2 > 0) o.m2 = std::min(o.m2, std::max(first_auto_harmonics, highest_y));
  }
  return p;
}

Problem load_problem(const std::string& path) { return make_problem(load_case(path)); }

physics::Incidence incidence_of(const Problem& problem, std::size_t point) {
  const ResultLayout& l = problem.layout;
  GS_EXPECTS(point < l.points(), "point index out of range");
  const std::size_t nphi = l.phi_deg.size(), ntheta = l.theta_deg.size();
  return {l.wavelength_nm[l.wavelength_index_of(point)], l.theta_deg[(point / nphi) % ntheta], l.phi_deg[point % nphi]};
}

std::vector<std::size_t> points_of_batch(const Problem& problem, std::size_t batch) {
  const ResultLayout& l = problem.layout;
  GS_EXPECTS(batch < l.batches(), "batch index out of range");
  const std::size_t per = l.theta_deg.size() * l.phi_deg.size();
  std::vector<std::size_t> points(per);
  for (std::size_t j = 0; j < per; ++j) points[j] = batch * per + j;
  return points;
}

PointResult to_point_result(const Problem& problem, std::size_t point, const physics::IncidenceResult& result,
                            double solve_seconds) {
  const ResultLayout& l = problem.layout;
  const physics::Incidence incidence = incidence_of(problem, point);
  GS_EXPECTS(result.incidence.wavelength == incidence.wavelength && result.incidence.theta_deg == incidence.theta_deg &&
              result.incidence.phi_deg == incidence.phi_deg,
          "the result is for another incidence than point " + std::to_string(point));
  const std::size_t p = std::size_t(l.polarizations()), no = l.orders_count();
  std::vector<int> pols;  // physics polarisation index of each stored incident polarisation
  if (l.polarization != Polarization::p) pols.push_back(physics::s_pol);
  if (l.polarization != Polarization::s) pols.push_back(physics::p_pol);

  PointResult r;
  r.reflectance.assign(p * no, 0.0);
  r.transmittance.assign(p * no, 0.0);
  r.jones_r.assign(no * 2 * p, {0.0, 0.0});
  r.jones_t.assign(no * 2 * p, {0.0, 0.0});
  r.reflected_direction.assign(no * 3, nan);
  r.transmitted_direction.assign(no * 3, nan);
  for (const auto& order : result.orders) {
    const auto at = std::find(l.orders.begin(), l.orders.end(), std::array<int, 2>{order.m1, order.m2});
    GS_EXPECTS(at != l.orders.end(), "order (" + std::to_string(order.m1) + ", " + std::to_string(order.m2) +
                                      ") propagates but is not in the result layout");
    const std::size_t o = std::size_t(at - l.orders.begin());
    for (std::size_t i = 0; i < p; ++i) {
      const int in = pols[i];
      r.reflectance[i * no + o] = order.R[std::size_t(in)];
      r.transmittance[i * no + o] = order.T[std::size_t(in)];
      const auto jones = [&](const physics::Jones& j, std::vector<std::complex<double>>& out) {
        out[(o * 2 + 0) * p + i] = in == physics::s_pol ? j.s_from_s : j.s_from_p;
        out[(o * 2 + 1) * p + i] = in == physics::s_pol ? j.p_from_s : j.p_from_p;
      };
      jones(order.reflection, r.jones_r);
      jones(order.transmission, r.jones_t);
    }
    if (order.reflected)
      std::copy(order.reflected_direction.begin(), order.reflected_direction.end(),
                r.reflected_direction.begin() + long(3 * o));
    if (order.transmitted)
      std::copy(order.transmitted_direction.begin(), order.transmitted_direction.end(),
                r.transmitted_direction.begin() + long(3 * o));
  }
  if (p == 2) {
    r.psi_deg = result.zeroth_order.psi_deg;
    r.delta_deg = result.zeroth_order.delta_deg;
    for (int row = 0; row < 4; ++row)
      for (int col = 0; col < 4; ++col)
        r.mueller[std::size_t(row * 4 + col)] = result.zeroth_order.mueller[std::size_t(row)][std::size_t(col)];
  }
  for (std::size_t i = 0; i < p; ++i) {
    const std::size_t in = std::size_t(pols[i]);
    r.absorption.push_back(result.absorption[in]);
    r.energy_balance_error.push_back(result.energy_balance_error[in]);
    std::int32_t iterations = 0, matvecs = 0;
    double residual = 0;
    bool converged = true;
    for (const auto& solve : result.solves) {
      iterations += solve[in].iterations;
      matvecs += solve[in].matvecs;
      // The largest, and NaN where any is (std::max would drop a NaN met after a number).
      if (std::isnan(solve[in].residual) || solve[in].residual > residual) residual = solve[in].residual;
      converged = converged && solve[in].converged;
    }
    r.iterations.push_back(iterations);
    r.matvecs.push_back(matvecs);
    r.residual.push_back(residual);
    r.converged.push_back(converged ? 1 : 0);
  }
  // The solves of one incidence share their method (it is chosen per batch); the last one's is stored.
  if (!result.methods.empty()) {
    switch (result.methods.back()) {
      case physics::Method::gmres: r.method = 1; break;
      case physics::Method::bicgstab: r.method = 2; break;
      case physics::Method::dense_lu: r.method = 3; break;
      case physics::Method::automatic: GS_EXPECTS(false, "to_point_result: the method ran unresolved");
    }
  }
  r.solve_seconds = solve_seconds;

  if (!l.fields) return r;
  GS_EXPECTS(result.fields.has_value(), "the case asks for fields but the solver kept none (SolverOptions::keep_fields)");
  const physics::Fields& f = *result.fields;
  const std::size_t nz = l.slice_center_nm.size(), nm = l.harmonics_count();
  GS_EXPECTS(f.z.size() == nz, "the solver's slices differ from the result layout's");
  GS_EXPECTS(f.kx.size() == nm && f.ky.size() == nm, "the solver's orders differ from the result layout's");
  for (std::size_t q = 0; q < nz; ++q)
    GS_EXPECTS(std::abs(f.z[q] - l.slice_center_nm[q]) <= 1e-9 * (1 + std::abs(f.z[q])),
            "slice centres differ from the layout's");
  for (std::size_t i = 0; i < p; ++i) {
    const auto& h = f.harmonics[std::size_t(pols[i])];
    GS_EXPECTS(h.size() == nz * 3 * nm, "field harmonics of the wrong size");
    r.field_harmonics.insert(r.field_harmonics.end(), h.begin(), h.end());
  }
  // Maps: E_c(x, y, z_q) = Σ_m e_q,c(m) e^{i(kx_m x + ky_m y)}, with the solver's own kx_m, ky_m (lab
  // frame). The map's coordinates (u, v) are the grating's frame: a rotated 1D grating's xz cut is its
  // cross-section, the lab point u·ĝ + v·l̂ with ĝ = (cos α, sin α) across the lines, l̂ = (−sin α, cos α)
  // along them, u = first, v = position (α = 0: x = u, y = v exactly).
  using C = std::complex<double>;
  const double rotation = problem.structure_of(point).lattice.rotation_deg * std::numbers::pi / 180;
  const double cos_rotation = std::cos(rotation), sin_rotation = std::sin(rotation);
  for (const auto& m : l.maps) {
    const std::size_t n1 = m.first_nm.size(), n2 = m.second_nm.size();
    std::vector<C> map(p * 3 * n1 * n2);
    // phase[a][k]: the factor of order k at the a-th point of the first axis (times the fixed
    // coordinate for cuts); for xy, second[b][k] along y.
    std::vector<C> phase(n1 * nm), second(m.kind == PlaneKind::xy ? n2 * nm : 0);
    for (std::size_t k = 0; k < nm; ++k) {
      for (std::size_t a = 0; a < n1; ++a) {
        const double u = m.kind == PlaneKind::yz ? m.position_nm : m.first_nm[a];
        const double v = m.kind == PlaneKind::yz ? m.first_nm[a] : m.kind == PlaneKind::xz ? m.position_nm : 0.0;
        const double x = cos_rotation * u - sin_rotation * v, y = sin_rotation * u + cos_rotation * v;
        phase[a * nm + k] = std::exp(C(0, f.kx[k] * x + f.ky[k] * y));
      }
      for (std::size_t b = 0; b < second.size() / std::max<std::size_t>(nm, 1); ++b)
        second[b * nm + k] = std::exp(C(0, f.ky[k] * m.second_nm[b]));
    }
    std::size_t xy_slice = 0;  // the slice whose centre is nearest the plane's height
    for (std::size_t q = 1; q < nz; ++q)
      if (std::abs(l.slice_center_nm[q] - m.position_nm) < std::abs(l.slice_center_nm[xy_slice] - m.position_nm))
        xy_slice = q;
    for (std::size_t i = 0; i < p; ++i)
      for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t a = 0; a < n1; ++a)
          for (std::size_t b = 0; b < n2; ++b) {
            const std::size_t q = m.kind == PlaneKind::xy ? xy_slice : b;
            const C* e = &r.field_harmonics[((i * nz + q) * 3 + c) * nm];
            C sum = 0;
            for (std::size_t k = 0; k < nm; ++k)
              sum += e[k] * phase[a * nm + k] * (m.kind == PlaneKind::xy ? second[b * nm + k] : C(1));
            map[((i * 3 + c) * n1 + a) * n2 + b] = sum;
          }
    r.field_maps.push_back(std::move(map));
  }
  return r;
}

RunInfo run_info(const Problem& problem, std::string_view backend, std::string_view precision, std::string device) {
  RunInfo info;
  info.backend = std::string(backend);
  info.precision = std::string(precision);
  info.formulation = std::string(physics::to_string(problem.solver.formulation));
  info.device = std::move(device);
  info.input_units = std::string(to_string(problem.source.input_units));
  info.case_path = problem.source.path;
  info.case_yaml = problem.source.yaml;
  // FNV-1a (64 bits) over the other files' content, each ended by its length: a changed table
  // changes it; paths are left out, so another spelling of the same files gives the same digest.
  std::uint64_t h = 14695981039346656037ull;
  const auto add = [&](unsigned char byte) { h = (h ^ byte) * 1099511628211ull; };
  bool any = false;
  for (const std::string& file : problem.source.inputs) {
    if (file == problem.source.path) continue;  // the case file: compared as text
    any = true;
    std::ifstream in(file, std::ios::binary);
    std::uint64_t length = 0;
    for (char c; in.get(c); ++length) add(static_cast<unsigned char>(c));
    for (int b = 0; b < 8; ++b) add(static_cast<unsigned char>(length >> (8 * b)));
  }
  if (any) {
    char text[32];
    std::snprintf(text, sizeof text, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
    info.inputs_digest = text;
  }
  return info;
}

}  // namespace gratingsim::io
