// gratingsim run: solves every sweep point of a case file and writes the result file of io/SCHEMA.md,
// point by point (OUT.h5.partial, renamed to OUT.h5 when complete), then prints a summary
// (summary.hpp). The sweep executor (sweep_executor.hpp) spreads the sweep over local workers (one per
// visible GPU) or, launched by mpirun, over the ranks (distributed_sweep.hpp); rank 0 writes the one
// file. run_command's steps: the settings, the case and the output's lock, the backend,
// the result file, then the sweep and what became of it.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/cli.hpp"
#include "app/commands.hpp"
#include "app/distributed_sweep.hpp"
#include "app/output_safety.hpp"
#include "app/progress.hpp"
#include "app/ranks.hpp"
#include "app/solving.hpp"
#include "app/summary.hpp"
#include "app/sweep_executor.hpp"
#include "app/work_units.hpp"
#include "convolution/devices.hpp"
#include "io/problem.hpp"
#include "io/results.hpp"

namespace gratingsim::app {
namespace {

namespace fs = std::filesystem;

// The hidden options are for the tests only.
constexpr OptionSpec run_options[] = {
    {"output", "OUT.h5", "the result file (default: the case file's name with .h5, next to it)", 'o'},
    {"backend", "NAME|auto",
     "convolution backend: cpu-direct, cpu-fftw, gpu-cufft, gpu-cufft-callbacks, gpu-fused, gpu-direct or auto "
     "(default: the case's numerics.backend)"},
    {"precision", "single|double",
     "arithmetic precision (default: the case's numerics.precision); in single precision a solver tolerance "
     "below 1e-6 is raised to 1e-6, with a warning"},
    {"resume", "",
     "continue OUT.h5.partial, left by an interrupted run of the same case: its finished points are kept, not "
     "recomputed (without a partial file: a new run)"},
    {"overwrite", "", "replace an existing complete OUT.h5 (without it, an existing OUT.h5 is never replaced)"},
    {"quiet", "", "no progress line, no summary (warnings and errors still go to stderr)"},
    {"stop-after", "N", "stop with status 1 after writing N points, leaving OUT.h5.partial (tests)", 0, true},
    {"fail-on-rank", "R", "MPI rank R fails its first unit of work (tests)", 0, true},
    {"fail-root-mid-sweep", "", "MPI rank 0 throws once the other ranks have their first units (tests)", 0, true},
    {"workers", "N", "one process: N local workers (threads) instead of one per visible GPU (tests)", 0, true},
    {"wavelengths-per-unit", "N",
     "solve up to N wavelengths of one parameter point in one batched solve (a unit of work; default: 1 on "
     "CPU backends, or with the sweep preconditioner one per two threads and incidence; on GPU backends as many "
     "as fill the GPU, or with the sweep as fit 1/16 of its memory, while the sweep keeps 8 units per device)"},
};

struct Settings {
  std::string case_path, output;
  std::optional<std::string_view> backend;  ///< as given: a backend's name or "auto"
  std::optional<Precision> precision;
  bool resume = false, quiet = false, overwrite = false;
  std::optional<std::size_t> stop_after;
  std::optional<int> fail_on_rank;
  bool fail_root_mid_sweep = false;
  std::optional<int> workers;
  std::optional<std::size_t> wavelengths_per_unit;
};

Settings parse_settings(const Options& o) {
  Settings s;
  if (o.positional().empty()) throw UsageError("missing the case file CASE.yaml");
  s.case_path = std::string(o.positional()[0]);
  s.output =
      o.value("output") ? std::string(*o.value("output")) : fs::path(s.case_path).replace_extension(".h5").string();
  if (s.output.empty()) throw UsageError("--output expects a file name");
  s.backend = o.value("backend");
  if (s.backend) check_backend_option(*s.backend);
  if (const auto p = o.value("precision")) s.precision = parse_precision_option(*p);
  s.resume = o.flag("resume");
  s.quiet = o.flag("quiet");
  s.overwrite = o.flag("overwrite");
  if (const auto v = o.value("stop-after")) s.stop_after = std::size_t(parse_int("stop-after", *v, 1, 1 << 30));
  if (const auto v = o.value("fail-on-rank")) s.fail_on_rank = parse_int("fail-on-rank", *v, 0, 1 << 24);
  s.fail_root_mid_sweep = o.flag("fail-root-mid-sweep");
  if (const auto v = o.value("workers")) s.workers = parse_int("workers", *v, 1, 1 << 10);
  if (const auto v = o.value("wavelengths-per-unit"))
    s.wavelengths_per_unit = std::size_t(parse_int("wavelengths-per-unit", *v, 1, 1 << 30));
  return s;
}

/// The backend named on the command line, else in the case; for `auto`, the one the partial file
/// being resumed was written with (a resume must not change it), else automatic_backend().
conv::Backend choose_backend(const Settings& s, const io::Problem& problem, bool resuming) {
  std::optional<conv::Backend> backend = problem.source.numerics.backend;
  if (s.backend) backend = *s.backend == "auto" ? std::nullopt : std::optional(conv::parse_backend(*s.backend));
  if (backend) return *backend;
  if (resuming) return conv::parse_backend(io::ResultReader(io::partial_path(s.output)).info().backend);
  return automatic_backend(problem);
}

/// The device string of the result file for a run with several workers (MPI ranks, local workers):
/// each kind of device with the number of workers on it, "2 × NVIDIA H100 80GB HBM3".
std::string describe_devices(const std::vector<std::string>& per_worker) {
  std::vector<std::pair<std::string, int>> kinds;
  for (const std::string& d : per_worker) {
    const auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == d; });
    if (it == kinds.end())
      kinds.emplace_back(d, 1);
    else
      ++it->second;
  }
  std::string text;
  for (const auto& [device, count] : kinds) text += (text.empty() ? "" : ", ") + std::to_string(count) + " × " + device;
  return text;
}

