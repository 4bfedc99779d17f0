// gratingsim run under faults, end to end (issues #13, #17): two runs on one output, an output path
// that changes under a run, a write that fails (a real file-size limit), damaged partial files,
// resuming from another spelling of the case's path, and an interrupt (SIGINT). Every fault leaves
// the finished points readable and `--resume` completes the run to the same file as an
// uninterrupted one.
#include <hdf5.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "validation/app/executable.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using test::contains;
using test::quoted;
using test::run_gratingsim;

namespace {

/// 28 points (14 wavelengths × 2 angles) with fields: each point adds a compressed chunk to the file,
/// so the file grows during the sweep (a file-size limit is met in the middle), and the run takes long
/// enough to be caught running. The line's material is a table, a file the case reads.
constexpr const char* growing_case = R"(# 28 points with field output; the lines' index from a table
wavelength: {start: 500, stop: 760, count: 14}
incidence: {theta_deg: [0, 30]}
lattice: {period_x: 600}
substrate: SiO2
materials: {nitride: {table: nitride.csv}}
layers:
  - {name: lines, thickness: 150, slices: 3, shapes: [{type: line, material: nitride, width: 250}]}
numerics: {harmonics: 4}
output: {fields: true}
)";
constexpr std::size_t growing_points = 28;
constexpr const char* nitride_table = "# wavelength/nm, n, k\n400, 2.05, 0.001\n800, 2.00, 0\n";

/// A directory holding the case and its table, and the reference: the case run uninterrupted.
struct Setup {
  test::ScratchDirectory dir;
  fs::path config, reference;
  explicit Setup(const std::string& tag) : dir(tag), config(dir / "w.yaml"), reference(dir / "reference.h5") {
    std::ofstream(config) << growing_case;
    std::ofstream(dir / "nitride.csv") << nitride_table;
    const test::Execution r = run("-o " + quoted(reference));
    INFO(r.output);
    REQUIRE(r.status == 0);
  }
  [[nodiscard]] test::Execution run(const std::string& arguments, const std::string& launcher = "") const {
    return run_gratingsim("run " + quoted(config) + " --backend cpu-fftw --quiet " + arguments, "", launcher);
  }
  [[nodiscard]] std::string args(const fs::path& out) const {
    return "run " + quoted(config) + " -o " + quoted(out) + " --backend cpu-fftw --quiet";
  }
};

/// Every point of `file` (with `finished_only`, every finished one) equals the reference's bit for
/// bit, solve and phase times aside (points of a resumed run were solved in other batches: the same numbers).
void check_equals_reference(const fs::path& file, const fs::path& reference, bool finished_only = false) {
  const io::ResultReader a(file.string()), b(reference.string());
  REQUIRE(a.layout() == b.layout());
  REQUIRE(a.layout().points() == growing_points);
  for (std::size_t p = 0; p < growing_points; ++p) {
    INFO("point " << p);
    if (finished_only && !a.done(p)) continue;
    REQUIRE(a.done(p));
    io::PointResult x = a.read(p);
    const io::PointResult y = b.read(p);
    x.solve_seconds = y.solve_seconds;
    x.phase_seconds = y.phase_seconds;
    CHECK(x == y);
  }
}

std::size_t count_done(const fs::path& file) {
  const io::ResultReader reader(file.string());
  std::size_t n = 0;
  for (std::size_t p = 0; p < reader.layout().points(); ++p) n += reader.done(p);
  return n;
}

/// Waits until the background run has created its partial file (so it holds the lock and has
/// checked its output), then stops it (SIGSTOP) where it is.
void pause_once_writing(const test::Background& run, const fs::path& out) {
  REQUIRE(test::wait_until([&] { return fs::exists(io::partial_path(out.string())); }));
  run.signal(SIGSTOP);
}

