#pragma once
// A case as the physics library's problem, and the physics results as result-file points: the glue
// between io/case.hpp, physics/solver.hpp and io/results.hpp. Lengths stay in nanometres.
//
// A run, in outline (the application adds the command line, progress and error handling):
//   io::Problem problem = io::load_problem(path);
//   problem.solver.backend = ...;  // when problem.source.numerics.backend is nullopt ("auto")
//   auto writer = resume ? io::ResultWriter::resume(out, problem.layout, info)
//                        : io::ResultWriter::create(out, problem.layout, info);
//   for each wavelength index iw:
//   for each batch b (a parameter point at a wavelength; without parameters, the wavelength index):
//     points = io::points_of_batch(problem, b), less those writer.done(point)
//     result = physics::solve(problem.structure_of(points[0]), incidences of those points, problem.solver)
//     writer.write(point, io::to_point_result(problem, point, result.incidences[j], seconds))
//   writer.finish();
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "io/case.hpp"
#include "io/results.hpp"
#include "physics/solver.hpp"
#include "physics/structure.hpp"

namespace gratingsim::io {

/// The least M1 (and M2 on a 2D lattice) of the first rung of harmonics: auto (io/SCHEMA.md §1.7.1).
inline constexpr int first_auto_harmonics = 4;

struct Problem {
  Case source;  ///< the case as read (with parameters: at the first value of each)
  /// The grating (lengths in nm): the case's own (with parameters: at the first parameter point).
  [[nodiscard]] const physics::Structure& structure() const { return source.structure; }
  /// The grating of each parameter point (layout.parameter_point_of), built by io::case_at (one, the
  /// case's own, without parameters).
  std::vector<physics::Structure> structures;
  /// The grating a sweep point is solved with.
  [[nodiscard]] const physics::Structure& structure_of(std::size_t point) const {
    return structures.at(layout.parameter_point_of(point));
  }
  /// Harmonics, method, tolerances, Richardson, precision and the case's backend (physics' default
  /// when the case says "auto": the application picks then); unconverged solves are marked, not
  /// thrown (recorded per point); fields kept when the case asks for them; memory limit: this
  /// machine's physical memory. With harmonics: auto, m1 and m2 are the ladder's first rung.
  physics::SolverOptions solver;
  ResultLayout layout;  ///< the result file's shape for this case
};

/// Reads a case (load_case) and maps it (make_problem).
Problem load_problem(const std::string& path);
/// The problem of a case; with parameters, the structure of every parameter point is built (case_at,
/// which refuses an invalid one, naming its parameter values) before anything is solved.
Problem make_problem(Case c);

/// The incidence of a sweep point (flat index, ResultLayout::point_index).
physics::Incidence incidence_of(const Problem& problem, std::size_t point);
/// The points of one batch (ResultLayout::batch_of: a parameter point at a wavelength; without
/// parameters the batch index is the wavelength index), in point order: physics::solve batches them
/// into one problem, as they share the structure and the wavelength.
std::vector<std::size_t> points_of_batch(const Problem& problem, std::size_t batch);

/// The result-file point of one solved incidence. Orders not propagating at this point get R = T = 0,
/// zero Jones entries and NaN directions; iterations and matrix-vector products are summed over the
/// solves of the point (two with Richardson), the residual is the largest, converged means all did.
/// Field maps are synthesised from the field harmonics as E(x, y, z_p) = Σ_m e_p(m) e^{i(kx_m x + ky_m y)}.
/// `solve_seconds`: the wall time of the solve that produced the point (shared by a batch).
PointResult to_point_result(const Problem& problem, std::size_t point, const physics::IncidenceResult& result,
                            double solve_seconds);

/// Run information for the result file's attributes.
RunInfo run_info(const Problem& problem, std::string_view backend, std::string_view precision, std::string device);

}  // namespace gratingsim::io
