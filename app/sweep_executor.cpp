#include "app/sweep_executor.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>
#include <utility>

#include "app/cli.hpp"
#include "app/solving.hpp"
#include "convolution/devices.hpp"

namespace gratingsim::app {
namespace {

/// How long the executor's thread sleeps when nothing arrived, so that it does not take a core
/// from the solvers (a blocking MPI receive busy-polls). Small against any solve.
constexpr auto idle_wait = std::chrono::microseconds(500);

/// Local workers on threads of their own, each taking units from the queue until it is empty or a
/// unit fails, handing each outcome to the executor's thread (which alone writes and talks MPI).
class LocalWorkers {
 public:
  LocalWorkers(const io::Problem& problem, UnitQueue& queue, const std::vector<WorkerOptions>& workers) {
    running_ = workers.size();
    for (std::size_t k = 0; k < workers.size(); ++k)
      threads_.emplace_back([this, &problem, &queue, options = workers[k], worker = int(k)] {
        while (std::optional<Unit> unit = queue.next()) {
          Solved s = solve_unit(problem, std::move(*unit), worker, options);
          const bool failed = !s.failure.empty();
          const std::lock_guard lock(mutex_);
          solved_.emplace_back(worker, std::move(s));
          ready_.notify_one();
          if (failed) break;
        }
        const std::lock_guard lock(mutex_);
        --running_;
        ready_.notify_one();
      });
  }
  ~LocalWorkers() {
    for (std::thread& t : threads_) t.join();
  }
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;

  /// The outcomes so far (worker, outcome), after waiting up to `wait` for one; `finished` says
  /// whether every thread has stopped (then nothing more will come).
  std::deque<std::pair<int, Solved>> take(std::chrono::microseconds wait, bool& finished) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, wait, [&] { return running_ == 0 || !solved_.empty(); });
    finished = running_ == 0;
    return std::exchange(solved_, {});
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::pair<int, Solved>> solved_;
  std::size_t running_ = 0;
  std::vector<std::thread> threads_;  // last: start once the members they use exist
};

/// "λ = 633 nm"
std::string format_wavelength(double nm) {
  char text[48];
  std::snprintf(text, sizeof text, "λ = %g nm", nm);
  return text;
}

/// The wavelengths of a unit's points (in point order: of one parameter point, rising or falling as
/// the case lists them): "λ = 633 nm", or "λ = 400 … 480 nm" for several.
std::string unit_wavelengths(const io::Problem& problem, const Unit& unit) {
  const double first = io::incidence_of(problem, unit.front()).wavelength;
  const double last = io::incidence_of(problem, unit.back()).wavelength;
  if (first == last) return format_wavelength(first);
  char text[64];
  std::snprintf(text, sizeof text, "λ = %g … %g nm", first, last);
  return text;
}

/// "points 3, 4, 5 (λ = 650 nm)"
std::string describe_points(const io::Problem& problem, const Unit& unit) {
  std::string text = unit.size() == 1 ? "point " : "points ";
  for (std::size_t j = 0; j < unit.size(); ++j) text += (j ? ", " : "") + std::to_string(unit[j]);
  if (!unit.empty()) text += " (" + unit_wavelengths(problem, unit) + ")";
  return text;
}

/// The signal (SIGINT, SIGTERM) that asked the run to stop, 0 while none did. The handler is
/// installed with SA_RESETHAND: a second signal has its default effect.
volatile std::sig_atomic_t stop_signal_received = 0;
bool erase_progress_line = false;  // stderr is a terminal: the note first erases the progress line

void on_stop_signal(int signal) {
  stop_signal_received = signal;
  static const char erase[] = "\r\033[K";
  static const char note[] = "gratingsim run: interrupted; stopping once the points being solved are written "
                             "(interrupt again to stop at once)\n";
  if (erase_progress_line) (void)!::write(STDERR_FILENO, erase, sizeof erase - 1);
  (void)!::write(STDERR_FILENO, note, sizeof note - 1);
}

}  // namespace

std::optional<Unit> UnitQueue::next() {
  const std::lock_guard lock(mutex_);
  if (units_.empty()) return std::nullopt;
  Unit u = std::move(units_.front());
  units_.pop_front();
  return u;
}

void UnitQueue::close() {
  const std::lock_guard lock(mutex_);
  units_.clear();
}

Solved solve_unit(const io::Problem& problem, Unit unit, int worker, const WorkerOptions& options) {
  Solved s;
  s.points = std::move(unit);
  try {
    if (options.fail_on_worker == worker)
      throw Error("injected failure (--fail-on-rank " + std::to_string(worker) + ")");
    if (options.cuda_device >= 0) conv::use_cuda_device(options.cuda_device);  // per thread
    io::SolvedPoints solved = solve_for_file(problem, s.points);
    s.results = std::move(solved.results);
    s.warnings = std::move(solved.warnings);
  } catch (const std::exception& e) {
    s.results.clear();
    s.error = std::current_exception();
    s.failure = user_message(e);
    if (s.failure.empty()) s.failure = "unknown error";
  }
  return s;
}