/// Opens an HDF5 file for the test's own damage, closing it at scope exit.
struct RawFile {
  hid_t id;
  explicit RawFile(const fs::path& path) : id(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)) { REQUIRE(id >= 0); }
  ~RawFile() { H5Fclose(id); }
};

}  // namespace

TEST_CASE("two runs on one output: the second refuses at once naming the first, which finishes untouched",
          "[app][run][safety]") {
  const Setup setup("two_runs");
  const fs::path out = setup.dir / "out.h5";
  test::Background first(setup.args(out), setup.dir / "first.log");
  pause_once_writing(first, out);
  const std::string partial = io::partial_path(out.string());
  const std::string before = test::read_text(partial);
  for (const char* extra : {"", " --resume", " --overwrite", " --resume --overwrite"}) {
    INFO(extra);
    const test::Execution second = run_gratingsim(setup.args(out) + extra);
    INFO(second.output);
    CHECK(second.status == 1);
    CHECK(contains(second.output, "being written by another gratingsim run (pid " + std::to_string(first.pid())));
    CHECK(test::read_text(partial) == before);  // not truncated, not rewritten
  }
  first.signal(SIGCONT);
  const test::Execution done = first.wait();
  INFO(done.output);
  REQUIRE(done.status == 0);
  CHECK(!fs::exists(partial));
  CHECK(!fs::exists(io::lock_path(out.string())));
  check_equals_reference(out, setup.reference);
}

TEST_CASE("the final rename never replaces what appeared at the output path during the run",
          "[app][run][safety]") {
  const Setup setup("rename");
  const fs::path out = setup.dir / "out.h5";
  const std::string partial = io::partial_path(out.string());
  {  // a FIFO: not a regular file, left as it is
    test::Background run(setup.args(out), setup.dir / "fifo.log");
    pause_once_writing(run, out);
    REQUIRE(::mkfifo(out.c_str(), 0600) == 0);
    run.signal(SIGCONT);
    const test::Execution r = run.wait();
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(contains(r.output, out.string() + " is not a regular file"));
    CHECK(contains(r.output, "the complete result stays in " + partial));
    CHECK(fs::is_fifo(out));
    CHECK(count_done(partial) == growing_points);
    fs::remove(out);
  }
  {  // a regular file there now: not replaced without --overwrite (refused up front by the resume)
    std::ofstream(out) << "someone else's result";
    const test::Execution r = setup.run("-o " + quoted(out) + " --resume");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(contains(r.output, "--overwrite"));
    CHECK(test::read_text(out) == "someone else's result");
    fs::remove(out);
  }
  const test::Execution resumed = setup.run("-o " + quoted(out) + " --resume");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK(!fs::exists(partial));
  check_equals_reference(out, setup.reference);
}

TEST_CASE("a write that fails (a file-size limit) is reported, keeps the finished points, and --resume completes",
          "[app][run][safety]") {
  const Setup setup("write_fails");
  const fs::path out = setup.dir / "out.h5";
  const std::string partial = io::partial_path(out.string());
  // A real limit (RLIMIT_FSIZE, util-linux's prlimit) at 5/8 of the complete file: the sweep meets it in
  // the middle. gratingsim ignores SIGXFSZ itself: the write fails with EFBIG instead of the signal
  // killing the run.
  const std::uintmax_t limit = fs::file_size(setup.reference) * 5 / 8;
  const test::Execution limited = setup.run("-o " + quoted(out), "prlimit --fsize=" + std::to_string(limit));
  INFO(limited.output);
  CHECK(limited.status == 1);  // not a crash (-1)
  CHECK(contains(limited.output, "cannot write point"));
  CHECK(contains(limited.output, "File too large"));
  CHECK(contains(limited.output, "points finished are kept in " + partial));
  CHECK(contains(limited.output, "--resume"));
  CHECK(!contains(limited.output, "HDF5"));
  CHECK(!fs::exists(out));
  CHECK(!fs::exists(io::lock_path(out.string())));
  const std::size_t kept = count_done(partial);
  CHECK(kept > 0);
  CHECK(kept < growing_points);
  CHECK(contains(limited.output, "the " + std::to_string(kept) + " of 28 points finished"));
  check_equals_reference(partial, setup.reference, true);  // the finished points, intact

  const test::Execution resumed = setup.run("-o " + quoted(out) + " --resume");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  check_equals_reference(out, setup.reference);

  // A limit below the new file's size: HDF5 itself fails while creating it. Reported (no crash while
  // HDF5 would close the file), and the half-made partial file removed.
  const fs::path tiny = setup.dir / "tiny.h5";
  const test::Execution create = setup.run("-o " + quoted(tiny), "prlimit --fsize=4096");
  INFO(create.output);
  CHECK(create.status == 1);
  CHECK(contains(create.output, "cannot create " + io::partial_path(tiny.string())));
  CHECK(contains(create.output, "File too large"));
  CHECK(!fs::exists(io::partial_path(tiny.string())));
  CHECK(!fs::exists(io::lock_path(tiny.string())));
}

