#pragma once
// The stop-and-resume check of `gratingsim run`, shared by the tests of plain and parameter sweeps.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "validation/app/executable.hpp"
#include "validation/support/catch.hpp"

namespace gratingsim::test {

/// Runs `gratingsim run CONFIG OPTIONS` three times in `dir`: uninterrupted into whole.h5, then into
/// resumed.h5 stopped after `stop_after` of the sweep's `points` points (--stop-after) and resumed
/// (--resume). Checks what every interrupted run must do: the stop exits with 1 saying so and leaves
/// only the partial file, holding exactly the first stop_after points; the resume exits with 0,
/// solves the rest, keeps those, and publishes resumed.h5 (no partial file left) with the
/// uninterrupted file's layout and run information; the kept points are bit for bit those the stop
/// wrote (times included: not recomputed). Then `same(resumed point, uninterrupted point)` checks
/// every point as the caller's sweep needs.
template <class Same>
void check_stop_and_resume(const std::filesystem::path& dir, const std::filesystem::path& config,
                           const std::string& options, std::size_t points, std::size_t stop_after, Same same) {
  namespace fs = std::filesystem;
  const fs::path whole = dir / "whole.h5", resumed = dir / "resumed.h5";
  const std::string partial = io::partial_path(resumed.string());
  const auto run = [&](const fs::path& out, const std::string& more) {
    return run_gratingsim("run " + quoted(config) + " -o " + quoted(out) + " " + options + more);
  };

  const Execution uninterrupted = run(whole, "");
  INFO(uninterrupted.output);
  REQUIRE(uninterrupted.status == 0);

  const Execution stopped = run(resumed, " --stop-after " + std::to_string(stop_after));
  INFO(stopped.output);
  REQUIRE(stopped.status == 1);
  CHECK(contains(stopped.output, "stopped after " + std::to_string(stop_after) + " points"));
  CHECK(!fs::exists(resumed));
  REQUIRE(fs::exists(partial));
  std::vector<io::PointResult> finished;
  {
    const io::ResultReader reader(partial);
    REQUIRE(reader.layout().points() == points);
    for (std::size_t p = 0; p < points; ++p) CHECK(reader.done(p) == (p < stop_after));
    for (std::size_t p = 0; p < stop_after; ++p) finished.push_back(reader.read(p));
  }

  const Execution resume = run(resumed, " --resume");
  INFO(resume.output);
  REQUIRE(resume.status == 0);
  CHECK(contains(resume.output, std::to_string(points - stop_after) + " point(s) solved"));
  CHECK(contains(resume.output, std::to_string(stop_after) + " kept from the resumed partial file"));
  CHECK(fs::exists(resumed));
  CHECK(!fs::exists(partial));

  const io::ResultReader a(whole.string()), b(resumed.string());
  CHECK(a.layout() == b.layout());
  CHECK(a.info() == b.info());
  for (std::size_t p = 0; p < points; ++p) {
    INFO("point " << p);
    const io::PointResult from_resumed = b.read(p);
    if (p < stop_after) CHECK(from_resumed == finished[p]);  // bitwise, timing included: not recomputed
    same(from_resumed, a.read(p));
  }
}

}  // namespace gratingsim::test