SweepReporter::SweepReporter(const io::Problem& problem, Progress& progress, std::vector<std::string> worker_names)
    : problem_(problem), progress_(progress), worker_names_(std::move(worker_names)) {}

void SweepReporter::starting(std::size_t done, const Unit& unit) {
  if (worker_names_.empty())
    progress_.update(done, "solving " + unit_wavelengths(problem_, unit));
}

void SweepReporter::solved(std::size_t done, const Unit& unit, int worker, bool writing) {
  if (!worker_names_.empty())
    progress_.update(done, "solved " + describe_points(problem_, unit) + " on rank " + std::to_string(worker));
  else if (writing)
    progress_.update(done, "solved " + unit_wavelengths(problem_, unit));
}

void SweepReporter::failed(const Solved& s, int worker, std::vector<std::string>& failures) {
  if (worker_names_.empty() && s.error) std::rethrow_exception(s.error);
  failures.push_back(worker_names_.at(std::size_t(worker)) + " failed on " + describe_points(problem_, s.points) +
                     ": " + s.failure);
  progress_.clear();
  std::fprintf(stderr, "gratingsim run: %s\n", failures.back().c_str());
}

void SweepReporter::warn(const std::string& warning) {
  progress_.clear();
  if (warning.starts_with("substrate absorbs at")) return;  // said once before the sweep (note_absorbing_substrate)
  std::string kind;
  for (char c : warning)
    if (!std::isdigit(static_cast<unsigned char>(c)) || kind.empty() || kind.back() != '#')
      kind += std::isdigit(static_cast<unsigned char>(c)) ? '#' : c;
  if (warning_kinds_.insert(kind).second)
    std::cerr << "gratingsim run: warning: " << warning << '\n';
  else
    ++repeated_;
}

void SweepReporter::print_repeated() const {
  if (repeated_) std::cerr << "gratingsim run: " << repeated_ << " more warning(s) of the kinds above not shown\n";
}

SweepOutcome execute_sweep(const io::Problem& problem, io::ResultWriter& writer, std::vector<Unit> units,
                           const Workers& workers, SweepReporter& report, std::optional<std::size_t> stop_after) {
  SweepOutcome outcome;
  UnitQueue queue(std::move(units));
  std::exception_ptr writer_error;
  bool writing = true;  // false once stopped or the writer failed: later results are dropped
  std::size_t done = writer.points_done();

  const auto accept = [&](int worker, Solved s) {
    if (!s.failure.empty()) return report.failed(s, worker, outcome.failures);
    for (const std::string& w : s.warnings) report.warn(w);
    physics::PhaseTimer timer;  // the writes of this unit's points: its `writing` phase
    std::size_t written = 0;
    const auto record_writing = [&] {  // each wavelength's share, as its solve times (share_of_batch)
      timer.lap(physics::Phase::writing);
      const double seconds = timer.times()[physics::Phase::writing];
      for (const std::span<const std::size_t> batch : split_by_batch(problem.layout, std::span(s.points).first(written)))
        writer.record_writing(batch, seconds * double(batch.size()) / double(written));
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
    report.solved(done, s.points, worker, writing);
  };
  const auto check_stop_signal = [&] {
    if (!outcome.interrupted && stop_signal() != 0) {
      outcome.interrupted = true;  // the units being solved are still written
      queue.close();
    }
  };

  if (workers.remote) workers.remote->start(queue);
  if (!workers.remote && workers.local.size() == 1) {  // one worker: this thread
    for (;;) {
      check_stop_signal();
      std::optional<Unit> unit = queue.next();
      if (!unit) break;
      report.starting(done, *unit);
      accept(0, solve_unit(problem, std::move(*unit), 0, workers.local[0]));
    }
  } else {
    LocalWorkers local(problem, queue, workers.local);
    bool local_finished = false;
    try {
      while (!local_finished || (workers.remote && !workers.remote->finished())) {
        check_stop_signal();
        const bool arrived = workers.remote && workers.remote->poll(queue, accept);
        auto solved = local.take(arrived ? std::chrono::microseconds(0) : idle_wait, local_finished);
        if (solved.empty() && !arrived && local_finished)
          std::this_thread::sleep_for(idle_wait);  // take() did not wait
        for (auto& [worker, s] : solved) accept(worker, std::move(s));
      }
    } catch (...) {
      queue.close();  // the local threads stop after their unit (an MPI launch aborts)
      throw;
    }
  }
  if (writer_error) std::rethrow_exception(writer_error);
  return outcome;
}

void install_signal_handlers() {
  erase_progress_line = isatty(STDERR_FILENO);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::signal(SIGXFSZ, SIG_IGN);
}

int stop_signal() { return stop_signal_received; }

}  // namespace gratingsim::app