/// The most local workers sharing one device while units are smaller than gpu_filling_unknowns
/// (work_units.hpp). With stream-ordered set-up (core/device_buffer.hpp), one H200, gpu-fused, 1 → 4 → 8
/// workers of one wavelength per unit: default.yaml 0.42–0.46 → 0.14 → 0.11 s; si_lines_metrology 4 → 8:
/// 1.34 → 1.14 s (validation/results/workers-h200.txt).
constexpr int workers_per_device_small = 8;

/// The workers of one process (local_workers).
struct LocalWorkers {
  std::vector<WorkerOptions> workers;
  /// The workers the sweep's wavelengths are split for (plan_units): the devices where workers only
  /// share them, so that sharing never splits a batch.
  int parallel = 1;
};

/// The local workers of one process: for a GPU backend, one per visible CUDA device, or up to
/// workers_per_device_small per device (sharing it, each worker on its own stream) when the units
/// (`wavelengths` per unit, else work_units.hpp's rule for one worker per device) are smaller than
/// gpu_filling_unknowns or take the device sweep within a worker's share of the memory (work_units.hpp), and
/// there are more units than devices; else one. `asked` (--workers) workers
/// instead, sharing the devices in turn, and as many parallel.
LocalWorkers local_workers(conv::Backend backend, std::optional<int> asked, std::optional<std::size_t> wavelengths,
                           const io::Problem& problem) {
  const int devices = conv::memory_of(backend) == Memory::device ? int(conv::cuda_report().devices.size()) : 0;
  int count = std::max(devices, 1);
  int parallel = count;
  const std::size_t batches = problem.layout.batches();
  const std::size_t memory = devices > 0 ? smallest_device_memory() : 0;
  const std::size_t per_unit = wavelengths.value_or(wavelengths_per_unit(problem, batches, count, memory));
  // A sweep-preconditioned unit is latency-bound whatever its size (work_units.hpp): workers share the device
  // where a wavelength fits a worker's share of its memory.
  if (devices > 0 && (double(per_unit) * batch_unknowns(problem) < gpu_filling_unknowns ||
                      device_sweep_wavelengths(problem, memory).value_or(0) >= 1))
    count = int(std::clamp<std::size_t>((batches + per_unit - 1) / per_unit, std::size_t(devices),
                                        std::size_t(devices * workers_per_device_small)));
  // Sweep-preconditioned units (large, or as asked) leave room for each worker's preconditioner.
  if (devices > 0)
    count = std::min(count, devices * std::min(device_sweep_workers(problem, per_unit, memory), workers_per_device_small));
  if (asked) parallel = count = *asked;
  std::vector<WorkerOptions> workers(static_cast<std::size_t>(count));
  if (devices > 1)  // one device: the current one, as ever
    for (std::size_t k = 0; k < workers.size(); ++k) workers[k].cuda_device = int(k) % devices;
  return {std::move(workers), parallel};
}

