// gratingsim run under mpirun (app/distributed_sweep.cpp): K ranks write the file one process
// writes, bit for bit (solve times and the device attribute aside), with CPU ranks and, where this
// machine has CUDA devices, GPU ranks; a failing rank reports its points, the others' are kept and
// a resume with another number of ranks completes the file; a killed rank ends the launch and the
// finished points are kept for a resume; --stop-after stops every rank; an invalid case is
// reported once; the exit status of unconverged solves reaches the shell; units of several wavelengths
// (--wavelengths-per-unit) travel between ranks alike, a failed one named with its wavelengths. A build without MPI
// refuses an MPI launch. Outputs that would destroy a file are refused under mpirun as in one process.
// Two local workers of one process (app/sweep_executor.cpp) write the file one worker writes, bit for
// bit, and stop after the points asked.
#include <cmath>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "convolution/devices.hpp"
#include "io/results.hpp"
#include "validation/app/executable.hpp"
#include "validation/app/same_points.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using test::contains;
using test::quoted;
using test::run_gratingsim;
using test::sweep_case;

namespace {

// Crossed, conical, with field harmonics and a field map: every part of a point travels between ranks.
constexpr const char* fields_case = R"(wavelength: [600, 700]
incidence: {theta_deg: [0, 20], phi_deg: 30}
lattice: {period_x: 400, period_y: 350}
substrate: SiO2
layers:
  - {name: pillars, thickness: 100, slices: 2, shapes: [{type: circle, material: Si3N4, diameter: 180}]}
numerics: {harmonics: [2, 2]}
output: {fields: true, planes: [{plane: xz, at: 0, points: 9}]}
)";

#if GRATINGSIM_EXECUTABLE_MPI
/// "mpirun -n K", allowed to run as root (CI containers) and on fewer cores than ranks.
std::string mpirun(int ranks) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  return std::string("'") + GRATINGSIM_MPIEXEC + "' --oversubscribe -n " + std::to_string(ranks);
}

/// The pid of rank `rank` among the processes `mpirun` (its pid) started on this host, or -1.
pid_t rank_pid(pid_t mpirun, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    std::string line;
    pid_t parent = -1;
    while (std::getline(status, line))
      if (line.rfind("PPid:", 0) == 0) parent = pid_t(std::stol(line.substr(5)));
    if (parent != mpirun) continue;
    const std::string environment = test::read_text(entry.path() / "environ");
    if (contains(environment, std::string(1, '\0') + "OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + '\0'))
      return pid_t(std::stol(name));
  }
  return -1;
}

/// The points of "failed on points 1, 2 (λ …)" / "failed on point 1 (λ …)" in a run's output.
std::vector<std::size_t> failed_points(const std::string& output) {
  std::smatch m;
  std::vector<std::size_t> points;
  if (!std::regex_search(output, m, std::regex(R"(failed on points? ([0-9, ]+) \()"))) return points;
  const std::string list = m[1];
  const std::regex number("[0-9]+");
  for (std::sregex_iterator it(list.begin(), list.end(), number), end; it != end; ++it)
    points.push_back(std::stoul(it->str()));
  return points;
}
#endif

}  // namespace

#if GRATINGSIM_EXECUTABLE_MPI

TEST_CASE("mpirun -n 2 writes the file one process writes, bit for bit", "[app][mpi]") {
  const test::ScratchDirectory dir("mpi_same");
  std::vector<std::string> backends{"cpu-fftw"};
  if (!conv::cuda_report().devices.empty()) backends.push_back("gpu-fused");  // GPU ranks too, where there are GPUs
  for (const auto& [name, text] :
       {std::pair{"sweep", sweep_case}, std::pair{"fields", fields_case}, std::pair{"auto", test::auto_sweep_case},
        std::pair{"parameters", test::parameter_case}})
    for (const std::string& backend : backends)
      for (const char* precision : {"double", "single"}) {
        const std::string tag = std::string(name) + "_" + backend + "_" + precision;
        INFO(tag);
        const fs::path config = dir / (tag + ".yaml"), alone = dir / (tag + "_alone.h5"),
                       distributed = dir / (tag + "_mpi.h5");
        std::ofstream(config) << text;
        const std::string options = " --backend " + backend + " --precision " + precision;
        const test::Execution one = run_gratingsim("run " + quoted(config) + " -o " + quoted(alone) + options);
        INFO(one.output);
        REQUIRE(one.status == 0);
        const test::Execution two =
            run_gratingsim("run " + quoted(config) + " -o " + quoted(distributed) + options, "", mpirun(2));
        INFO(two.output);
        REQUIRE(two.status == 0);
        CHECK(contains(two.output, "by 2 MPI ranks"));
        CHECK(!fs::exists(io::partial_path(distributed.string())));
        test::check_same_points(distributed, alone);
        CHECK(io::ResultReader(distributed.string()).info().device.starts_with("2 × "));
      }
}

