#pragma once
// The end of `gratingsim run` on stdout: the summary of the finished result file (the sweep, a row per
// point or a sample of them, a single point's orders, the time per phase of the wavelength batches,
// energy balance, accuracy and convergence), and the note before a sweep whose substrate absorbs.
#include <cstddef>
#include <string>

#include "io/problem.hpp"

namespace gratingsim::app {

/// Exit status of a run that wrote every point but where some are not to be trusted: a solve stopped above its
/// tolerance, (accuracy on demand) a point did not reach its target, or a lossless point is off its energy balance
/// by more than energy_balance_limit.
constexpr int exit_unreliable = 3;

/// A point of a lossless structure whose |1 − ΣR − ΣT| exceeds this fails its energy balance: its efficiencies are
/// then off by about as much, from the discretisation (slices or harmonics too few, docs/formulation.md §6), which a
/// solve's residual cannot show (an audit in session 36: one 500 nm slice of n = 3.5 gave ΣR + ΣT = 2.8 with every
/// solve converged). A check for answers that are wrong, not an accuracy estimate (numerics.target_error is that):
/// settings that resolve the structure stay far below it, 5e-4 with the default slicing (docs/formulation.md §9),
/// 3.3e-3 on validation/peers' ε = 6 blocks at M = 8 (docs/normal-vector.md §8), and the O(Δz²) error passes it
/// only at about 15 times the default slice thickness (the tests' Si3N4 lines in 3 slices, 8.4 times: 1.1e-2).
/// Where something absorbs, the point fails where it creates power instead, an absorption 1 − ΣR − ΣT below
/// −energy_balance_limit (a second audit of session 36: a 2D ε = −20 + 1.5i block at M = 3 with the normal-vector
/// products gave ΣT = 1.017, absorption −0.27, every solve converged; docs/normal-vector.md §8).
constexpr double energy_balance_limit = 5e-2;

/// Whether a point's energy is off by more than energy_balance_limit in some polarisation (see there): its
/// |1 − ΣR − ΣT| where everything is lossless, a negative absorption (power made) where something absorbs.
bool energy_balance_fails(const io::PointResult& r);

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
/// are included); `solved`: the points this run solved. Returns whether every point is reliable: every solve
/// converged, with accuracy on demand every point reached the target, and every lossless point keeps its energy
/// balance within energy_balance_limit.
bool print_summary(const std::string& case_path, const std::string& output, const io::Problem& problem,
                   std::size_t solved, const RunTimes& times);

/// Whether any point of the finished file is unreliable, as print_summary judges (for --quiet, which prints no
/// summary).
bool any_unreliable(const std::string& output);

}  // namespace gratingsim::app
