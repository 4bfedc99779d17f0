#pragma once
// A sweep spread over the ranks of an MPI launch, for `gratingsim run`. Rank 0 owns the result file:
// its main thread hands out units of work (points of one wavelength) on request, writes every
// point it receives and shows the progress, while a second thread of rank 0 solves units too. The
// other ranks solve the units they are sent. Scheduling is dynamic: a rank asks for the next unit
// when it has sent the last one's results, so slow points (short wavelengths: more propagating
// orders, more iterations) do not hold the others back.
//
// A point's result does not depend on which points share its batch (physics::solve treats every
// right-hand side on its own; validation/physics/test_solvers.cpp checks it bitwise), so the
// file equals a one-process run's bit for bit, solve times and the device attribute aside.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/progress.hpp"
#include "app/ranks.hpp"
#include "io/problem.hpp"
#include "io/results.hpp"

namespace gratingsim::app {

/// Points of one wavelength solved together, in point order.
using Unit = std::vector<std::size_t>;

/// The points not yet done, one unit per wavelength (wavelengths with none left out): how one
/// process batches a sweep.
std::vector<Unit> pending_by_wavelength(const io::Problem& problem, const io::ResultWriter& writer);

/// The units of the points not yet done for `ranks` ranks: one per wavelength while there are at
/// least 4 per rank, else each wavelength's points cut into near-equal units until there are (or
/// every unit is one point).
std::vector<Unit> plan_units(const io::Problem& problem, const io::ResultWriter& writer, int ranks);

struct RankOptions {
  int cuda_device = -1;             ///< the CUDA device this rank solves on (every thread of it); -1: none
  std::optional<int> fail_on_rank;  ///< tests: that rank fails its first unit
};

/// Where rank 0 reports.
struct SweepReport {
  Progress& progress;
  std::function<void(const std::string&)> warn;  ///< a physics warning from any rank
  std::vector<std::string> rank_names;           ///< per rank, for messages: "rank 1 (host, device)"
  std::function<bool()> stop_requested;          ///< true once the run was interrupted (SIGINT)
};

struct SweepOutcome {
  std::size_t solved = 0;             ///< points written by this run
  bool stopped = false;               ///< stop_after was reached
  bool interrupted = false;           ///< stopped on request (SIGINT): no more units handed out
  std::vector<std::string> failures;  ///< per failed unit: the rank, its points and the error
};

/// Rank 0: solves every unit over all ranks (this one included) and writes each finished point to
/// `writer`, stopping after `stop_after` points if given. Returns once every rank has stopped. A
/// rank that fails reports its unit in SweepOutcome::failures and gets no more work; the others go
/// on. An error of the writer itself stops every rank, then is rethrown.
SweepOutcome coordinate_sweep(Ranks& ranks, const io::Problem& problem, io::ResultWriter& writer,
                              std::vector<Unit> units, const RankOptions& options, SweepReport& report,
                              std::optional<std::size_t> stop_after);

/// Ranks other than 0: solves the units rank 0 sends until it says stop, or until a unit fails
/// (reported to rank 0 with the error).
void serve_sweep(Ranks& ranks, const io::Problem& problem, const RankOptions& options);

}  // namespace gratingsim::app
