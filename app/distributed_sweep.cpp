#include "app/distributed_sweep.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "app/cli.hpp"
#include "app/solving.hpp"
#include "convolution/devices.hpp"
#include "io/point_codec.hpp"

namespace gratingsim::app {
namespace {

/// Units wanted per rank before a wavelength's points are split: with about 4, the last units
/// to finish leave the other ranks idle for a quarter of a rank's share at most.
constexpr std::size_t units_per_rank = 4;

/// How long rank 0's main thread sleeps when nothing arrived, so that it does not take a core
/// from the solvers (a blocking MPI receive busy-polls). Small against any solve.
constexpr auto idle_wait = std::chrono::microseconds(500);

// Message payloads, through io/point_codec.hpp's byte primitives: a unit is its point indices; a
// solved unit its points with their results, then the warnings.

std::vector<std::byte> encode_unit(const Unit& unit) {
  std::vector<std::byte> bytes;
  io::put_vector(unit, bytes);
  return bytes;
}

Unit decode_unit(std::span<const std::byte> bytes) {
  std::size_t offset = 0;
  return io::ByteReader(bytes, offset).vector<std::size_t>();
}

/// A unit's outcome: its points' results and the solver's warnings, or why it failed.
struct Solved {
  Unit points;
  std::vector<io::PointResult> results;  ///< results[j] belongs to points[j]
  std::vector<std::string> warnings;
  std::string failure;  ///< non-empty: nothing was solved
};

std::vector<std::byte> encode_solved(const Solved& s) {
  std::vector<std::byte> bytes;
  io::put_vector(s.points, bytes);
  for (const io::PointResult& result : s.results) io::encode_point(result, bytes);
  io::put_value(std::uint64_t(s.warnings.size()), bytes);
  for (const std::string& w : s.warnings) io::put_vector(std::span<const char>(w), bytes);
  return bytes;
}

Solved decode_solved(std::span<const std::byte> bytes) {
  Solved s;
  std::size_t offset = 0;
  io::ByteReader in(bytes, offset);
  s.points = in.vector<std::size_t>();
  for (std::size_t j = 0; j < s.points.size(); ++j) s.results.push_back(io::decode_point(bytes, offset));
  const auto warnings = in.value<std::uint64_t>();
  for (std::uint64_t k = 0; k < warnings; ++k) s.warnings.push_back(in.text());
  return s;
}

/// Solves one unit on this rank; a failure is returned, not thrown.
Solved solve_unit(const io::Problem& problem, Unit unit, int rank, const RankOptions& options) {
  Solved s;
  s.points = std::move(unit);
  try {
    if (options.fail_on_rank == rank) throw Error("injected failure (--fail-on-rank " + std::to_string(rank) + ")");
    if (options.cuda_device >= 0) conv::use_cuda_device(options.cuda_device);  // per thread
    io::SolvedPoints solved = solve_for_file(problem, s.points);
    s.results = std::move(solved.results);
    s.warnings = std::move(solved.warnings);
  } catch (const std::exception& e) {
    s.results.clear();
    s.failure = user_message(e);
    if (s.failure.empty()) s.failure = "unknown error";
  }
  return s;
}

/// The units not yet handed out, shared by rank 0's two threads.
class UnitQueue {
 public:
  explicit UnitQueue(std::vector<Unit> units) : units_(units.begin(), units.end()) {}
  std::optional<Unit> next() {
    const std::lock_guard lock(mutex_);
    if (units_.empty()) return std::nullopt;
    Unit u = std::move(units_.front());
    units_.pop_front();
    return u;
  }
  /// No more units: the sweep stops (stop_after reached, or the writer failed).
  void close() {
    const std::lock_guard lock(mutex_);
    units_.clear();
  }

