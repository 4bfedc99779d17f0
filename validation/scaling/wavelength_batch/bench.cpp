// configs/default.yaml's spectrum (Si lines on Si, 41 wavelengths 400-800 nm at 65°, M = 12, 20 slices,
// GMRES(200), 1e-8) through physics::solve, one wavelength per problem vs all in one batch.
// Usage: wavelength_batch BACKEND [repeats] (run.sh builds and runs it).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include "convolution/convolution.hpp"
#include "physics/materials.hpp"
#include "physics/solver.hpp"
using namespace gratingsim;
using namespace gratingsim::physics;
int main(int argc, char** argv) {
  Structure s;
  s.lattice = {500, 0};
  s.superstrate = library_material("air", 1);
  s.substrate = library_material("Si", 1);
  Layer l;
  l.thickness = 120;
  l.slices = 20;
  l.background = library_material("air", 1);
  TrapezoidLine t;
  t.bottom_width = 90;
  t.sidewall_angle_deg = 85;
  t.material = library_material("Si", 1);
  l.shapes = {t};
  s.layers = {l};
  std::vector<Incidence> inc;
  for (int i = 0; i < 41; ++i) inc.push_back({400 + 10.0 * i, 65, 0});
  SolverOptions o;
  o.m1 = 12;
  o.gmres_restart = 200;
  o.tolerance = 1e-8;
  o.backend = conv::parse_backend(argc > 1 ? argv[1] : "cpu-fftw");
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  for (int batch : {1, 41, 1, 41}) {
    o.max_wavelengths_per_batch = batch;
    double best = 1e300;
    SolveResult r;
    for (int k = 0; k < repeats; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      r = solve(s, inc, o);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    long its = 0;
    int most = 0;
    for (const auto& x : r.incidences)
      for (int pol : {0, 1}) {
        its += x.solves[0][pol].iterations;
        most = std::max(most, x.solves[0][pol].iterations);
      }
    std::printf("%s max_wavelengths_per_batch %2d: best of %d %.3f s (%.1f points/s), iterations %ld in all, "
                "at most %d, R0s(400 nm) %.15f, Psi(800 nm) %.12f\n",
                argv[1], batch, repeats, best, 41 / best, its, most, r.incidences[0].orders[0].R[0],
                r.incidences[40].zeroth_order.psi_deg);
  }
}