/// Every rank takes its own GPU: the local rank's index among this host's devices (modulo their
/// number, with a warning from rank 0 when ranks must share). -1 on a host without CUDA devices.
int bind_device(Ranks& ranks) {
  const conv::CudaReport cuda = conv::cuda_report();
  if (cuda.devices.empty()) return -1;
  const int count = int(cuda.devices.size());
  const int device = ranks.local_rank() % count;
  conv::use_cuda_device(device);
  if (ranks.local_size() > count && ranks.local_rank() == 0)
    std::cerr << "gratingsim run: warning: " << ranks.local_size() << " ranks share " << count << " CUDA device(s) on "
              << ranks.host() << '\n';
  return device;
}

/// What a run builds up, step by step (run_command), on every rank of an MPI launch; rank 0 leads.
struct Run {
  Settings settings;
  std::chrono::steady_clock::time_point start;
  std::unique_ptr<Ranks> ranks;  ///< null: one process
  io::Problem problem;
  std::optional<io::OutputLock> lock;  ///< rank 0: held while OUT.h5 is written
  bool resuming = false;               ///< continuing OUT.h5.partial
  std::string backend_name;
  std::vector<WorkerOptions> workers;   ///< this process's (an MPI rank has one)
  int parallel = 1;                     ///< local workers the wavelengths are split for (local_workers)
  std::string device;                   ///< the result file's device string
  std::vector<std::string> rank_names;  ///< for messages about a rank (rank 0's list); empty: one process
  std::optional<io::ResultWriter> writer;         ///< rank 0

  [[nodiscard]] Ranks* all() const { return ranks.get(); }
  [[nodiscard]] bool root() const { return !ranks || ranks->rank() == 0; }
};

/// Every rank reads and checks the case completely before any file is touched; then rank 0 takes the
/// output's lock before anything is written (the lock file also proves the directory writable), and
/// checks the path again under it: a run that finished meanwhile is seen. The precision of the
/// command line replaces the case's.
void load_case(Run& run) {
  const Settings& s = run.settings;
  settle(run.all(), [&] { run.problem = io::load_problem(s.case_path); });
  settle(run.all(), [&] {
    if (!run.root()) return;
    const std::vector<std::string> companions{io::partial_path(s.output), io::lock_path(s.output)};
    check_output_path(s.output, companions, run.problem.source.inputs, s.overwrite);
    run.lock.emplace(s.output);
    check_output_path(s.output, companions, run.problem.source.inputs, s.overwrite);
  });
  if (run.root())
    for (const std::string& warning : run.problem.source.warnings) std::cerr << warning << '\n';
  const std::string warning = apply_precision(run.problem.solver, s.precision);
  if (run.root() && !warning.empty()) std::cerr << "gratingsim run: warning: " << warning << '\n';
}

/// Rank 0 decides the backend (an `auto` measurement on its device, the partial file being resumed)
/// for all; then ranks running a GPU backend take their GPUs, and every rank checks it can run it.
void take_backend(Run& run) {
  const Settings& s = run.settings;
  const std::string partial = io::partial_path(s.output);
  settle(run.all(), [&] {
    if (!run.root()) return;
    run.resuming = s.resume && fs::exists(partial);
    if (s.resume && !run.resuming) std::cerr << "gratingsim run: no " << partial << " to resume; starting a new run\n";
    if (!s.resume && fs::exists(partial))
      std::cerr << "gratingsim run: replacing " << partial << " left by an earlier run (--resume continues it)\n";
    run.backend_name = std::string(conv::to_string(choose_backend(s, run.problem, run.resuming)));
  });
  if (run.ranks) run.backend_name = run.ranks->broadcast(run.backend_name);
  run.problem.solver.backend = conv::parse_backend(run.backend_name);
  const conv::Backend backend = run.problem.solver.backend;
  if (run.ranks) {
    run.workers = {{.fail_on_worker = s.fail_on_rank}};
  } else {
    LocalWorkers local = local_workers(backend, s.workers, s.wavelengths_per_unit, run.problem);
    run.workers = std::move(local.workers);
    run.parallel = local.parallel;
  }
  if (run.ranks && conv::memory_of(backend) == Memory::device)
    settle(run.all(), [&] { run.workers[0].cuda_device = bind_device(*run.ranks); });
  settle(run.all(), [&] {
    const std::string why =
        physics_unavailable(backend, run.problem.solver.precision, run.problem.solver.formulation);
    if (why.empty()) return;
    // A missing device is said as such, with what to use instead, at the case's numerics.backend
    // when the backend comes from there.
    const std::string what = run.backend_name + (why.starts_with("needs ") ? " " + why + "; use auto or cpu-fftw"
                                                                           : " cannot run the solver here: " + why);
    const auto& at = run.problem.source.numerics.backend_location;
    if (!s.backend && at) throw io::CaseError(at->file, at->line, at->column, "numerics.backend: backend " + what);
    throw Unsupported((s.backend ? "--backend " : "backend ") + what);
  });
}

