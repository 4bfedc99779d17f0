#pragma once
// The time per phase of each wavelength batch (physics/phase_times.hpp) as a text table: for the run
// summary (from the result file) and `gratingsim bench e2e`.
#include <string>
#include <vector>

#include "io/results.hpp"
#include "physics/phase_times.hpp"

namespace gratingsim::app {

struct BatchPhases {
  std::string label;  ///< e.g. "λ = 633 nm"
  physics::PhaseTimes times;
};

/// The batches of a result file, one per wavelength: the phases of its points' batch (the sum over
/// the distinct batches when a wavelength was split over MPI ranks). NaN phases (not recorded: an
/// interrupted write, a file from before the phases) count as 0 and the batch's label says "(incomplete)".
std::vector<BatchPhases> batch_phases(const io::ResultReader& reader);

/// A table with one row per batch (at most `rows`, evenly sampled, then a note) and a total row: the
/// seconds of each phase, their sum, and the phase's share of `wall_seconds` (the sweep's wall
/// time) in the total row; then a line comparing the sum with the wall time.
std::string format_phase_table(const std::vector<BatchPhases>& batches, double wall_seconds, std::size_t rows = 40);

}  // namespace gratingsim::app
