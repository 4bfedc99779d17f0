// physics/discretisation.cpp's slice grid (slice_grid, the grid discretise() and the solve use)
// against the layer stack recomputed here: layers top to bottom, z = 0 the substrate's surface, layer
// l cut into n_l·factor equal slices, n_l its slice count or ceil(thickness / max_slice_thickness);
// slice k of a layer whose top is at z_top has centre z_top − (k + ½)·thickness/(n_l·factor).
#include <cmath>
#include <random>
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