TEST_CASE("damaged partial files are refused with what to do: a done flag not 0 or 1, a flipped data byte, garbage",
          "[app][run][safety]") {
  const Setup setup("damaged");
  const fs::path out = setup.dir / "out.h5";
  const std::string partial = io::partial_path(out.string());
  const auto interrupted_partial = [&] {
    const test::Execution r = setup.run("-o " + quoted(out) + " --stop-after 3 --overwrite");
    INFO(r.output);
    REQUIRE(r.status == 1);
    REQUIRE(count_done(partial) == 3);
  };
  const auto check_refused = [&](const std::string& cause) {
    const test::Execution r = setup.run("-o " + quoted(out) + " --resume");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(contains(r.output, partial + " is damaged"));
    CHECK(contains(r.output, cause));
    CHECK(contains(r.output, "delete " + partial));
    CHECK(contains(r.output, "run without --resume"));
    CHECK(!contains(r.output, "HDF5-DIAG"));  // no raw error stack
    CHECK(!fs::exists(out));
  };

  SECTION("a done flag of 7") {
    interrupted_partial();
    {
      const RawFile file(partial);
      const hid_t set = H5Dopen2(file.id, "done", H5P_DEFAULT);
      std::vector<std::uint8_t> done(growing_points, 0);
      REQUIRE(H5Dread(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, done.data()) >= 0);
      done[5] = 7;
      REQUIRE(H5Dwrite(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, done.data()) >= 0);
      H5Dclose(set);
    }
    check_refused("the done flag of point 5 is 7");
  }
  SECTION("a byte flipped in a finished point's field data (its Fletcher32 checksum)") {
    interrupted_partial();
    haddr_t address = 0;
    hsize_t size = 0;
    {
      const RawFile file(partial);
      const hid_t set = H5Dopen2(file.id, "fields/harmonics", H5P_DEFAULT);
      const hsize_t offset[8] = {};
      REQUIRE(H5Dget_chunk_info_by_coord(set, offset, nullptr, &address, &size) >= 0);  // point 0
      H5Dclose(set);
    }
    REQUIRE(size > 16);
    {
      std::fstream f(partial, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(std::streamoff(address + size / 2));
      const char byte = char(f.get() ^ 0x10);
      f.seekp(std::streamoff(address + size / 2));
      f.put(byte);
    }
    check_refused("point 0");
    // A complete file read back reports the damage too, not wrong numbers.
    REQUIRE(setup.run("-o " + quoted(out) + " --overwrite").status == 0);
    std::fstream f(out, std::ios::in | std::ios::out | std::ios::binary);
    {
      const RawFile file(out);
      const hid_t set = H5Dopen2(file.id, "fields/harmonics", H5P_DEFAULT);
      const hsize_t offset[8] = {};
      REQUIRE(H5Dget_chunk_info_by_coord(set, offset, nullptr, &address, &size) >= 0);
      H5Dclose(set);
    }
    f.seekg(std::streamoff(address + size / 2));
    const char byte = char(f.get() ^ 0x10);
    f.seekp(std::streamoff(address + size / 2));
    f.put(byte);
    f.close();
    const io::ResultReader reader(out.string());
    CHECK_THROWS_WITH(reader.read(0), Catch::Contains(out.string() + " is damaged"));
    CHECK_NOTHROW(reader.read(1));
  }
  SECTION("not an HDF5 file at all") {
    interrupted_partial();
    std::ofstream(partial, std::ios::trunc) << "half a file";
    check_refused("not a gratingsim result file");
  }
}

TEST_CASE("resume (--resume) knows the case by its content: other spellings of its path resume, a changed table does not",
          "[app][run][safety]") {
  const Setup setup("spelling");
  const fs::path out = setup.dir / "out.h5";
  const auto in = [](const fs::path& directory) { return "cd " + quoted(directory) + " &&"; };
  // Relative from the case's directory, then absolute, each stopping after 3 points.
  const test::Execution relative =
      run_gratingsim("run w.yaml -o out.h5 --backend cpu-fftw --quiet --stop-after 3", "", in(setup.dir.path()));
  INFO(relative.output);
  REQUIRE(relative.status == 1);
  const test::Execution absolute = run_gratingsim(
      "run " + quoted(fs::absolute(setup.config)) + " -o " + quoted(out) + " --backend cpu-fftw --quiet --resume --stop-after 3");
  INFO(absolute.output);
  REQUIRE(absolute.status == 1);
  CHECK(contains(absolute.output, "stopped after 3 points"));
  CHECK(count_done(io::partial_path(out.string())) == 6);

  // The same spelling with the table's content changed (a comment only): another computation, refused.
  std::ofstream(setup.dir / "nitride.csv", std::ios::app) << "# edited\n";
  const test::Execution edited = run_gratingsim("run ./w.yaml -o out.h5 --backend cpu-fftw --quiet --resume", "",
                                                in(setup.dir.path()));
  INFO(edited.output);
  CHECK(edited.status == 1);
  CHECK(contains(edited.output, "the content of a file the case reads"));
  std::ofstream(setup.dir / "nitride.csv", std::ios::trunc) << nitride_table;

  // From the parent directory, through ./ and the directory's name.
  const std::string name = setup.dir.path().filename().string();
  const test::Execution other = run_gratingsim(
      "run ./" + name + "/./w.yaml -o " + name + "/out.h5 --backend cpu-fftw --resume", "",
      in(setup.dir.path().parent_path()));
  INFO(other.output);
  REQUIRE(other.status == 0);
  CHECK(contains(other.output, "6 kept from the resumed partial file"));
  check_equals_reference(out, setup.reference);
}

TEST_CASE("SIGINT: the run says what it kept and how to resume, exits 130, and --resume completes",
          "[app][run][safety]") {
  const Setup setup("sigint");
  const fs::path out = setup.dir / "out.h5";
  const std::string partial = io::partial_path(out.string());
  test::Background run(setup.args(out), setup.dir / "run.log");
  REQUIRE(test::wait_until([&] { return fs::exists(partial); }));
  run.signal(SIGINT);
  const test::Execution r = run.wait();
  INFO(r.output);
  CHECK(r.status == 130);
  const std::regex said(R"(interrupted \(SIGINT\): (\d+) of 28 points finished and kept in )" +
                        std::regex_replace(partial, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                        R"(; run again with --resume)");
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, said));
  CHECK(!fs::exists(out));
  CHECK(!fs::exists(io::lock_path(out.string())));
  CHECK(count_done(partial) == std::stoul(m[1]));
  CHECK(std::stoul(m[1]) < growing_points);

  const test::Execution resumed = setup.run("-o " + quoted(out) + " --resume");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  check_equals_reference(out, setup.reference);
}
