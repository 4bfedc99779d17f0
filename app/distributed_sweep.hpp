#pragma once
// The ranks of an MPI launch as the sweep executor's remote workers (sweep_executor.hpp). Rank 0 runs
// the executor: its main thread hands out units on request, writes every point it receives and shows
// the progress, while a thread of rank 0 solves units too. The other ranks solve the units they are
// sent (serve_sweep). A rank asks for the next unit when it has sent the last one's results.
#include <map>

#include "app/ranks.hpp"
#include "app/sweep_executor.hpp"

namespace gratingsim::app {

/// Rank 0's view of the other ranks (1 … K-1, the workers of those numbers).
class RankWorkers : public RemoteWorkers {
 public:
  /// `fail_after_start` (tests, --fail-root-mid-sweep): start() throws once every rank has its first unit.
  explicit RankWorkers(Ranks& ranks, bool fail_after_start = false)
      : ranks_(ranks), running_(ranks.size() - 1), fail_after_start_(fail_after_start) {}
  /// Rank 0 leaving the sweep by an exception (not finished()): every rank still running is told to stop,
  /// what it sends meanwhile (its ready message, a result) received and dropped, so that each reaches the
  /// status broadcast. Without this the other ranks waited for rank 0's next message forever and rank 0 in
  /// MPI_Finalize for them (a hung launch, seen once in CI in session 25). Errors here are swallowed: the
  /// exception in flight is the one reported.
  ~RankWorkers() override;
  RankWorkers(const RankWorkers&) = delete;
  RankWorkers& operator=(const RankWorkers&) = delete;
  void start(UnitQueue& queue) override;
  bool poll(UnitQueue& queue, const std::function<void(int, Solved)>& accept) override;
  [[nodiscard]] bool finished() const override { return running_ == 0; }

 private:
  /// Sends rank `to` its next unit, or tells it to stop.
  void hand_out(UnitQueue& queue, int to);

  Ranks& ranks_;
  int running_;                  // ranks not yet told to stop (or failed)
  std::map<int, Unit> assigned_;  // the unit each rank is solving
  bool fail_after_start_;
};

/// Ranks other than 0: solves the units rank 0 sends until it says stop, or until a unit fails
/// (reported to rank 0 with the error).
void serve_sweep(Ranks& ranks, const io::Problem& problem, const WorkerOptions& options);

}  // namespace gratingsim::app
