#pragma once
// Structures shared by the physics tests.
#include "convolution/convolution.hpp"
#include "physics/normal_field.hpp"
#include "physics/solver.hpp"

namespace gratingsim::test {

/// The 1D lamellar reference of docs/reference-cases.md §3: λ = 1, period 1.5, ridge 0.75 (centred),
/// ridge ε = 4 in air, height 0.5, substrate ε = 2.25 (incidence θ = 10°, φ = 0 in the tests).
inline physics::Structure lamellar(int slices) {
  using namespace physics;
  Structure s;
  s.lattice = {1.5, 0.0};
  s.superstrate = Material::constant_index(1.0);
  s.substrate = Material::constant_permittivity(2.25);
  Layer l;
  l.thickness = 0.5;
  l.slices = slices;
  l.background = Material::constant_index(1.0);
  Rectangle ridge;
  ridge.width_x = 0.75;
  ridge.material = Material::constant_permittivity(4.0);
  l.shapes.push_back(ridge);
  s.layers = {l};
  return s;
}

/// A lossless crossed grating without any symmetry: an overlapped rotated ellipse and rectangle
/// on a rectangular lattice, over a thin uniform film.
inline physics::Structure crossed(int slices) {
  using namespace physics;
  Structure s;
  s.lattice = {1.2, 1.0};
  s.superstrate = Material::constant_index(1.0);
  s.substrate = Material::constant_index(1.5);
  Layer pattern;
  pattern.thickness = 0.25;
  pattern.slices = slices;
  pattern.background = Material::constant_index(1.0);
  Ellipse e;
  e.center = {0.1, 0.0};
  e.semi_axis_x = 0.35;
  e.semi_axis_y = 0.25;
  e.rotation_deg = 20;
  e.material = Material::constant_index(2.0);
  Rectangle r;
  r.center = {-0.3, 0.2};
  r.width_x = 0.3;
  r.width_y = 0.4;
  r.material = Material::constant_index(1.6);
  pattern.shapes = {e, r};
  Layer film;
  film.thickness = 0.1;
  film.slices = std::max(1, slices / 2);
  film.background = Material::constant_index(1.8);
  s.layers = {pattern, film};
  return s;
}

/// validation/peers' thin metal (metal_1d): lines of ε = −20 + 1.5i, 0.4 wide and 0.08 thick, on a 0.8
/// period over lamellar()'s glass: thousands of GMRES iterations in p without the sweep.
inline physics::Structure thin_metal_lamellar(int slices) {
  physics::Structure s = lamellar(slices);
  s.lattice = {0.8, 0.0};
  s.layers[0].thickness = 0.08;
  auto& line = std::get<physics::Rectangle>(s.layers[0].shapes[0]);
  line.width_x = 0.4;
  line.material = physics::Material::constant_permittivity({-20.0, 1.5});
  return s;
}

/// crossed() with its ellipse and rectangle of the same metal (ε = −20 + 1.5i).
inline physics::Structure metal_crossed(int slices) {
  physics::Structure s = crossed(slices);
  const auto metal = physics::Material::constant_permittivity({-20.0, 1.5});
  std::get<physics::Ellipse>(s.layers[0].shapes[0]).material = metal;
  std::get<physics::Rectangle>(s.layers[0].shapes[1]).material = metal;
  return s;
}

/// Whether `backend` can serve `formulation`'s convolution problem in `precision` in this build (the
/// engine gains the normal-vector pattern backend by backend; tests skip what it cannot do yet).
inline bool serves(conv::Backend backend, Precision precision, physics::Formulation formulation,
                   bool one_dimensional = false) {
  conv::Problem p = formulation == physics::Formulation::laurent ? conv::scalar_problem(5, 5, 2, 6)
                                                                 : physics::normal_vector_problem(one_dimensional);
  p.n1 = 5;
  p.n2 = one_dimensional ? 1 : 5;
  p.slices = 2;
  if (formulation != physics::Formulation::laurent) p.per_slice = 2;
  return conv::traits(backend).can_implement(conv::resolve(p), precision).ok;
}

inline constexpr physics::Formulation formulations[] = {physics::Formulation::laurent,
                                                        physics::Formulation::normal_vector};

inline const physics::DiffractionOrder* find_order(const physics::IncidenceResult& r, int m1, int m2) {
  for (const auto& d : r.orders)
    if (d.m1 == m1 && d.m2 == m2) return &d;
  return nullptr;
}

}  // namespace gratingsim::test
