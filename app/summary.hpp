#pragma once
// The end of `gratingsim run` on stdout: the summary of the finished result file (the sweep, a row per
// point or a sample of them, a single point's orders, the time per phase of the wavelength batches,
// energy balance, accuracy and convergence), and the note before a sweep whose substrate absorbs.
#include <cstddef>
#include <string>

#include "io/problem.hpp"

namespace gratingsim::app {

/// Exit status of a run that wrote every point but where some solve stopped above its tolerance, or
/// (accuracy on demand) some point did not reach its target.
constexpr int exit_unconverged = 3;

/// Timing of a run for the summary: from the start of the command, and of the sweep alone (from the
/// first unit handed out to the last point written), whose points per second is the throughput.
struct RunTimes {
  double total = 0, sweep = 0;
  int ranks = 1;
};

/// On stderr, before the sweep, in place of physics' warning per wavelength that the substrate absorbs
/// (run drops those): at how many wavelengths, and what that means for T.
void note_absorbing_substrate(const io::Case& c);

/// The summary of `output`, read back from the finished file (so that points of an earlier, resumed run
/// are included); `solved`: the points this run solved. Returns whether every solve converged and, with
/// accuracy on demand, every point reached the target.
bool print_summary(const std::string& case_path, const std::string& output, const io::Problem& problem,
                   std::size_t solved, const RunTimes& times);

/// Whether any solve of the finished file stopped above its tolerance, or (accuracy on demand) any
/// point fell short of the target (for --quiet, which prints no summary).
bool any_unconverged(const std::string& output);

}  // namespace gratingsim::app