 private:
  std::mutex mutex_;
  std::deque<Unit> units_;
};

/// Rank 0's own solver: a thread taking units from the queue until it is empty or a unit fails,
/// handing each outcome to the main thread (which alone writes and talks MPI).
class LocalSolver {
 public:
  LocalSolver(const io::Problem& problem, UnitQueue& queue, const RankOptions& options)
      : thread_([this, &problem, &queue, options] {
          while (std::optional<Unit> unit = queue.next()) {
            Solved s = solve_unit(problem, std::move(*unit), 0, options);
            const bool failed = !s.failure.empty();
            const std::lock_guard lock(mutex_);
            solved_.push_back(std::move(s));
            ready_.notify_one();
            if (failed) break;
          }
          const std::lock_guard lock(mutex_);
          finished_ = true;
          ready_.notify_one();
        }) {}
  ~LocalSolver() { thread_.join(); }
  LocalSolver(const LocalSolver&) = delete;
  LocalSolver& operator=(const LocalSolver&) = delete;

  /// The outcomes so far, after waiting up to `wait` for one; `finished` says whether the thread
  /// has stopped (then nothing more will come).
  std::deque<Solved> take(std::chrono::microseconds wait, bool& finished) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, wait, [&] { return finished_ || !solved_.empty(); });
    finished = finished_;
    return std::exchange(solved_, {});
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Solved> solved_;
  bool finished_ = false;
  std::thread thread_;  // last: starts once the members it uses exist
};

/// "points 3, 4, 5 (λ = 650 nm)"
std::string describe_points(const io::Problem& problem, const Unit& unit) {
  std::string text = unit.size() == 1 ? "point " : "points ";
  for (std::size_t j = 0; j < unit.size(); ++j) text += (j ? ", " : "") + std::to_string(unit[j]);
  if (!unit.empty()) {
    char wavelength[64];
    std::snprintf(wavelength, sizeof wavelength, " (λ = %g nm)", io::incidence_of(problem, unit[0]).wavelength);
    text += wavelength;
  }
  return text;
}

}  // namespace

std::vector<Unit> pending_by_wavelength(const io::Problem& problem, const io::ResultWriter& writer) {
  std::vector<Unit> wavelengths;
  for (std::size_t iw = 0; iw < problem.layout.wavelength_nm.size(); ++iw) {
    Unit points = io::points_at_wavelength(problem, iw);
    std::erase_if(points, [&](std::size_t p) { return writer.done(p); });
    if (!points.empty()) wavelengths.push_back(std::move(points));
  }
  return wavelengths;
}

std::vector<Unit> plan_units(const io::Problem& problem, const io::ResultWriter& writer, int ranks) {
  const std::vector<Unit> wavelengths = pending_by_wavelength(problem, writer);
  const std::size_t wanted = units_per_rank * std::size_t(std::max(ranks, 1));
  if (wavelengths.empty() || wavelengths.size() >= wanted) return wavelengths;
  const std::size_t pieces = (wanted + wavelengths.size() - 1) / wavelengths.size();
  std::vector<Unit> units;
  for (const Unit& points : wavelengths) {
    const std::size_t n = std::min(pieces, points.size());
    for (std::size_t k = 0; k < n; ++k)  // piece k: points [k·size/n, (k+1)·size/n)
      units.emplace_back(points.begin() + std::ptrdiff_t(k * points.size() / n),
                         points.begin() + std::ptrdiff_t((k + 1) * points.size() / n));
  }
  return units;
}

