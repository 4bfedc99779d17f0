#pragma once
// Checks of physics/preconditioner.hpp shared by the host and the GPU tests: in the two limits where
// P = L⁻¹ L̄ Ā⁻¹ is the exact inverse of A, P applied to A x returns x for random x. A is the
// solver's own operator (convolution engine + z-operator), an implementation independent of the
// preconditioner's dense assembly (z-operator on unit sources, kernel coefficients indexed by hand).
#include <string>
#include <vector>

#include "physics/problem.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

namespace gratingsim::test {

/// A stack of laterally uniform layers (one absorbing) on a 1D or 2D lattice: A = Ā, L = L̄.
inline physics::Structure uniform_stack(bool one_dimensional) {
  using namespace physics;
  Structure s;
  s.lattice = one_dimensional ? Lattice{1.3, 0.0} : Lattice{1.2, 1.0};
  s.superstrate = Material::constant_index(1.0);
  s.substrate = Material::constant_permittivity(2.25);
  const std::complex<double> eps[] = {{4.0, 0.0}, {2.1, 0.3}, {6.0, 0.0}};
  const int slices[] = {3, 2, 4};
  for (int i = 0; i < 3; ++i) {
    Layer l;
    l.thickness = 0.15 + 0.1 * i;
    l.slices = slices[i];
    l.background = Material::constant_permittivity(eps[i]);
    s.layers.push_back(l);
  }
  return s;
}

/// One slice with strong lateral contrast: the slices do not interact (there is one), A = L.
inline physics::Structure single_slice(bool one_dimensional) {
  using namespace physics;
  Structure s = one_dimensional ? lamellar(1) : crossed(1);
  s.layers.resize(1);
  s.layers[0].slices = 1;
  Rectangle& first = std::get<Rectangle>(one_dimensional ? s.layers[0].shapes[0] : s.layers[0].shapes[1]);
  first.material = Material::constant_permittivity({12.0, 0.5});
  return s;
}

/// max |P A x − x| / max |x| for random x, on `backend` in Real.
template <class Real>
double inverse_error(const physics::Structure& structure, conv::Backend backend, physics::Formulation formulation,
                     int m1, int m2) {
  using namespace physics;
  std::vector<std::string> warnings;
  const std::vector<Incidence> inc{{1.0, 25, 30}, {1.0, 10, 0}};
  ProblemSettings settings;
  settings.m1 = m1;
  settings.m2 = m2;
  settings.backend = backend;
  settings.formulation = formulation;
  DiscreteProblem<Real> problem(structure, inc, settings, 1, warnings);
  const auto p = problem.make_preconditioner();
  const BatchLayout& l = problem.layout();
  const auto x = random_complex<Real>(l.size());
  std::vector<std::complex<Real>> back(l.size(), poison<Real>());
  auto space = problem.make_space(3);
  space->upload(x, 0);
  problem.apply(space->data(0), space->data(1));
  p->apply(space->data(1), space->data(2), problem.stream());
  space->download(2, back);
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    err = std::max(err, double(std::abs(back[i] - x[i])));
    scale = std::max(scale, double(std::abs(x[i])));
  }
  return err / scale;
}

}  // namespace gratingsim::test
