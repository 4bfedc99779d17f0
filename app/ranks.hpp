#pragma once
// The processes of an MPI launch (`mpirun -n K gratingsim run ...`) behind a small interface: who
// this process is, a few collectives, and tagged byte messages. MPI itself stays in ranks_mpi.cpp;
// a build without MPI has launch detection only, and join() says what is missing.
//
// Threading: MPI is initialised with MPI_THREAD_FUNNELED, so every member must be called from the
// thread that called join() (the main thread); other threads hand their work to it.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace gratingsim::app {

/// This process's place in a launch, read from the launcher's environment before MPI starts:
/// OpenMPI's mpirun (OMPI_COMM_WORLD_SIZE/RANK) or a PMI launcher such as MPICH's mpiexec or
/// Slurm's srun --mpi=pmi2 (PMI_SIZE/PMI_RANK). size = 1, rank = 0 when not launched by one.
struct Launch {
  int size = 1;
  int rank = 0;
};
Launch detect_launch();

/// The MPI library this build uses (the first line of MPI_Get_library_version, callable before MPI
/// starts), or nullopt in a build without MPI.
std::optional<std::string> mpi_library();

/// Kinds of point-to-point message; the payload's meaning belongs to the caller.
enum class Tag : int { ready = 1, work, stop, result, failed };

struct Message {
  int source = 0;
  Tag tag = Tag::ready;
  std::vector<std::byte> bytes;
};

/// An error that another rank reports to the user: this rank stops with status 1 and says nothing,
/// so that a failure common to every rank (an invalid case) is printed once, by rank 0.
class ReportedElsewhere : public Error {
 public:
  using Error::Error;
};

class Ranks {
 public:
  /// Initialises MPI (MPI_Init_thread, FUNNELED) for a launch of launch.size > 1 processes.
  /// Unsupported, saying how to rebuild, in a build without MPI.
  static std::unique_ptr<Ranks> join();
  /// Finalises MPI. A rank leaving by an exception that not every rank agreed on (see settle())
  /// aborts the launch instead (MPI_Abort), so that no other rank waits for it forever.
  virtual ~Ranks() = default;

  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  /// Rank and count among the ranks on this host (MPI_COMM_TYPE_SHARED): which GPU to take.
  [[nodiscard]] virtual int local_rank() const = 0;
  [[nodiscard]] virtual int local_size() const = 0;
  [[nodiscard]] virtual std::string host() const = 0;

  /// Collective: every rank gets rank 0's value.
  virtual std::string broadcast(const std::string& value) = 0;
  /// Collective: rank 0 gets every rank's value, in rank order; other ranks get an empty vector.
  virtual std::vector<std::string> gather(const std::string& value) = 0;

  /// Blocking send (returns once `bytes` may be reused).
  virtual void send(int to, Tag tag, std::span<const std::byte> bytes) = 0;
  /// The next message from any rank, waiting for one.
  virtual Message receive() = 0;
  /// The next message from any rank if one has arrived; never waits.
  virtual std::optional<Message> poll() = 0;

  /// Marks an exception about to be thrown on every rank (after an agreement), so that the
  /// destructor finalises normally instead of aborting.
  virtual void agree_to_stop() = 0;
};

/// Runs `step` on every rank, then agrees on the outcome (collective): when it threw anywhere, rank 0
/// throws its own exception if it had one (printed as a one-process run prints it), else an Error
/// naming each failed rank and its message; the other ranks throw ReportedElsewhere. `ranks` null:
/// just runs `step`.
void settle(Ranks* ranks, const std::function<void()>& step);

}  // namespace gratingsim::app
