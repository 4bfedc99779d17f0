#pragma once
// Accuracy on demand (numerics.harmonics: auto, numerics.slices: auto; io/SCHEMA.md §1.7.1): the
// points of one parameter point solved on a ladder of settings until successive rungs agree.
//
// Harmonics first: M (M1, and M2 on a 2D lattice) goes M0, max(M0 + 1, round(1.5 M0)), ... up to
// max_harmonics (the last rung is max_harmonics itself), at the case's slices. A point stops at the
// first rung where the last two changes of its efficiencies (every stored R_m, T_m, from rung to
// rung) are both within the tolerance: one small change alone can be luck (convergence that
// oscillates, or drops, then creeps). Then slices, at the point's M: every layer's count doubled per
// rung while the total stays within max_slices, with the same test. With one raised its tolerance is
// the target; with both, the harmonics get half of it and the slices what the point's harmonics
// left (the target less their estimate). The estimate recorded is the sum over the ladders of the
// larger of their last two changes: a point that reaches the target has an estimate ≤ the target.
//
// A point's rungs depend only on its own results (physics::solve treats every right-hand side on its
// own), so its result does not depend on which points share its batch: a distributed or resumed run
// writes the same file. A point whose harmonics ladder ends without agreement keeps its last rung,
// is marked target_reached = 0 and does not climb the slices.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "io/problem.hpp"
#include "io/results.hpp"

namespace gratingsim::io {

struct SolvedPoints {
  std::vector<PointResult> results;   ///< results[j] belongs to points[j]
  std::vector<std::string> warnings;  ///< physics' warnings of every rung
};

/// The highest order of the rung after `m` (×1.5 rounded, at least +1), at most `most`.
int next_harmonics(int m, int most);

/// Solves `points` (one parameter point, of one or several wavelengths; problem.layout.accuracy set) on
/// the ladder, each rung's points in one physics::solve call. Every result's
/// solver statistics sum the point's solves over all its rungs (iterations, matvecs; the largest
/// residual; converged only if all did); solve_seconds is the wall time of the whole call.
SolvedPoints solve_to_target(const Problem& problem, std::span<const std::size_t> points);

}  // namespace gratingsim::io
