// Launch detection and agreement, common to builds with and without MPI (ranks_mpi.cpp has MPI).
#include "app/ranks.hpp"

#include <cstdlib>
#include <exception>
#include <string_view>

#include "app/cli.hpp"
#include "core/config.hpp"

namespace gratingsim::app {
namespace {

/// The environment variable's value as a non-negative integer, if set to one.
std::optional<int> integer_variable(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > (1 << 24)) return std::nullopt;
  return int(value);
}

}  // namespace

Launch detect_launch() {
  for (const auto& [size, rank] :
       {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, std::pair{"PMI_SIZE", "PMI_RANK"}}) {
    const auto s = integer_variable(size), r = integer_variable(rank);
    if (s && r && *s >= 1 && *r < *s) return {*s, *r};
  }
  return {};
}

#if !GRATINGSIM_HAVE_MPI
std::optional<std::string> mpi_library() { return std::nullopt; }

std::unique_ptr<Ranks> Ranks::join() {
  throw Unsupported(
      "launched as one of several MPI processes, but this gratingsim was built without MPI: install OpenMPI "
      "(Debian: libopenmpi-dev) and configure with -DGRATINGSIM_MPI=ON, or run it without mpirun");
}
#endif

void settle(Ranks* ranks, const std::function<void()>& step) {
  if (!ranks) return step();
  std::exception_ptr failure;
  std::string message;
  try {
    step();
  } catch (const std::exception& e) {
    failure = std::current_exception();
    message = user_message(e);
  }
  // Each rank's outcome to rank 0 ("" for success), rank 0's verdict to all.
  const std::vector<std::string> outcomes =
      ranks->gather(failure ? "rank " + std::to_string(ranks->rank()) + " on " + ranks->host() + ": " + message : "");
  std::string report;
  for (const std::string& outcome : outcomes)
    if (!outcome.empty()) report += (report.empty() ? "" : "; ") + outcome;
  if (ranks->rank() == 0 && failure) report = "rank 0 failed";
  report = ranks->broadcast(report);
  if (report.empty()) return;
  ranks->agree_to_stop();
  if (ranks->rank() != 0) throw ReportedElsewhere(report);
  if (failure) std::rethrow_exception(failure);
  throw Error(report);
}

}  // namespace gratingsim::app
