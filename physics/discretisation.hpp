#pragma once
// Cutting the layer stack into slices (docs/formulation.md §6) and sampling z-varying shapes at each
// slice's centre height.
#include <array>
#include <vector>

#include "physics/shape_functions.hpp"
#include "physics/structure.hpp"
#include "physics/z_operator.hpp"

namespace gratingsim::physics {

struct Discretisation {
  ZGrid grid;                          ///< slices top down; z = 0 is the substrate's surface
  std::vector<int> layer_of_slice;
  std::vector<int> content_of_slice;   ///< index into `contents`; slices with equal geometry share one
  std::vector<SliceContent> contents;
};

/// Validates the structure (clear InvalidArgument messages naming layer and shape) and slices it:
/// each layer gets `slices` (or ceil(thickness/max_slice_thickness)) slices, times `slice_factor`
/// (2 for the finer grid of Richardson extrapolation).
Discretisation discretise(const Structure& structure, int slice_factor = 1);

/// A layer holding a TaperedEllipse as the steps it is solved with (structure.hpp): one step per
/// slice of its own count (slices, or ceil(thickness / max_slice_thickness)), top step first, every
/// shape at the step's centre height h = thickness·(1 − (j + ½)/slices); any other layer unchanged.
/// `rates` (if given, for a cut layer): per step, SliceContent::wall_slopes of each of its shapes.
Layer cut_into_steps(const Layer& layer, const Lattice& lattice,
                     std::vector<std::vector<std::array<double, 2>>>* rates = nullptr);

/// Whether the normal-vector field is tilted along sloped walls somewhere (normal_field.hpp): on a 1D
/// lattice a trapezoid line whose sidewall is not vertical, in a layer's shapes or steps (not in a layer
/// holding a tapered ellipse, whose lines are sampled as vertical steps); on a 2D lattice a sloped shape
/// (tapered ellipse, sloped polygon, trapezoid line) alone in its layer or step, or several circles of which
/// some are tapered.
bool sloped_walls(const Structure& structure);

/// The slice grid of discretise() alone (checking only the layers' thicknesses and slice counts):
/// what the solve's fields are sampled on, known before any solve.
ZGrid slice_grid(const Structure& structure, int slice_factor = 1);

}  // namespace gratingsim::physics