TEST_CASE("a failing rank reports its points, the others are kept, a resume on 3 ranks completes the file",
          "[app][mpi]") {
  const test::ScratchDirectory dir("mpi_failure");
  const fs::path config = dir / "sweep.yaml", alone = dir / "alone.h5", out = dir / "out.h5";
  std::ofstream(config) << sweep_case;
  const std::string partial = io::partial_path(out.string());
  REQUIRE(run_gratingsim("run " + quoted(config) + " -o " + quoted(alone) + " --backend cpu-fftw --quiet").status == 0);

  const test::Execution failed = run_gratingsim(
      "run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --fail-on-rank 1", "", mpirun(2));
  INFO(failed.output);
  CHECK(failed.status != 0);
  CHECK(contains(failed.output, "rank 1 ("));
  CHECK(contains(failed.output, "injected failure"));
  CHECK(contains(failed.output, "'gratingsim run --resume' solves the rest"));
  CHECK(!fs::exists(out));
  REQUIRE(fs::exists(partial));
  const std::vector<std::size_t> lost = failed_points(failed.output);
  REQUIRE(!lost.empty());
  std::vector<io::PointResult> kept(6);
  {
    const io::ResultReader reader(partial);
    for (std::size_t p = 0; p < 6; ++p) {
      INFO("point " << p);
      const bool reported = std::find(lost.begin(), lost.end(), p) != lost.end();
      CHECK(reader.done(p) == !reported);  // exactly the reported points are missing
      if (!reported) kept[p] = reader.read(p);
    }
  }
  CHECK(contains(failed.output, std::to_string(lost.size()) + " point(s) not solved"));

  const test::Execution resumed =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --resume", "", mpirun(3));
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK(contains(resumed.output, std::to_string(lost.size()) + " point(s) solved"));
  CHECK(!fs::exists(partial));
  test::check_same_points(out, alone);
  const io::ResultReader reader(out.string());
  CHECK(contains(reader.info().device, "; resumed on 3 × "));
  for (std::size_t p = 0; p < 6; ++p)
    if (std::find(lost.begin(), lost.end(), p) == lost.end()) {
      INFO("point " << p);
      CHECK(reader.read(p) == kept[p]);  // bitwise, solve time included: not recomputed
    }
}

TEST_CASE("under mpirun units of several wavelengths write the same file, and a failed one is named with its wavelengths",
          "[app][mpi][units]") {
  // parameter_case: 4 parameter points × 3 wavelengths × 2 angles; 3 wavelengths per unit: 4 units of 6 points.
  const test::ScratchDirectory dir("mpi_units");
  const fs::path config = dir / "parameters.yaml", alone = dir / "alone.h5", out = dir / "out.h5",
                 failing = dir / "failing.h5";
  std::ofstream(config) << test::parameter_case;
  const std::string args = "run " + quoted(config) + " --backend cpu-fftw -o ";
  REQUIRE(run_gratingsim(args + quoted(alone) + " --quiet --wavelengths-per-unit 1").status == 0);
  const test::Execution two = run_gratingsim(args + quoted(out) + " --wavelengths-per-unit 3", "", mpirun(2));
  INFO(two.output);
  REQUIRE(two.status == 0);
  test::check_same_points(out, alone);

  const test::Execution failed =
      run_gratingsim(args + quoted(failing) + " --wavelengths-per-unit 3 --fail-on-rank 1", "", mpirun(2));
  INFO(failed.output);
  CHECK(failed.status != 0);
  CHECK(contains(failed.output, "(λ = 500 … 750 nm): injected failure"));
  const std::vector<std::size_t> lost = failed_points(failed.output);
  REQUIRE(lost.size() == 6);
  {
    const io::ResultReader reader(io::partial_path(failing.string()));
    for (std::size_t p = 0; p < 24; ++p) {
      INFO("point " << p);
      CHECK(reader.done(p) == (std::find(lost.begin(), lost.end(), p) == lost.end()));
    }
  }
  const test::Execution resumed =
      run_gratingsim(args + quoted(failing) + " --resume --wavelengths-per-unit 2", "", mpirun(3));
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK(contains(resumed.output, "6 point(s) solved"));
  test::check_same_points(failing, alone);
}

