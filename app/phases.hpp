#pragma once
// The time per phase of each wavelength batch (physics/phase_times.hpp) as a text table: for the run
// summary (from the result file) and `gratingsim bench e2e`.
#include <limits>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "physics/phase_times.hpp"

namespace gratingsim::app {

struct BatchPhases {
  std::string label;  ///< e.g. "λ = 633 nm"
  physics::PhaseTimes times;
};

/// The batches of a result file, one per wavelength (per parameter point and wavelength with parameters): the phases of its points' batch (the sum over
/// the distinct batches when a wavelength was split over MPI ranks). NaN phases (not recorded: an
/// interrupted write, a file from before the phases) count as 0 and the batch's label says "(incomplete)".
std::vector<BatchPhases> batch_phases(const io::ResultReader& reader);

/// A table of the seconds of each phase and their sum: a row per batch, a total row, and a row with
/// the total's share of `wall_seconds` (the sweep's wall time); then a line comparing the sum with the
/// wall time (above it where batches ran side by side: workers, MPI ranks, Richardson's two device solves). Of
/// more than `rows` batches only the `largest` that took longest (by their sum, equal sums the earlier first;
/// shown in sweep order) get a row, with a note saying so.
std::string format_phase_table(const std::vector<BatchPhases>& batches, double wall_seconds,
                               std::size_t rows = std::numeric_limits<std::size_t>::max(), std::size_t largest = 0);

}  // namespace gratingsim::app
