#pragma once
// The sweep of `gratingsim run`, one executor for every way of running it: the units of work
// (work_units.hpp: points of one parameter point, of one or several wavelengths, solved in one call),
// handed out from one queue to the workers, each finished unit written to the result file
// (OUT.h5.partial; points a resumed file holds are not handed out), the progress, warnings and
// failures said through one reporter, and SIGINT/SIGTERM turned into a stop once the units being
// solved are written. The workers are the only difference between the modes:
//   - one process: local workers, one per visible CUDA device for a GPU backend, else one; a single
//     worker solves on the calling thread, several each on a thread of their own with their own device
//     (and so their own backend, plans and stream);
//   - an MPI launch: rank 0's own worker (a thread) and the other ranks, reached through messages
//     (RemoteWorkers: distributed_sweep.hpp).
// Scheduling is dynamic: a worker takes the next unit when it is done with the last, so slow points
// (short wavelengths: more propagating orders, more iterations) do not hold the others back.
//
// A point's result does not depend on which points share its unit (physics::solve treats every
// right-hand side on its own; validation/physics/test_solvers.cpp checks it bitwise), so the file
// equals a one-worker run's bit for bit, solve times and the device attribute aside.
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "app/progress.hpp"
#include "app/work_units.hpp"
#include "io/problem.hpp"
#include "io/results.hpp"

namespace gratingsim::app {

/// The units not yet handed out, shared by the workers.
class UnitQueue {
 public:
  explicit UnitQueue(std::vector<Unit> units) : units_(units.begin(), units.end()) {}
  std::optional<Unit> next();
  /// No more units: the sweep stops (interrupted, stop_after reached, or the writer failed).
  void close();

 private:
  std::mutex mutex_;
  std::deque<Unit> units_;
};

struct WorkerOptions {
  int cuda_device = -1;               ///< the CUDA device the worker solves on; -1: none
  std::optional<int> fail_on_worker;  ///< tests (--fail-on-rank): that worker fails its first unit
};

/// A unit's outcome: its points' results and the solver's warnings, or why it failed.
struct Solved {
  Unit points;
  std::vector<io::PointResult> results;  ///< results[j] belongs to points[j]
  std::vector<std::string> warnings;
  std::string failure;       ///< non-empty: nothing was solved
  std::exception_ptr error;  ///< the failure, where it happened in this process
};

/// Solves one unit as worker `worker`; a failure is returned, not thrown.
Solved solve_unit(const io::Problem& problem, Unit unit, int worker, const WorkerOptions& options);

/// Workers in other processes (the ranks of an MPI launch).
class RemoteWorkers {
 public:
  virtual ~RemoteWorkers() = default;
  /// Hands every worker its first unit.
  virtual void start(UnitQueue& queue) = 0;
  /// Passes each outcome that has arrived to `accept` (worker, outcome), then hands that worker its
  /// next unit or tells it to stop; never waits. Returns whether anything arrived.
  virtual bool poll(UnitQueue& queue, const std::function<void(int, Solved)>& accept) = 0;
  /// Whether every worker has stopped.
  [[nodiscard]] virtual bool finished() const = 0;
};

/// Who solves: local workers (each with its options; worker k is number k) and remote ones, numbered
/// after them.
struct Workers {
  std::vector<WorkerOptions> local{WorkerOptions{}};
  RemoteWorkers* remote = nullptr;
};

/// What the sweep says on stderr, in the words each mode has always used: a one-process run names
/// wavelengths ("solving λ = 633 nm", "solved λ = 400 … 480 nm" for a unit of several) and fails with the
/// failing unit's own error; an MPI launch names units and ranks ("solved points 3, 4 (λ = 633 nm) on
/// rank 1"), says a failed unit
/// at once and goes on. Physics warnings are said once per kind: a warning repeated with other numbers
/// (the same anomaly at the next wavelength) is counted, not printed again.
class SweepReporter {
 public:
  /// `worker_names` (per worker, "rank 1 (host, device)") for an MPI launch; empty for one process.
  SweepReporter(const io::Problem& problem, Progress& progress, std::vector<std::string> worker_names);
  void starting(std::size_t done, const Unit& unit);
  /// `unit` came back from `worker`; `done` points are finished in all; `writing`: the sweep goes on
  /// (all of the unit's points were written, and not the last that stop_after asked for).
  void solved(std::size_t done, const Unit& unit, int worker, bool writing);
  /// Says `s`'s failure and adds it to `failures` (an MPI launch), or rethrows it (one process).
  void failed(const Solved& s, int worker, std::vector<std::string>& failures);
  void warn(const std::string& warning);
  /// How many warnings were not printed, if any.
  void print_repeated() const;

 private:
  const io::Problem& problem_;
  Progress& progress_;
  std::vector<std::string> worker_names_;
  std::set<std::string> warning_kinds_;
  std::size_t repeated_ = 0;
};

struct SweepOutcome {
  std::size_t solved = 0;             ///< points written by this run
  bool stopped = false;               ///< stop_after was reached
  bool interrupted = false;           ///< stopped on request (SIGINT, SIGTERM): no more units handed out
  std::vector<std::string> failures;  ///< per failed unit (an MPI launch): the rank, its points and the error
};

/// Solves `units` with `workers` and writes each finished point to `writer`, stopping after
/// `stop_after` points if given, or once SIGINT/SIGTERM came (install_signal_handlers). Returns once
/// every worker has stopped. An error of the writer itself stops every worker, then is rethrown.
SweepOutcome execute_sweep(const io::Problem& problem, io::ResultWriter& writer, std::vector<Unit> units,
                           const Workers& workers, SweepReporter& report, std::optional<std::size_t> stop_after);

/// SIGINT and SIGTERM ask the sweep to stop after the points being solved are written (a second one
/// has its default effect: the process ends at once, the partial file keeping what it holds); SIGXFSZ
/// is ignored, so that a file-size limit fails a write with EFBIG, reported, instead of killing the run.
void install_signal_handlers();
/// The signal that asked the sweep to stop; 0 while none did.
int stop_signal();

}  // namespace gratingsim::app