TEST_CASE("under mpirun a killed rank ends the launch, the finished points are kept and --resume completes",
          "[app][mpi]") {
  const test::ScratchDirectory dir("mpi_killed");
  const fs::path config = dir / "sweep.yaml", alone = dir / "alone.h5", out = dir / "out.h5";
  std::ofstream(config) << std::regex_replace(std::string(sweep_case), std::regex("wavelength: \\[500, 650, 750\\]"),
                                              "wavelength: {start: 500, stop: 760, count: 14}");
  const std::string partial = io::partial_path(out.string());
  REQUIRE(run_gratingsim("run " + quoted(config) + " -o " + quoted(alone) + " --backend cpu-fftw --quiet").status == 0);

  // Once rank 0 writes, it is stopped where it is (so that the sweep cannot end first), rank 1 is
  // killed, and rank 0 continues: mpirun then ends the launch.
  test::Background launch("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw", dir / "launch.log",
                          mpirun(2));
  REQUIRE(test::wait_until([&] { return fs::exists(partial); }));
  pid_t rank0 = -1, rank1 = -1;
  REQUIRE(test::wait_until([&] { return (rank0 = rank_pid(launch.pid(), 0)) > 0 && (rank1 = rank_pid(launch.pid(), 1)) > 0; }));
  ::kill(rank0, SIGSTOP);
  ::kill(rank1, SIGKILL);
  ::kill(rank0, SIGCONT);
  const test::Execution killed = launch.wait();
  INFO(killed.output);
  // mpirun may return while rank 0, interrupted by it, still finishes the points it was writing and
  // holds HDF5's lock on the partial (reading it then fails with EAGAIN): wait until rank 0 is gone.
  CHECK(test::wait_until([&] { return ::kill(rank0, 0) != 0; }));
  CHECK(killed.status != 0);
  CHECK(contains(killed.output, "rank 1"));  // mpirun names it
  CHECK(!fs::exists(out));
  REQUIRE(fs::exists(partial));
  std::vector<io::PointResult> kept;
  {
    const io::ResultReader reader(partial);
    for (std::size_t p = 0; p < reader.layout().points(); ++p) kept.push_back(reader.done(p) ? reader.read(p) : io::PointResult{});
  }
  // One process resumes (the lock file a killed rank 0 may leave holds no lock).
  const test::Execution resumed =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --resume --quiet");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  test::check_same_points(out, alone);
  const io::ResultReader reader(out.string());
  for (std::size_t p = 0; p < kept.size(); ++p)
    if (!kept[p].reflectance.empty()) {
      INFO("point " << p);
      CHECK(reader.read(p) == kept[p]);  // bitwise, solve time included: kept, not recomputed
    }
}

TEST_CASE("under mpirun --stop-after stops every rank and keeps exactly the points written", "[app][mpi]") {
  const test::ScratchDirectory dir("mpi_stop");
  const fs::path config = dir / "sweep.yaml", out = dir / "out.h5";
  std::ofstream(config) << sweep_case;
  const test::Execution r = run_gratingsim(
      "run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --stop-after 2", "", mpirun(2));
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "stopped after 2 points"));
  CHECK(!fs::exists(out));
  const io::ResultReader reader(io::partial_path(out.string()));
  std::size_t done = 0;
  for (std::size_t p = 0; p < reader.layout().points(); ++p) done += reader.done(p) ? 1 : 0;
  CHECK(done == 2);
}

