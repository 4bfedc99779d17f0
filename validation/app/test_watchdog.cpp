// validation/app/watchdog.sh, under which the app tests launch gratingsim: a command that ends in
// time keeps its output and status; one that hangs is ended, with status 124 and where its processes
// waited, in about its limit rather than its own time.
#include <chrono>
#include <string>

#include "validation/app/executable.hpp"

using gratingsim::test::contains;

namespace {

struct Watched {
  gratingsim::test::Execution run;
  double seconds = 0;
};

Watched watch(int limit_seconds, const std::string& line) {
  const auto start = std::chrono::steady_clock::now();
  Watched w{gratingsim::test::run_watched(limit_seconds, line)};
  w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return w;
}

}  // namespace

TEST_CASE("watchdog.sh: a command that ends in time keeps its output and exit status, and is not waited for",
          "[app][support]") {
  const Watched w = watch(60, "cd / && echo written; echo to-stderr >&2; exit 3");
  INFO(w.run.output);
  CHECK(w.run.status == 3);
  CHECK(contains(w.run.output, "written"));
  CHECK(contains(w.run.output, "to-stderr"));
  CHECK(!contains(w.run.output, "watchdog"));
  CHECK(w.seconds < 30);  // not the limit's 60 s: nothing it left behind holds the pipe
}

TEST_CASE("watchdog.sh: a command that hangs is ended with status 124 and its processes are named",
          "[app][support]") {
  const Watched w = watch(2, "sleep 300; echo \"end\"ed");
  INFO(w.run.output);
  CHECK(w.run.status == 124);
  CHECK(contains(w.run.output, "still running after 2 s"));
  CHECK(contains(w.run.output, "sleep 300"));  // the grandchild is among the processes listed
  CHECK(!contains(w.run.output, "ended"));  // (the command line shows "end"ed)
  CHECK(w.seconds < 60);  // its limit and the grace for ending, not the command's 300 s
}
