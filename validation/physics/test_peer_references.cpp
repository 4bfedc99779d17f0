// gratingsim against converged values of an independent code: fmmax 1.7.1 (RCWA/FMM, its best
// formulation per case, converged in its order count), recorded with the exact script in
// validation/peers/ (README.md there: geometry, conventions checked, convergence table). The test
// reads validation/peers/references.txt (rows `case polarisation quantity value`) and never needs
// fmmax. Issue #9's bar: every recorded quantity within 1e-3 absolute at M ≤ 10 (1D: M ≤ 15), in
// s and p, with Richardson extrapolation in z. Each case's tolerance is its measured level (comments
// below; study in validation/results/nv-accuracy-cpu.txt).
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "physics/solver.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

namespace {

/// "case pol quantity" → value, from the recorded file.
std::map<std::string, double> read_references() {
  std::ifstream in(GRATINGSIM_PEER_REFERENCES);
  REQUIRE(in.good());
  std::map<std::string, double> values;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    std::string name, pol, quantity;
    double value = 0;
    REQUIRE(static_cast<bool>(row >> name >> pol >> quantity >> value));
    values[name + ' ' + pol + ' ' + quantity] = value;
  }
  REQUIRE(values.size() == 48);  // (5 cases + 1 same-order row set) × 2 polarisations × 4 quantities
  return values;
}

/// One patterned layer of `height` in air (`background` ε = 1) on a substrate of ε = 2.25.
Structure on_glass(Lattice lattice, Shape shape, double height, int slices) {
  Structure s;
  s.lattice = lattice;
  s.superstrate = Material::constant_index(1.0);
  s.substrate = Material::constant_permittivity(2.25);
  Layer l;
  l.thickness = height;
  l.slices = slices;
  l.background = Material::constant_index(1.0);
  l.shapes = {std::move(shape)};
  s.layers = {l};
  return s;
}

struct PeerCase {
  std::string name;
  Structure structure;
  Incidence incidence;
  int m;  ///< harmonics per axis (M1 = M2 = m on a 2D lattice)
  /// Largest accepted |error| per polarisation (s, p): the measured level rounded up (issue #9's bar is
  /// 1e-3; where gratingsim does not meet it the gap and its cause are stated).
  std::array<double, 2> tolerance{1e-3, 1e-3};
};

std::vector<PeerCase> peer_cases() {
  // validation/peers/compute_references.py defines the same four structures (λ = 1), and si_block (below).
  Ellipse pillar;
  pillar.semi_axis_x = pillar.semi_axis_y = 0.25;
  pillar.material = Material::constant_permittivity(4.0);
  Rectangle block;
  block.width_x = 0.6;
  block.width_y = 0.45;
  block.material = Material::constant_permittivity(6.0);
  Rectangle metal_line;
  metal_line.width_x = 0.4;
  metal_line.material = Material::constant_permittivity({-20.0, 1.5});
  Rectangle ridge;
  ridge.width_x = 0.75;
  ridge.material = Material::constant_permittivity(4.0);
  return {
      // 7.4e-4 (s sumT) at M = 10, 10/20 slices: truncation in M (7.7e-4 with 20/40 slices); the
      // exact radial field (normal-vector.md §5, 3′) gives the same as the raster one (7.40e-4).
      {"pillars", on_glass({1.0, 1.0}, pillar, 0.5, 10), {1.0, 30.0, 30.0}, 10, {8e-4, 8e-4}},
      // 7.9e-4 (s sumT) and 5.7e-4 (p sumT) at M = 10, 8/16 slices, with the rectangle's nearest-edge
      // field and its exact polygon coefficients (normal-vector.md §5, 2″); 8.5e-4 and 9.3e-4 with the
      // structure tensor of its exact edges (2′), 1.7e-3 with the raster field. Largest error at M = 6, 8,
      // 12, 14: 2.4e-3, 1.8e-3, 5.9e-4, 3.9e-4 (2′: 4.8e-3, 2.7e-3, 1.6e-3, 5.1e-4).
      {"rectangles", on_glass({1.2, 0.9}, block, 0.35, 8), {1.0, 20.0, 45.0}, 10, {8.5e-4, 6.5e-4}},
      // s: 1.5e-4. p: 1.4e-2 on R00 at M = 15 with 8/16 slices, not the 1e-3 of issue #9, and not
      // reachable at M ≤ 15 by Li's rule in either code: fmmax itself (exact in z) is 3.0e-3 off at
      // M = 15, 3.2e-2 at M = 10, 4.8e-3 at M = 20, erratically in M (presumably the corner fields of
      // the plasmonic strip, which the truncation resolves badly); gratingsim converged in z (32/64 slices) is 3.0e-3 off at
      // M = 15, i.e. equal to fmmax at equal M; 16 slices under-resolve the evanescent orders near the
      // metal (validation/results/nv-accuracy-cpu.txt). The same-order row below checks the formulation.
      {"metal_1d", on_glass({0.8, 0.0}, metal_line, 0.08, 8), {1.0, 15.0, 0.0}, 15, {2e-4, 1.5e-2}},
      // The thin metal against fmmax at the same truncation (M = 5, references.txt "metal_1d@M5"): both
      // codes use Li's inverse rule in 1D, so once gratingsim is converged in z (16/32 slices) they agree
      // far below the truncation error (2.8e-2 in p at M = 5): measured 3e-8 in s, 5.8e-5 in p.
      {"metal_1d@M5", on_glass({0.8, 0.0}, metal_line, 0.08, 16), {1.0, 15.0, 0.0}, 5, {1e-6, 1e-4}},
      // 2.2e-4 in s and in p at M = 15, 10/20 slices.
      {"lamellar", on_glass({1.5, 0.0}, ridge, 0.5, 10), {1.0, 10.0, 0.0}, 15, {3e-4, 3e-4}},
  };
}

