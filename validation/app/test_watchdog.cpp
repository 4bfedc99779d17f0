// validation/app/watchdog.sh, under which the app tests launch gratingsim: a command that ends in
// time keeps its output and status; one that hangs is ended, with status 124 and where its processes
// waited, in about its limit rather than its own time.
#include <chrono>
#include <cstdio>
#include <string>

#include "validation/app/executable.hpp"

using gratingsim::test::contains;
using gratingsim::test::quoted;
using gratingsim::test::repository_root;

namespace {

struct Watched {
  int status = -1;
  std::string output;
  double seconds = 0;
};

Watched watch(const std::string& limit, const std::string& line) {
  const auto start = std::chrono::steady_clock::now();
  const std::string command =
      quoted(repository_root() / "validation/app/watchdog.sh") + " " + limit + " " + gratingsim::test::shell_word(line) + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  Watched w;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) w.output.append(buffer, n);
  const int status = pclose(pipe);
  w.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return w;
}

}  // namespace

TEST_CASE("watchdog.sh: a command that ends in time keeps its output and exit status, and is not waited for",
          "[app][support]") {
  const Watched w = watch("60", "cd / && echo written; echo to-stderr >&2; exit 3");
  INFO(w.output);
  CHECK(w.status == 3);
  CHECK(contains(w.output, "written"));
  CHECK(contains(w.output, "to-stderr"));
  CHECK(!contains(w.output, "watchdog"));
  CHECK(w.seconds < 30);  // not the limit's 60 s: nothing it left behind holds the pipe
}

TEST_CASE("watchdog.sh: a command that hangs is ended with status 124 and its processes are named",
          "[app][support]") {
  const Watched w = watch("2", "sleep 300; echo \"end\"ed");
  INFO(w.output);
  CHECK(w.status == 124);
  CHECK(contains(w.output, "still running after 2 s"));
  CHECK(contains(w.output, "sleep 300"));  // the grandchild is among the processes listed
  CHECK(!contains(w.output, "ended"));  // (the command line shows "end"ed)
  CHECK(w.seconds < 60);  // its limit and the grace for ending, not the command's 300 s
}