/// The device string of the result file, and the names of the ranks for messages.
void name_devices(Run& run) {
  run.device = device_of(run.problem.solver.backend);
  if (!run.ranks && run.workers.size() > 1) {
    // GPUs: each device once, however many workers share it; CPU workers: each worker.
    const bool gpu = conv::memory_of(run.problem.solver.backend) == Memory::device;
    std::vector<int> used;
    for (const WorkerOptions& w : run.workers)
      if (!gpu || std::find(used.begin(), used.end(), w.cuda_device) == used.end()) used.push_back(w.cuda_device);
    std::vector<std::string> devices;
    for (const int d : used)
      devices.push_back(d < 0 ? run.device : conv::cuda_report().devices.at(std::size_t(d)).name);
    if (devices.size() > 1) run.device = describe_devices(devices);
  }
  if (!run.ranks) return;
  const std::vector<std::string> devices = run.ranks->gather(run.device), hosts = run.ranks->gather(run.ranks->host());
  run.device = describe_devices(devices);
  for (std::size_t r = 0; r < devices.size(); ++r)
    run.rank_names.push_back("rank " + std::to_string(r) + " (" + hosts[r] + ", " + devices[r] + ")");
}

/// Rank 0 creates OUT.h5.partial, or reopens it to resume.
void open_result_file(Run& run) {
  settle(run.all(), [&] {
    if (!run.root()) return;
    const io::RunInfo info = io::run_info(run.problem, run.backend_name,
                                          to_string(run.problem.solver.precision), run.device);
    run.writer.emplace(run.resuming ? io::ResultWriter::resume(run.settings.output, run.problem.layout, info)
                                    : io::ResultWriter::create(run.settings.output, run.problem.layout, info));
  });
}

/// Rank 0: the sweep (over the ranks, or this process's workers), then what became of it: interrupted,
/// stopped, failed points, or the finished file and its summary. Returns the exit status.
int sweep_and_summarise(Run& run) {
  const Settings& s = run.settings;
  const io::ResultLayout& layout = run.problem.layout;
  io::ResultWriter& writer = *run.writer;
  const std::string partial = io::partial_path(s.output);
  Progress progress(layout.points(), writer.points_done(), !s.quiet && layout.points() > 1 && isatty(STDERR_FILENO));
  SweepReporter report(run.problem, progress, run.rank_names);
  std::optional<RankWorkers> ranks;
  if (run.ranks) ranks.emplace(*run.ranks, s.fail_root_mid_sweep);
  const int workers = run.ranks ? run.ranks->size() : run.parallel;
  SweepOutcome outcome;
  const auto sweep_start = std::chrono::steady_clock::now();
  try {
    const auto done = [&](std::size_t point) { return writer.done(point); };
    outcome = execute_sweep(run.problem, writer, plan_units(run.problem, done, workers, s.wavelengths_per_unit),
                            {run.workers, ranks ? &*ranks : nullptr}, report, s.stop_after);
  } catch (const io::OutputError& e) {  // a failed write (a full disk): what is kept, what to do
    progress.clear();
    throw io::OutputError(std::string(e.what()) + "\n  the " + std::to_string(writer.points_done()) + " of " +
                          std::to_string(layout.points()) + " points finished are kept in " + partial +
                          "; once the cause is removed, 'gratingsim run --resume' solves the rest");
  }
  const auto sweep_end = std::chrono::steady_clock::now();
  progress.clear();
  report.print_repeated();
  if (outcome.interrupted) {
    std::cerr << "gratingsim run: interrupted (" << (stop_signal() == SIGTERM ? "SIGTERM" : "SIGINT")
              << "): " << writer.points_done() << " of " << layout.points() << " points finished and kept in "
              << partial << "; run again with --resume to solve the rest\n";
    return 128 + stop_signal();
  }
  if (outcome.stopped) {
    std::cerr << "gratingsim run: stopped after " << outcome.solved << " points as asked (--stop-after); " << partial
              << " keeps them for --resume\n";
    return 1;
  }
  if (const std::size_t missing = layout.points() - writer.points_done(); missing > 0) {
    std::string why;
    for (const std::string& f : outcome.failures) why += "\n  " + f;
    throw Error(std::to_string(missing) + " point(s) not solved:" + why + "\n  the " +
                std::to_string(writer.points_done()) + " solved point(s) are kept in " + partial +
                "; 'gratingsim run --resume' solves the rest");
  }
  writer.finish(s.overwrite);
  const RunTimes times{std::chrono::duration<double>(std::chrono::steady_clock::now() - run.start).count(),
                       std::chrono::duration<double>(sweep_end - sweep_start).count(),
                       run.ranks ? run.ranks->size() : 1};
  const bool reliable = s.quiet ? !any_unreliable(s.output)
                                : print_summary(s.case_path, s.output, run.problem, outcome.solved, times);
  return reliable ? 0 : exit_unreliable;
}