/// Solves `c` (Richardson, cpu-fftw, tolerance 1e-9) and checks R00, T00, ΣR and ΣT of s and p against
/// the recorded fmmax values.
void check_against_reference(const PeerCase& c, const std::map<std::string, double>& reference) {
  SolverOptions o;
  o.m1 = c.m;
  o.m2 = c.structure.lattice.one_dimensional() ? 0 : c.m;
  o.richardson = true;
  o.backend = conv::Backend::cpu_fftw;
  o.tolerance = 1e-9;
  // This test measures accuracy per harmonic, not the Krylov solver: the 1D cases are small enough
  // for the dense LU reference solve (the thin metal in p needs over 2000 GMRES(300) iterations to
  // reach 1e-9 without a preconditioner; issue #10).
  if (c.structure.lattice.one_dimensional()) o.method = Method::dense_lu;
  const IncidenceResult r = solve(c.structure, std::vector<Incidence>{c.incidence}, o).incidences.at(0);
  const DiffractionOrder* zeroth = nullptr;
  for (const DiffractionOrder& d : r.orders)
    if (d.m1 == 0 && d.m2 == 0) zeroth = &d;
  REQUIRE(zeroth != nullptr);
  for (int pol : {s_pol, p_pol}) {
    const std::string prefix = c.name + (pol == s_pol ? " s " : " p ");
    double sum_t = 0;
    for (const DiffractionOrder& d : r.orders) sum_t += d.transmitted ? d.T[pol] : 0.0;
    const std::pair<const char*, double> quantities[] = {
        {"R00", zeroth->R[pol]}, {"T00", zeroth->T[pol]}, {"sumR", r.total_R[pol]}, {"sumT", sum_t}};
    for (const auto& [quantity, value] : quantities) {
      const double expected = reference.at(prefix + quantity), error = std::abs(value - expected);
      INFO(prefix << quantity << ": gratingsim " << value << " (M = " << c.m << ", slices "
                  << r.slice_counts.front() << "/" << r.slice_counts.back() << " Richardson), fmmax " << expected
                  << ", error " << error);
      CHECK(error < c.tolerance[pol]);
      std::printf("%-10s %s %-4s gratingsim %.6f  fmmax %.6f  error %.1e  (M = %d)\n", c.name.c_str(),
                  pol == s_pol ? "s" : "p", quantity, value, expected, error, c.m);
    }
  }
}

}  // namespace

TEST_CASE("fmmax-converged references at M <= 10 (1D: M <= 15), s and p", "[physics][peers]") {
  const auto reference = read_references();
  for (const PeerCase& c : peer_cases()) check_against_reference(c, reference);
}

#ifndef GRATINGSIM_SANITIZED  // 7 s of Release solves on one core: left out of the sanitized build
TEST_CASE("a high-contrast block (ε = 12): within 2e-4 (s) and 1.3e-3 (p) of fmmax at M = 14", "[physics][peers]") {
  // validation/peers "si_block": ε = 12 block 0.2 × 0.42 in a 0.6 × 0.6 cell, 0.2 thick, on glass,
  // θ 30°, φ 10°, λ 1; s sits on a guided-mode resonance (R00 0.90), so the slicing must be fine: at
  // M = 10 R00 s is 0.90897, 0.89980, 0.89924 with 8/16, 16/32, 32/64 slices (fmmax 0.90128). fmmax's
  // own value is converged to 2.1e-4 (1681 against 2401 terms, references.txt), approaching from below
  // like 1/M. Measured at M = 14, 32/64 slices (validation/results/rectangle-nearest-edge-cpu.txt): s within
  // 1.5e-4, p 1.27e-3 off (T00; 3.6e-4 on the others), above issue #9's 1e-3; the structure-tensor
  // field (step 2′) was 1.24e-3 off in s and 4.4e-4 in p.
  Rectangle block;
  block.width_x = 0.2;
  block.width_y = 0.42;
  block.material = Material::constant_permittivity(12.0);
  check_against_reference({"si_block", on_glass({0.6, 0.6}, block, 0.2, 32), {1.0, 30.0, 10.0}, 14, {2e-4, 1.3e-3}},
                          read_references());
}
#endif