TEST_CASE("under mpirun rank 0 failing mid-sweep stops every rank and reports its error", "[app][mpi]") {
  // Rank 0 throws once ranks 1 and 2 hold their first units (--fail-root-mid-sweep): they must be told to stop
  // (their results received and dropped) so that the launch ends with rank 0's error, not hang with rank 0 in
  // MPI_Finalize and the others waiting for work (run_gratingsim's watchdog ends a hung launch after 300 s).
  const test::ScratchDirectory dir("mpi_root_failure");
  const fs::path config = dir / "sweep.yaml", out = dir / "out.h5";
  std::ofstream(config) << sweep_case;
  const test::Execution r = run_gratingsim(
      "run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --fail-root-mid-sweep", "", mpirun(3));
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "injected failure on rank 0 (--fail-root-mid-sweep)"));
  CHECK(!contains(r.output, "watchdog"));
  CHECK(!fs::exists(out));
}

TEST_CASE("under mpirun an invalid case is reported once and nothing is written", "[app][mpi]") {
  const test::ScratchDirectory dir("mpi_invalid");
  const fs::path config = dir / "broken.yaml", out = dir / "broken.h5";
  std::ofstream(config) << std::regex_replace(std::string(sweep_case), std::regex("period_x: 600"), "period_x: -600");
  const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out), "", mpirun(2));
  INFO(r.output);
  CHECK(r.status == 1);
  const std::regex located("broken\\.yaml:[0-9]+:[0-9]+: error");
  CHECK(std::distance(std::sregex_iterator(r.output.begin(), r.output.end(), located), std::sregex_iterator()) == 1);
  CHECK(!fs::exists(out));
  CHECK(!fs::exists(io::partial_path(out.string())));
}

TEST_CASE("under mpirun outputs that would destroy a file are refused before solving, each once", "[app][mpi][safety]") {
  const test::ScratchDirectory dir("mpi_output_safety");
  const fs::path config = dir / "case.yaml";
  std::ofstream(config) << sweep_case;
  const std::string original = test::read_text(config);
  const auto refused = [&](const fs::path& out, const std::string& says) {
    const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --quiet", "", mpirun(2));
    INFO(out << ": " << r.output);
    CHECK(r.status == 1);
    CHECK(contains(r.output, says));
    std::size_t errors = 0;  // rank 0 reports, once
    for (auto at = r.output.find("error:"); at != std::string::npos; at = r.output.find("error:", at + 1)) ++errors;
    CHECK(errors == 1);
    CHECK(!contains(r.output, "point(s) solved"));  // no summary (a rank stopped by mpirun may say "being solved")
  };
  refused(config, "a file the case reads");
  CHECK(test::read_text(config) == original);
  refused("/dev/null", "not a regular file");
  CHECK(fs::is_character_file("/dev/null"));
  const fs::path fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  refused(fifo, "not a regular file");
  CHECK(fs::is_fifo(fifo));
  refused(dir.path(), "is a directory");
  refused(dir / "no/out.h5", "does not exist");
  const fs::path earlier = dir / "out.h5";
  std::ofstream(earlier) << "an earlier result";
  refused(earlier, "--overwrite");
  CHECK(test::read_text(earlier) == "an earlier result");
}

TEST_CASE("under mpirun unconverged solves give exit status 3", "[app][mpi]") {
  const test::ScratchDirectory dir("mpi_unconverged");
  const fs::path config = dir / "hard.yaml", out = dir / "hard.h5";
  std::ofstream(config) << std::regex_replace(std::string(sweep_case), std::regex("numerics: \\{harmonics: 4\\}"),
                                              "numerics: {harmonics: 4, solver: {max_iterations: 2, preconditioner: none}}");
  const test::Execution r =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-direct", "", mpirun(2));
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(contains(r.output, "did NOT converge"));
  CHECK(fs::exists(out));
}

#else