SweepOutcome coordinate_sweep(Ranks& ranks, const io::Problem& problem, io::ResultWriter& writer,
                              std::vector<Unit> units, const RankOptions& options, SweepReport& report,
                              std::optional<std::size_t> stop_after) {
  SweepOutcome outcome;
  UnitQueue queue(std::move(units));
  std::map<int, Unit> assigned;  // the unit each remote rank is solving
  std::exception_ptr writer_error;
  bool writing = true;  // false once stopped or the writer failed: later results are dropped
  std::size_t done = writer.points_done();

  const auto accept = [&](int rank, Solved s) {
    if (!s.failure.empty()) {
      outcome.failures.push_back(report.rank_names[std::size_t(rank)] + " failed on " +
                                 describe_points(problem, s.points) + ": " + s.failure);
      report.progress.clear();
      std::fprintf(stderr, "gratingsim run: %s\n", outcome.failures.back().c_str());
      return;
    }
    for (const std::string& w : s.warnings) report.warn(w);
    physics::PhaseTimer timer;  // the writes of this unit's points: its `writing` phase
    std::size_t written = 0;
    const auto record_writing = [&] {
      timer.lap(physics::Phase::writing);
      writer.record_writing(std::span(s.points).first(written), timer.times()[physics::Phase::writing]);
    };
    for (std::size_t j = 0; j < s.points.size() && writing; ++j) {
      try {
        writer.write(s.points[j], s.results[j]);
        ++written;
        ++outcome.solved;
        if (written == s.points.size() || outcome.solved == stop_after) record_writing();
      } catch (...) {
        writer_error = std::current_exception();
        writing = false;
        queue.close();
        return;
      }
      ++done;
      if (outcome.solved == stop_after) {
        outcome.stopped = true;
        writing = false;
        queue.close();
      }
    }
    if (!s.points.empty())
      report.progress.update(done, "solved " + describe_points(problem, s.points) + " on rank " + std::to_string(rank));
  };

  int remote_running = ranks.size() - 1;
  // Sends rank `to` its next unit, or tells it to stop.
  const auto hand_out = [&](int to) {
    if (std::optional<Unit> unit = queue.next()) {
      const std::vector<std::byte> bytes = encode_unit(*unit);
      assigned[to] = std::move(*unit);
      ranks.send(to, Tag::work, bytes);
    } else {
      assigned.erase(to);
      ranks.send(to, Tag::stop, {});
      --remote_running;
    }
  };

  // Every other rank gets its first unit before this rank's own thread starts taking units, so
  // that none waits while the local thread takes the head of the queue. (The ranks have just met
  // in the collectives of the set-up: their ready messages come at once.)
  for (int waiting = remote_running; waiting > 0; --waiting) {
    const Message m = ranks.receive();
    GS_EXPECTS(m.tag == Tag::ready, "unexpected message (tag " + std::to_string(int(m.tag)) + ") from rank " +
                                     std::to_string(m.source) + " before its first unit");
    hand_out(m.source);
  }
  {
    LocalSolver local(problem, queue, options);
    bool local_finished = false;
    try {
      while (remote_running > 0 || !local_finished) {
        if (!outcome.interrupted && report.stop_requested && report.stop_requested()) {
          outcome.interrupted = true;  // the units being solved are still written
          queue.close();
        }
        bool arrived = false;
        while (std::optional<Message> m = ranks.poll()) {
          arrived = true;
          switch (m->tag) {
            case Tag::result:
              accept(m->source, decode_solved(m->bytes));
              hand_out(m->source);
              break;
            case Tag::failed: {  // the rank has stopped
              Solved s;
              s.points = assigned[m->source];
              s.failure = std::string(reinterpret_cast<const char*>(m->bytes.data()), m->bytes.size());
              accept(m->source, std::move(s));
              assigned.erase(m->source);
              --remote_running;
              break;
            }
            default:
              throw Error("unexpected message (tag " + std::to_string(int(m->tag)) + ") from rank " +
                          std::to_string(m->source));
          }
        }
        std::deque<Solved> solved = local.take(arrived ? std::chrono::microseconds(0) : idle_wait, local_finished);
        if (solved.empty() && !arrived && local_finished)
          std::this_thread::sleep_for(idle_wait);  // take() did not wait
        for (Solved& s : solved) accept(0, std::move(s));
      }
    } catch (...) {
      queue.close();  // a broken protocol: the local thread stops after its unit (and MPI aborts the launch)
      throw;
    }
  }
  if (writer_error) std::rethrow_exception(writer_error);
  return outcome;
}

void serve_sweep(Ranks& ranks, const io::Problem& problem, const RankOptions& options) {
  ranks.send(0, Tag::ready, {});
  for (;;) {
    const Message m = ranks.receive();
    if (m.tag == Tag::stop) return;
    GS_EXPECTS(m.tag == Tag::work, "unexpected message (tag " + std::to_string(int(m.tag)) + ") from rank 0");
    const Solved s = solve_unit(problem, decode_unit(m.bytes), ranks.rank(), options);
    if (!s.failure.empty()) {
      ranks.send(0, Tag::failed, std::as_bytes(std::span(s.failure)));
      return;
    }
    ranks.send(0, Tag::result, encode_solved(s));
  }
}

}  // namespace gratingsim::app