int run_command(const Options& options, const Launch& launch) {
  Run run;
  run.settings = parse_settings(options);
  run.start = std::chrono::steady_clock::now();
  install_signal_handlers();
  // Several processes: every step below that can fail is settled (every rank agrees, rank 0 tells).
  if (launch.size > 1) run.ranks = Ranks::join();
  load_case(run);
  take_backend(run);
  if (run.root() && !run.settings.quiet) note_absorbing_substrate(run.problem.source);
  name_devices(run);
  open_result_file(run);
  if (!run.root()) {  // solve what rank 0 sends, then return the status it decides
    serve_sweep(*run.ranks, run.problem, run.workers[0]);
    return std::stoi(run.ranks->broadcast(""));
  }
  int status = 1;
  try {
    status = sweep_and_summarise(run);
  } catch (...) {
    if (run.ranks) {
      (void)run.ranks->broadcast("1");
      run.ranks->agree_to_stop();
    }
    throw;
  }
  if (run.ranks) (void)run.ranks->broadcast(std::to_string(status));
  return status;
}

int run_run(const Options& options) {
  const Launch launch = detect_launch();  // before MPI starts: only rank 0 talks to the user
  try {
    return run_command(options, launch);
  } catch (const Error& e) {
    // Before MPI starts (a wrong command line, a build without MPI) every process fails alike: one says so.
    if (launch.rank != 0 && !dynamic_cast<const ReportedElsewhere*>(&e)) throw ReportedElsewhere(e.what());
    throw;
  }
}

}  // namespace

const Command gratingsim_run{
    .name = "run",
    .summary = "solve a YAML case file, write its HDF5 result file (exit 3: some result unreliable: a solve did not converge, or a point is off its energy balance)",
    .usage =
        "gratingsim run CASE.yaml [-o OUT.h5] [--backend NAME|auto] [--precision single|double] [--resume] "
        "[--overwrite] [--quiet]\n       mpirun -n K gratingsim run CASE.yaml ...",
    .description =
        "Solves every sweep point of the case (wavelengths × θ × φ; the points of one or, on a GPU, several "
        "wavelengths in one batched solve: --wavelengths-per-unit) and writes the result file described in io/SCHEMA.md: OUT.h5.partial while running, each "
        "finished point flushed to disk, renamed to OUT.h5 when every point is done. A sweep shows its "
        "progress on stderr when that is a terminal; at the end a summary table lists per point the "
        "propagating orders, R, T, the energy balance, the solver's iterations and residual, and the time. "
        "Errors in the case file are reported at their line and column before anything is written. Launched "
        "by mpirun (a build with MPI), the K ranks share the sweep: each takes its own GPU on a host with "
        "several, asks rank 0 for the next unit of points when it is done with the last, and rank 0 "
        "writes the one result file, the same as a one-process run's; every rank must see the case file. "
        "A rank that fails is reported with its points; the others' results are kept for --resume, which "
        "works with any number of ranks. Exit status: 0 done; 1 an error (nothing written for an invalid "
        "case; a failed sweep leaves OUT.h5.partial for --resume); 2 a wrong command line; 3 done, but "
        "some solve did not reach its tolerance, or (numerics.harmonics: auto, slices: auto) some point did not "
        "reach its target_error within the ladder's maximum, or a point is off its energy balance by more than 0.05 "
        "(|1 - ΣR - ΣT| where lossless, an absorption below -0.05 where not: too few slices or harmonics): every point is written, those "
        "marked in the summary and stored with solver/converged = 0, accuracy/reached = 0 or their "
        "results/energy_balance_error; 130 (143) interrupted by SIGINT, Ctrl-C (SIGTERM): "
        "the points being solved are written, the finished points kept in OUT.h5.partial for --resume (a "
        "second interrupt ends the run at once). While a run writes OUT.h5 it holds OUT.h5.lock: a second "
        "run on the same output refuses at once, naming it.",
    .options = run_options,
    .max_positional = 1,
    .positional = "CASE.yaml",
    .run = run_run};

}  // namespace gratingsim::app
