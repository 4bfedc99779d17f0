// Result files: HDF5 round trip checked through the plain C API, atomic publication, and resuming an
// interrupted sweep (after a clean stop and after an abrupt process exit) to the same content as an
// uninterrupted write; the output lock, the checks before the final rename, damaged done flags.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "validation/io/result_fixtures.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/scratch_directory.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;
using test::random_point;

namespace {

std::vector<io::PointResult> random_points(const io::ResultLayout& l) {
  std::vector<io::PointResult> points;
  for (std::size_t i = 0; i < l.points(); ++i) points.push_back(random_point(l));
  return points;
}

void write_all(const std::string& path, const io::ResultLayout& l, const std::vector<io::PointResult>& points) {
  auto writer = io::ResultWriter::create(path, l, test::run_info());
  for (std::size_t i = 0; i < points.size(); ++i) writer.write(i, points[i]);
  writer.finish();
}

std::string string_attribute(hid_t object, const char* name) {
  const hid_t attribute = H5Aopen(object, name, H5P_DEFAULT);
  REQUIRE(attribute >= 0);
  const hid_t type = H5Aget_type(attribute);
  REQUIRE(H5Tget_class(type) == H5T_STRING);
  char* text = nullptr;
  REQUIRE(H5Aread(attribute, type, &text) >= 0);
  std::string value = text;
  H5free_memory(text);
  H5Tclose(type);
  H5Aclose(attribute);
  return value;
}

std::vector<double> read_doubles(hid_t file, const char* name, std::vector<hsize_t>& dims) {
  const hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
  REQUIRE(set >= 0);
  const hid_t space = H5Dget_space(set);
  dims.resize(std::size_t(H5Sget_simple_extent_ndims(space)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  std::vector<double> v(std::size_t(H5Sget_simple_extent_npoints(space)));
  REQUIRE(H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
  H5Sclose(space);
  H5Dclose(set);
  return v;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// The dataset's filters: (chunked, gzip).
std::pair<bool, bool> storage_of(hid_t file, const char* name) {
  const hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
  const hid_t create = H5Dget_create_plist(set);
  const bool chunked = H5Pget_layout(create) == H5D_CHUNKED;
  bool gzip = false;
  for (int i = 0; i < H5Pget_nfilters(create); ++i) {
    unsigned flags = 0;
    std::size_t n = 0;
    unsigned config = 0;
    if (H5Pget_filter2(create, unsigned(i), &flags, &n, nullptr, 0, nullptr, &config) == H5Z_FILTER_DEFLATE)
      gzip = true;
  }
  H5Pclose(create);
  H5Dclose(set);
  return {chunked, gzip};
}

}  // namespace

TEST_CASE("results round-trip: the C API reads back every value and attribute", "[io][results]") {
  const test::ScratchDirectory dir("roundtrip");
  const io::ResultLayout l = test::full_layout();
  const auto points = random_points(l);
  const std::string path = (dir / "out.h5").string();
  write_all(path, l, points);

  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  // Root attributes.
  CHECK(string_attribute(file, "schema") == "gratingsim.result");
  {
    const hid_t a = H5Aopen(file, "schema_version", H5P_DEFAULT);
    int version = 0;
    REQUIRE(H5Aread(a, H5T_NATIVE_INT, &version) >= 0);
    H5Aclose(a);
    CHECK(version == 1);  // a layout without parameter axes: version 1, as before they existed
  }
  CHECK_FALSE(string_attribute(file, "gratingsim_version").empty());
  CHECK(string_attribute(file, "time_dependence") == "exp(-i*omega*t)");
  CHECK(string_attribute(file, "length_unit") == "nm");
  CHECK(string_attribute(file, "angle_unit") == "deg");
  CHECK(string_attribute(file, "input_units") == "nm");
  CHECK(string_attribute(file, "backend") == "cpu-fftw");
  CHECK(string_attribute(file, "precision") == "double");
  CHECK(string_attribute(file, "device") == "CPU (test)");
  CHECK(string_attribute(file, "polarization") == "both");
  for (const char* convention :
       {"jones_basis", "phase_reference", "ellipsometry", "mueller", "complex_layout", "efficiency"})
    CHECK(string_attribute(file, convention).size() > 20);
  // The input case, verbatim.
  {
    const hid_t set = H5Dopen2(file, "input/case", H5P_DEFAULT);
    const hid_t type = H5Dget_type(set);
    char* text = nullptr;
    REQUIRE(H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text) >= 0);
    CHECK(std::string(text) == test::run_info().case_yaml);
    H5free_memory(text);
    CHECK(string_attribute(set, "path") == "cases/example.yaml");
    H5Tclose(type);
    H5Dclose(set);
  }
  // Sweep axes and orders.
  std::vector<hsize_t> dims;
  CHECK(read_doubles(file, "sweep/wavelength", dims) == l.wavelength_nm);
  CHECK(read_doubles(file, "sweep/theta", dims) == l.theta_deg);
  CHECK(read_doubles(file, "sweep/phi", dims) == l.phi_deg);
  {
    const hid_t set = H5Dopen2(file, "orders", H5P_DEFAULT);
    std::vector<int> orders(l.orders.size() * 2);
    REQUIRE(H5Dread(set, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, orders.data()) >= 0);
    H5Dclose(set);
    for (std::size_t o = 0; o < l.orders.size(); ++o) {
      CHECK(orders[2 * o] == l.orders[o][0]);
      CHECK(orders[2 * o + 1] == l.orders[o][1]);
    }
  }
  // Per-point data, indexed [wavelength][theta][phi][...] by hand.
  const std::size_t nw = 3, nt = 2, np = 2, p = 2, no = 5;
  const auto R = read_doubles(file, "results/R", dims);
  CHECK(dims == std::vector<hsize_t>{nw, nt, np, p, no});
  const auto jones = read_doubles(file, "results/jones_t", dims);
  CHECK(dims == std::vector<hsize_t>{nw, nt, np, no, 2, p, 2});
  const auto mueller = read_doubles(file, "results/mueller", dims);
  CHECK(dims == std::vector<hsize_t>{nw, nt, np, 4, 4});
  const auto directions = read_doubles(file, "results/reflected_direction", dims);
  const auto harmonics = read_doubles(file, "fields/harmonics", dims);
  CHECK(dims == std::vector<hsize_t>{nw, nt, np, p, 3, 3, 15, 2});
  const auto abs_e = read_doubles(file, "fields/map_1/abs_E", dims);
  CHECK(dims == std::vector<hsize_t>{nw, nt, np, p, 2, 5});
  const auto done = read_doubles(file, "done", dims);
  CHECK(dims == std::vector<hsize_t>{nw, nt, np});
  const auto used_harmonics = read_doubles(file, "accuracy/harmonics", dims);
  CHECK(dims == std::vector<hsize_t>{nw, nt, np, 2});
  const auto estimated_error = read_doubles(file, "accuracy/estimated_error", dims);
  CHECK(dims == std::vector<hsize_t>{nw, nt, np});
  const auto reached = read_doubles(file, "accuracy/reached", dims);
  {
    const hid_t group = H5Gopen2(file, "accuracy", H5P_DEFAULT);
    REQUIRE(group >= 0);
    CHECK(string_attribute(group, "raised") == "harmonics, slices");
    const hid_t a = H5Aopen(group, "target_error", H5P_DEFAULT);
    double target = 0;
    REQUIRE(H5Aread(a, H5T_NATIVE_DOUBLE, &target) >= 0);
    H5Aclose(a);
    H5Gclose(group);
    CHECK(target == l.accuracy->target_error);
  }
  bool all_equal = true;
  for (std::size_t iw = 0; iw < nw; ++iw)
    for (std::size_t it = 0; it < nt; ++it)
      for (std::size_t ip = 0; ip < np; ++ip) {
        const std::size_t point = (iw * nt + it) * np + ip;
        const io::PointResult& r = points[point];
        for (std::size_t k = 0; k < p * no; ++k) all_equal &= same_bits(R[point * p * no + k], r.reflectance[k]);
        for (std::size_t k = 0; k < no * 2 * p; ++k) {
          all_equal &= same_bits(jones[(point * no * 2 * p + k) * 2], r.jones_t[k].real());
          all_equal &= same_bits(jones[(point * no * 2 * p + k) * 2 + 1], r.jones_t[k].imag());
        }
        for (std::size_t k = 0; k < 16; ++k) all_equal &= same_bits(mueller[point * 16 + k], r.mueller[k]);
        for (std::size_t k = 0; k < no * 3; ++k)
          all_equal &= same_bits(directions[point * no * 3 + k], r.reflected_direction[k]);
        const std::size_t nh = p * 3 * 3 * 15;
        for (std::size_t k = 0; k < nh; ++k)
          all_equal &= same_bits(harmonics[(point * nh + k) * 2], r.field_harmonics[k].real());
        // |E| of map 1 (2 × 5 points) from its components.
        for (std::size_t i = 0; i < p; ++i)
          for (std::size_t c = 0; c < 10; ++c) {
            double sum = 0;
            for (std::size_t comp = 0; comp < 3; ++comp) sum += std::norm(r.field_maps[1][(i * 3 + comp) * 10 + c]);
            all_equal &= std::abs(abs_e[point * p * 10 + i * 10 + c] - std::sqrt(sum)) <= 1e-15 * std::sqrt(sum);
          }
        all_equal &= done[point] == 1;
        all_equal &= used_harmonics[2 * point] == r.used_harmonics[0] && used_harmonics[2 * point + 1] == r.used_harmonics[1];
        all_equal &= same_bits(estimated_error[point], r.estimated_error) && reached[point] == r.target_reached;
      }
  CHECK(all_equal);
  // Storage: contiguous results, chunked + gzip fields.
  CHECK(storage_of(file, "results/R") == std::pair<bool, bool>{false, false});
  CHECK(storage_of(file, "fields/harmonics") == std::pair<bool, bool>{true, true});
  CHECK(storage_of(file, "fields/map_0/E") == std::pair<bool, bool>{true, true});
  H5Fclose(file);

  // io's own reader gives back the same layout, run info and points.
  const io::ResultReader reader(path);
  CHECK(reader.layout() == l);
  CHECK(reader.info() == test::run_info());
  for (std::size_t i = 0; i < l.points(); ++i) {
    CHECK(reader.done(i));
    CHECK(reader.read(i) == points[i]);
  }
}

TEST_CASE("results with one polarisation and no fields omit psi, delta, Mueller and fields", "[io][results]") {
  const test::ScratchDirectory dir("single");
  io::ResultLayout l = test::full_layout();
  l.polarization = io::Polarization::s;
  l.fields = false;
  l.maps.clear();
  l.slice_center_nm.clear();
  l.harmonics_x = l.harmonics_y = 0;
  const auto points = random_points(l);
  const std::string path = (dir / "s.h5").string();
  write_all(path, l, points);
  const auto dump = test::dump_file(path);
  CHECK(dump.count("results/R") == 1);
  CHECK(dump.count("results/psi_deg") == 0);
  CHECK(dump.count("results/mueller") == 0);
  CHECK(dump.count("fields/harmonics") == 0);
  const io::ResultReader reader(path);
  CHECK(reader.layout() == l);
  for (std::size_t i = 0; i < l.points(); ++i) {
    io::PointResult expected = points[i];
    expected.psi_deg = expected.delta_deg = io::PointResult::nan;  // not stored for one polarisation
    expected.mueller.fill(io::PointResult::nan);
    CHECK(reader.read(i) == expected);
  }
}

TEST_CASE("the output appears only complete: OUT.h5.partial until finish, then renamed", "[io][results]") {
  const test::ScratchDirectory dir("atomic");
  const io::ResultLayout l = test::full_layout();
  const auto points = random_points(l);
  const std::string path = (dir / "out.h5").string();
  {
    auto writer = io::ResultWriter::create(path, l, test::run_info());
    CHECK(fs::exists(io::partial_path(path)));
    CHECK_FALSE(fs::exists(path));
    for (std::size_t i = 0; i + 1 < points.size(); ++i) writer.write(i, points[i]);
    CHECK_FALSE(fs::exists(path));
    CHECK_THROWS_AS(writer.finish(), InvalidArgument);  // one point missing
    CHECK_FALSE(fs::exists(path));
    // A point of the wrong shape is refused and stays undone.
    io::PointResult wrong = points.back();
    wrong.reflectance.pop_back();
    CHECK_THROWS_AS(writer.write(points.size() - 1, wrong), InvalidArgument);
    CHECK_FALSE(writer.done(points.size() - 1));
    // A finished point is never rewritten.
    CHECK_THROWS_AS(writer.write(0, points[0]), InvalidArgument);
    writer.write(points.size() - 1, points.back());
    writer.finish();
  }
  CHECK(fs::exists(path));
  CHECK_FALSE(fs::exists(io::partial_path(path)));
}

TEST_CASE("resume after an interruption gives the same file as an uninterrupted run", "[io][results]") {
  const test::ScratchDirectory dir("resume");
  const io::ResultLayout l = test::full_layout();
  const auto points = random_points(l);
  const std::string reference = (dir / "reference.h5").string();
  write_all(reference, l, points);
  const auto expected = test::dump_file(reference);

  // Points finished before the interruption, in the order a run might finish them.
  const std::vector<std::size_t> finished = {0, 1, 2, 5, 6, 9};
  const auto check_resume = [&](const std::string& path) {
    // Interrupted: only the partial file exists, and it holds exactly the finished points.
    CHECK_FALSE(fs::exists(path));
    REQUIRE(fs::exists(io::partial_path(path)));
    std::vector<io::PointResult> before;
    {
      const io::ResultReader partial(io::partial_path(path));
      for (std::size_t i = 0; i < l.points(); ++i) {
        const bool should = std::find(finished.begin(), finished.end(), i) != finished.end();
        CHECK(partial.done(i) == should);
        if (should) CHECK(partial.read(i) == points[i]);
      }
    }
    auto writer = io::ResultWriter::resume(path, l, test::run_info());
    CHECK(writer.points_done() == finished.size());
    std::size_t computed = 0;
    for (std::size_t i = 0; i < l.points(); ++i)
      if (!writer.done(i)) {
        writer.write(i, points[i]);
        ++computed;
      }
    CHECK(computed == l.points() - finished.size());
    writer.finish();
    CHECK_FALSE(fs::exists(io::partial_path(path)));
    const auto resumed = test::dump_file(path);
    CHECK(resumed.size() == expected.size());
    for (const auto& [name, bytes] : expected) {
      INFO(name);
      REQUIRE(resumed.count(name) == 1);
      CHECK(resumed.at(name) == bytes);
    }
  };

  SECTION("stopped cleanly (the writer closed without finish)") {
    const std::string path = (dir / "clean.h5").string();
    {
      auto writer = io::ResultWriter::create(path, l, test::run_info());
      for (const auto i : finished) writer.write(i, points[i]);
    }
    check_resume(path);
  }
  SECTION("killed: the process exits abruptly without closing the file") {
    const std::string path = (dir / "killed.h5").string();
    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      int status = 0;
      try {
        auto writer = io::ResultWriter::create(path, l, test::run_info());
        for (const auto i : finished) writer.write(i, points[i]);
        ::_exit(0);  // no destructors, no HDF5 close: what a kill leaves behind
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    check_resume(path);
  }
}

TEST_CASE("resume refuses a partial file from a different run", "[io][results]") {
  const test::ScratchDirectory dir("mismatch");
  const io::ResultLayout l = test::full_layout();
  const std::string path = (dir / "out.h5").string();
  CHECK_THROWS_AS(io::ResultWriter::resume(path, l, test::run_info()), io::OutputError);  // nothing to resume
  {
    auto writer = io::ResultWriter::create(path, l, test::run_info());
    writer.write(3, random_point(l));
  }
  const auto refused = [&](const io::ResultLayout& layout, const io::RunInfo& info, const std::string& what) {
    try {
      (void)io::ResultWriter::resume(path, layout, info);
      FAIL("resumed a different run");
    } catch (const io::OutputError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  io::RunInfo other_backend = test::run_info();
  other_backend.backend = "gpu-fused";
  refused(l, other_backend, "the backend");
  io::RunInfo other_formulation = test::run_info();
  other_formulation.formulation = "laurent";
  refused(l, other_formulation, "the formulation");
  io::RunInfo other_case = test::run_info();
  other_case.case_yaml += "# edited\n";
  refused(l, other_case, "the input case text");
  io::ResultLayout other_axis = l;
  other_axis.theta_deg[1] = 40;
  refused(other_axis, test::run_info(), "the theta axis");
  // The partial file is untouched by refused attempts.
  auto writer = io::ResultWriter::resume(path, l, test::run_info());
  CHECK(writer.points_done() == 1);
  CHECK(writer.done(3));
}

TEST_CASE("a file that is not a result file is reported", "[io][results]") {
  const test::ScratchDirectory dir("foreign");
  const std::string path = (dir / "foreign.h5").string();
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(file >= 0);
  H5Fclose(file);
  CHECK_THROWS_AS(io::ResultReader(path), io::OutputError);
  CHECK_THROWS_AS(io::ResultReader((dir / "absent.h5").string()), io::OutputError);
}

TEST_CASE("another device may resume, the file records both", "[io][results]") {
  const test::ScratchDirectory dir("other_device");
  const io::ResultLayout l = test::full_layout();
  const std::string path = (dir / "out.h5").string();
  const io::PointResult first = random_point(l);
  {
    auto writer = io::ResultWriter::create(path, l, test::run_info());
    writer.write(0, first);
  }
  io::RunInfo elsewhere = test::run_info();
  elsewhere.device = "2 × GPU (test)";
  for (int attempt = 0; attempt < 2; ++attempt) {  // a second resume on the same device adds nothing
    auto writer = io::ResultWriter::resume(path, l, elsewhere);
    CHECK(writer.points_done() == 1);
  }
  auto writer = io::ResultWriter::resume(path, l, elsewhere);
  for (std::size_t p = 1; p < l.points(); ++p) writer.write(p, random_point(l));
  writer.finish();
  const io::ResultReader reader(path);
  CHECK(reader.info().device == "CPU (test); resumed on 2 × GPU (test)");
  CHECK(reader.read(0) == first);
}

TEST_CASE("OutputLock: one holder at a time, named in the refusal, released and removed with it", "[io][results]") {
  const test::ScratchDirectory dir("lock");
  const std::string path = (dir / "out.h5").string();
  const std::string pid = "pid " + std::to_string(::getpid());
  {
    const io::OutputLock held(path);
    CHECK(fs::is_regular_file(io::lock_path(path)));
    // flock(2) locks belong to an open file: a second lock, even from this process, is refused.
    CHECK_THROWS_WITH(io::OutputLock(path), Catch::Contains("being written by another gratingsim run (" + pid));
  }
  CHECK_FALSE(fs::exists(io::lock_path(path)));
  { std::ofstream(io::lock_path(path)) << "pid 1 on a host that died"; }  // stale: no lock held on it
  CHECK_NOTHROW(io::OutputLock(path));
  fs::create_directory(io::lock_path(path));
  CHECK_THROWS_AS(io::OutputLock(path), io::OutputError);
  CHECK(fs::is_directory(io::lock_path(path)));
}

TEST_CASE("finish never renames onto a non-regular file, nor a file not to be replaced, the partial stays complete",
          "[io][results]") {
  const test::ScratchDirectory dir("finish_checks");
  const io::ResultLayout l = test::full_layout();
  const auto points = random_points(l);
  const std::string path = (dir / "out.h5").string();
  auto writer = io::ResultWriter::create(path, l, test::run_info());
  for (std::size_t i = 0; i < points.size(); ++i) writer.write(i, points[i]);
  fs::create_directory(path);  // appeared during the run
  CHECK_THROWS_WITH(writer.finish(true), Catch::Contains("is not a regular file"));
  CHECK(fs::is_directory(path));
  fs::remove(path);
  { std::ofstream(path) << "another result"; }
  CHECK_THROWS_WITH(writer.finish(false), Catch::Contains("not replaced without --overwrite"));
  std::string text;
  std::getline(std::ifstream(path), text);
  CHECK(text == "another result");
  {
    const io::ResultReader partial(io::partial_path(path));  // complete, closed and synced
    for (std::size_t i = 0; i < points.size(); ++i) CHECK(partial.read(i) == points[i]);
  }
  writer.finish(true);
  CHECK_FALSE(fs::exists(io::partial_path(path)));
  const io::ResultReader reader(path);
  for (std::size_t i = 0; i < points.size(); ++i) CHECK(reader.read(i) == points[i]);
}

TEST_CASE("a done flag that is neither 0 nor 1 is refused by the reader and by resume", "[io][results]") {
  const test::ScratchDirectory dir("done_flag");
  const io::ResultLayout l = test::full_layout();
  const std::string path = (dir / "out.h5").string(), partial = io::partial_path(path);
  {
    auto writer = io::ResultWriter::create(path, l, test::run_info());
    writer.write(0, random_point(l));
  }
  {
    const hid_t file = H5Fopen(partial.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t set = H5Dopen2(file, "done", H5P_DEFAULT);
    std::vector<std::uint8_t> done(l.points(), 0);
    done[0] = 1;
    done[1] = 2;
    REQUIRE(H5Dwrite(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, done.data()) >= 0);
    H5Dclose(set);
    H5Fclose(file);
  }
  CHECK_THROWS_WITH(io::ResultReader(partial), Catch::Contains("the done flag of point 1 is 2"));
  CHECK_THROWS_WITH(io::ResultWriter::resume(path, l, test::run_info()), Catch::Contains("is damaged"));
}

TEST_CASE("phase times: stored per point, the writing phase recorded per batch, absent in older files",
          "[io][results]") {
  const test::ScratchDirectory dir("phases");
  const io::ResultLayout l = test::full_layout();
  auto points = random_points(l);
  constexpr std::size_t writing = std::size_t(physics::Phase::writing);
  for (auto& p : points) p.phase_seconds[writing] = io::PointResult::nan;  // as run writes them
  const std::string path = (dir / "p.h5").string();
  {
    io::ResultWriter w = io::ResultWriter::create(path, l, test::run_info());
    const std::vector<std::size_t> batch = {0, 1, 2, 3};
    for (const std::size_t p : batch) w.write(p, points[p]);
    CHECK_THROWS_AS(w.record_writing(std::vector<std::size_t>{4}, 1.0), InvalidArgument);  // not written yet
    const double seconds = test::uniform(0.01, 1);
    w.record_writing(batch, seconds);
    for (const std::size_t p : batch) points[p].phase_seconds[writing] = seconds;
  }
  {
    const io::ResultReader r(io::partial_path(path));
    for (std::size_t p = 0; p < 4; ++p) CHECK(r.read(p) == points[p]);  // every phase as given, writing recorded
    for (const double s : r.read(4).phase_seconds) CHECK(std::isnan(s));  // unwritten: the NaN fill
  }
  // A partial file from before the dataset: read with NaN phases, resumed and finished without it.
  {
    const hid_t file = H5Fopen(io::partial_path(path).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(file >= 0);
    REQUIRE(H5Ldelete(file, "solver/phase_seconds", H5P_DEFAULT) >= 0);
    H5Fclose(file);
  }
  {
    io::ResultWriter w = io::ResultWriter::resume(path, l, test::run_info());
    std::vector<std::size_t> rest;
    for (std::size_t p = 4; p < l.points(); ++p) {
      w.write(p, points[p]);
      rest.push_back(p);
    }
    w.record_writing(rest, 0.5);
    w.finish();
  }
  const io::ResultReader r(path);
  for (std::size_t p = 0; p < l.points(); ++p) {
    INFO("point " << p);
    io::PointResult read = r.read(p);
    for (const double s : read.phase_seconds) CHECK(std::isnan(s));
    read.phase_seconds = points[p].phase_seconds;
    CHECK(read == points[p]);
  }
}

TEST_CASE("solver method: stored per point with its attribute naming the values, absent in older files read as 0",
          "[io][results]") {
  const test::ScratchDirectory dir("methods");
  const io::ResultLayout l = test::full_layout();
  const auto points = random_points(l);
  const std::string path = (dir / "m.h5").string();
  {
    io::ResultWriter w = io::ResultWriter::create(path, l, test::run_info());
    for (std::size_t p = 0; p < 3; ++p) w.write(p, points[p]);
  }
  const std::string partial = io::partial_path(path);
  {
    const io::ResultReader r(partial);
    for (std::size_t p = 0; p < 3; ++p) CHECK(r.read(p).method == points[p].method);
    const hid_t file = H5Fopen(partial.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    REQUIRE(file >= 0);
    const hid_t set = H5Dopen2(file, "solver/method", H5P_DEFAULT);
    REQUIRE(set >= 0);
    CHECK(string_attribute(set, "methods") == "0 not recorded,1 gmres,2 bicgstab,3 direct");
    H5Dclose(set);
    H5Fclose(file);
  }
  // A partial file from before the dataset: read with method 0, resumed and finished without it.
  {
    const hid_t file = H5Fopen(partial.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(file >= 0);
    REQUIRE(H5Ldelete(file, "solver/method", H5P_DEFAULT) >= 0);
    H5Fclose(file);
  }
  {
    io::ResultWriter w = io::ResultWriter::resume(path, l, test::run_info());
    for (std::size_t p = 3; p < l.points(); ++p) w.write(p, points[p]);
    w.finish();
  }
  const io::ResultReader r(path);
  for (std::size_t p = 0; p < l.points(); ++p) {
    INFO("point " << p);
    io::PointResult read = r.read(p);
    CHECK(read.method == 0);
    read.method = points[p].method;
    CHECK(read == points[p]);
  }
}

TEST_CASE("parameter axes: schema version 2, the axes first in every point dataset, read back and resumed", "[io][results]") {
  const test::ScratchDirectory dir("parameters");
  io::ResultLayout l = test::full_layout();
  l.fields = false;
  l.maps.clear();
  l.slice_center_nm.clear();
  l.harmonics_x = l.harmonics_y = 0;
  l.parameters = {{"cd", {80, 90.5}}, {"height", {100, 120, 140}}};
  REQUIRE(l.points() == 2 * 3 * 3 * 2 * 2);
  const auto points = random_points(l);
  const std::string path = (dir / "lib.h5").string();
  write_all(path, l, points);

  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  {
    const hid_t a = H5Aopen(file, "schema_version", H5P_DEFAULT);
    int version = 0;
    REQUIRE(H5Aread(a, H5T_NATIVE_INT, &version) >= 0);
    H5Aclose(a);
    CHECK(version == 2);
  }
  CHECK(string_attribute(file, "point_order") ==
        "result datasets start with the sweep dimensions [cd, height, wavelength, theta, phi]");
  std::vector<hsize_t> dims;
  CHECK(read_doubles(file, "sweep/cd", dims) == std::vector<double>{80, 90.5});
  CHECK(read_doubles(file, "sweep/height", dims) == std::vector<double>{100, 120, 140});
  // R[cd, height, λ, θ, φ, polarisation, order]: point (1, 2, 1, 0, 1) at its place, through the C API.
  const std::vector<double> r = read_doubles(file, "results/R", dims);
  CHECK(dims == std::vector<hsize_t>{2, 3, 3, 2, 2, 2, 5});
  const std::size_t point = l.point_index(1, 0, 1, 1 * 3 + 2);
  CHECK(l.sweep_indices(point) == std::vector<std::size_t>{1, 2, 1, 0, 1});
  CHECK(l.parameter_point_of(point) == 5);
  CHECK(l.wavelength_index_of(point) == 1);
  for (std::size_t k = 0; k < 10; ++k) CHECK(same_bits(r[point * 10 + k], points[point].reflectance[k]));
  H5Fclose(file);

  const io::ResultReader reader(path);
  CHECK(reader.layout() == l);
  for (std::size_t i = 0; i < l.points(); ++i) CHECK(reader.read(i) == points[i]);

  // A partial file of a parameter sweep resumes, and refuses other parameter axes.
  const std::string partial = (dir / "partial.h5").string();
  {
    auto writer = io::ResultWriter::create(partial, l, test::run_info());
    for (std::size_t i = 0; i < l.points(); i += 3) writer.write(i, points[i]);
  }
  io::ResultLayout other = l;
  other.parameters[1].values[2] = 150;
  CHECK_THROWS_WITH(io::ResultWriter::resume(partial, other, test::run_info()),
                    Catch::Contains("the parameter axes"));
  auto writer = io::ResultWriter::resume(partial, l, test::run_info());
  CHECK(writer.points_done() == (l.points() + 2) / 3);
  for (std::size_t i = 0; i < l.points(); ++i)
    if (!writer.done(i)) writer.write(i, points[i]);
  writer.finish();
  const auto expected = test::dump_file(path), resumed = test::dump_file(partial);
  CHECK(resumed.size() == expected.size());
  for (const auto& [name, bytes] : expected) {
    INFO(name);
    REQUIRE(resumed.count(name) == 1);
    CHECK(resumed.at(name) == bytes);
  }
}