TEST_CASE("a build without MPI refuses an MPI launch and writes nothing", "[app][mpi]") {
  const test::ScratchDirectory dir("no_mpi");
  const fs::path config = dir / "sweep.yaml", out = dir / "out.h5";
  std::ofstream(config) << sweep_case;
  // What mpirun -n 2 sets for the first and the second process.
  for (const char* rank : {"0", "1"}) {
    INFO("rank " << rank);
    const test::Execution r = run_gratingsim("run " + quoted(config) + " -o " + quoted(out), "",
                                             std::string("OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=") + rank);
    INFO(r.output);
    CHECK(r.status == 1);
    if (std::string(rank) == "0")
      CHECK(contains(r.output, "built without MPI"));
    else
      CHECK(r.output.empty());  // one message for the launch, from rank 0
    CHECK(!fs::exists(out));
    CHECK(!fs::exists(io::partial_path(out.string())));
  }
  // Launched as one process, it runs.
  CHECK(run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --quiet", "",
                       "OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0")
            .status == 0);
  CHECK(fs::exists(out));
}

#endif

// Local workers (app/sweep_executor.hpp): several in one process, one per visible GPU for a GPU
// backend (where this machine has two or more), CPU workers asked for with the testing option
// --workers. Their units are smaller than a wavelength's batch (6 units of 1 point for sweep_case's
// 3 × 2 points on 2 workers).
TEST_CASE("two local workers write the file one worker writes, bit for bit", "[app][run]") {
  const test::ScratchDirectory dir("local_workers");
  // (backend, the options that give several workers, the device attribute's start)
  std::vector<std::array<std::string, 3>> setups{{"cpu-fftw", " --workers 2", "2 × "}};
  // GPU: the automatic policy (app/run.cpp local_workers): one worker per device, or several sharing
  // each device (own streams) when batches are as small as these; the device attribute names each
  // device once.
  const std::size_t gpus = conv::cuda_report().devices.size();
  if (gpus >= 2) setups.push_back({"gpu-fused", "", std::to_string(gpus) + " × "});
  if (gpus == 1) setups.push_back({"gpu-fused", "", ""});
  for (const auto& [backend, several, device] : setups)
    for (const auto& [name, text] :
         {std::pair{"sweep", sweep_case}, std::pair{"fields", fields_case}, std::pair{"auto", test::auto_sweep_case},
        std::pair{"parameters", test::parameter_case}})
      for (const char* precision : {"double", "single"}) {
        const std::string tag = std::string(name) + "_" + backend + "_" + precision;
        INFO(tag);
        const fs::path config = dir / (tag + ".yaml"), alone = dir / (tag + "_one.h5"), two = dir / (tag + "_two.h5");
        std::ofstream(config) << text;
        const std::string options = " --backend " + backend + " --precision " + precision;
        const test::Execution one =
            run_gratingsim("run " + quoted(config) + " -o " + quoted(alone) + options + " --workers 1");
        INFO(one.output);
        REQUIRE(one.status == 0);
        const test::Execution both = run_gratingsim("run " + quoted(config) + " -o " + quoted(two) + options + several);
        INFO(both.output);
        REQUIRE(both.status == 0);
        CHECK(!fs::exists(io::partial_path(two.string())));
        test::check_same_points(two, alone);
        const std::string device_attribute = io::ResultReader(two.string()).info().device;
        CHECK(device_attribute.starts_with(device));
        if (gpus == 1 && backend == "gpu-fused") CHECK(device_attribute.find("×") == std::string::npos);
      }
}

TEST_CASE("two local workers stop after the points asked, and one worker resumes to the same file", "[app][run]") {
  const test::ScratchDirectory dir("local_workers_stop");
  const fs::path config = dir / "sweep.yaml", alone = dir / "one.h5", out = dir / "out.h5";
  std::ofstream(config) << sweep_case;
  REQUIRE(run_gratingsim("run " + quoted(config) + " -o " + quoted(alone) + " --backend cpu-fftw --quiet").status == 0);
  const test::Execution stopped =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --stop-after 3 --workers 2");
  INFO(stopped.output);
  CHECK(stopped.status == 1);
  CHECK(contains(stopped.output, "stopped after 3 points"));
  {
    const io::ResultReader reader(io::partial_path(out.string()));
    std::size_t done = 0;
    for (std::size_t p = 0; p < reader.layout().points(); ++p) done += reader.done(p) ? 1 : 0;
    CHECK(done == 3);
  }
  const test::Execution resumed =
      run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --resume");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  test::check_same_points(out, alone);
}
