#pragma once
// Solving a case's sweep points, shared by `run` and `validate`: which backend `auto` stands for,
// where a backend runs, whether the physics solver can run it here, and the points of one parameter
// point (one structure; one or several wavelengths: a unit of work, work_units.hpp) solved in one
// physics::solve call (which batches incidences: their convolutions share each slice's spectrum).
// UI-free (nothing here parses a command line): the library gratingsim_solving, which the CLI and the
// Python module (python/) link.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"
#include "io/accuracy.hpp"
#include "io/problem.hpp"
#include "physics/solver.hpp"

namespace gratingsim::app {

/// Where `backend` runs, as result files and tables name it: the CUDA device's name, or the host
/// CPU with its OpenMP threads ("AMD EPYC 9654 (16 threads)").
std::string device_of(conv::Backend backend);

/// Why the physics solver cannot run `backend` in `precision` here (the backend is not in this build,
/// there is no device, or the solver has no path for device memory), found by solving a one-slice
/// slab with it in `formulation` (a backend may serve Laurent's scalar convolution but not yet the
/// normal-vector pattern); empty when it can.
std::string physics_unavailable(conv::Backend backend, Precision precision,
                                physics::Formulation formulation = physics::Formulation::normal_vector);

/// The smallest relative residual the solver accepts in single precision (physics::solve).
inline constexpr double single_tolerance_floor = 1e-6;

/// Sets `solver`'s precision to `precision` when given (a command line's or a caller's choice over the
/// case's), then raises a single-precision tolerance below single_tolerance_floor to it. Returns the
/// warning to show when it did, else "".
std::string apply_precision(physics::SolverOptions& solver, std::optional<Precision> precision);

/// The backend a case that says `auto` runs on: the fastest for the case's convolution shape
/// measured on this machine (conv::select_backend, cached per machine); where that is one the physics
/// solver cannot run (a GPU backend while the solver has a host path only, or a backend without the
/// case's formulation), cpu-fftw if it can, else cpu-direct.
conv::Backend automatic_backend(const io::Problem& problem);

/// The convolution problem of one wavelength's solve (physics::convolution_problem): the finest
/// slicing, every (θ, φ) of the sweep.
conv::Problem convolution_geometry(const io::Problem& problem);

/// Points of one parameter point solved together (one physics::solve call).
struct BatchSolve {
  std::vector<std::size_t> points;  ///< flat sweep indices (io::ResultLayout::point_index)
  physics::SolveResult result;      ///< result.incidences[j] belongs to points[j]
  double seconds = 0;               ///< wall time of the call
};

/// Solves `points`, which must share one parameter point (one structure), with problem.solver.
BatchSolve solve_points(const io::Problem& problem, std::span<const std::size_t> points);

/// The result-file points of `points` (one parameter point, in point order), as `run` stores them: one
/// batched solve with problem.solver, or, with accuracy on demand (harmonics: auto, slices: auto),
/// io::solve_to_target; each point's solve and phase times are its wavelength's share of the call's
/// (share_of_batch; the whole call's for points of one wavelength). The warnings are the call's.
io::SolvedPoints solve_for_file(const io::Problem& problem, std::span<const std::size_t> points);

/// The stored result of batch.points[j], with its wavelength's share (share_of_batch) of the call's
/// time and of its time per phase (writing: NaN until the writer records it,
/// ResultWriter::record_writing).
io::PointResult point_result(const io::Problem& problem, const BatchSolve& batch, std::size_t j);

}  // namespace gratingsim::app
