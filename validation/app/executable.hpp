#pragma once
// Running the built `gratingsim` as a user does, for the application's end-to-end tests.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "validation/support/catch.hpp"
#include "validation/support/scratch_directory.hpp"  // ScratchDirectory, for the app tests
#include "validation/support/text_file.hpp"          // read_text

namespace gratingsim::test {

struct Execution {
  int status = -1;     ///< exit status; 128 + n if signal n ended it; 124 if it hung and was ended
  std::string output;  ///< stdout and stderr together
};

/// The exit status of a waitpid/pclose status word as a shell reports it: the code, or 128 + n for signal n.
inline int shell_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

/// The repository's root (this file is validation/app/executable.hpp).
inline std::filesystem::path repository_root() {
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}

/// A launch still running after this long hangs (the longest takes seconds, under the sanitizers too).
inline constexpr int launch_limit_seconds = 300;

/// FFTW plans by estimate and keeps no wisdom; `auto` keeps its measurements in `backend_cache` (default: a
/// file under the temporary directory), so a test leaves nothing in the user's cache.
inline void prepare_environment(const std::string& backend_cache) {
  setenv("GRATINGSIM_FFTW_PLANNING", "estimate", 1);
  setenv("GRATINGSIM_FFTW_WISDOM", "", 1);
  const std::string cache = backend_cache.empty() ? (std::filesystem::temp_directory_path() /
                                                     ("gratingsim_app_backends_" + std::to_string(::getpid()) + ".txt"))
                                                        .string()
                                                  : backend_cache;
  setenv("GRATINGSIM_BACKEND_CACHE", cache.c_str(), 1);
}

/// 'PATH' for the shell (paths here have no quote of their own).
inline std::string quoted(const std::filesystem::path& p) {
  std::string text(1, '\'');  // built by appending: GCC 12 warns falsely (-Wrestrict) on "'" + string
  text += p.string();
  text += '\'';
  return text;
}

/// `text` as one word for the shell, whatever quotes it holds: 'text', each ' in it written '\''.
inline std::string shell_word(const std::string& text) {
  std::string word(1, '\'');
  for (const char c : text) word += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return word + '\'';
}

/// Runs the shell command `line` under validation/app/watchdog.sh: still running after `limit_seconds`, it
/// is ended with status 124, its output saying where each of its processes waited.
inline Execution run_watched(int limit_seconds, const std::string& line) {
  const std::string command = quoted(repository_root() / "validation/app/watchdog.sh") + " " +
                              std::to_string(limit_seconds) + " " + shell_word(line) + " 2>&1";
  Execution r;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.output.append(buffer, n);
  r.status = shell_status(pclose(pipe));
  return r;
}

/// Runs `[launcher] gratingsim <arguments>` (arguments quoted by the caller; `launcher` e.g. "mpirun -n 2")
/// under the watchdog with launch_limit_seconds, in prepare_environment's environment.
inline Execution run_gratingsim(const std::string& arguments, const std::string& backend_cache = "",
                                const std::string& launcher = "") {
  prepare_environment(backend_cache);
  return run_watched(launch_limit_seconds,
                     launcher + (launcher.empty() ? "'" : " '") + GRATINGSIM_EXECUTABLE + "' " + arguments);
}

/// The run tests' small sweep: a 1D grating at three wavelengths and two angles, 6 points, 2 per
/// wavelength's batch (a distributed run with 2 ranks splits each wavelength: fewer than 4 per rank).
inline constexpr const char* sweep_case = R"(# a 1D grating swept over three wavelengths and two angles (6 points, 2 per batch)
wavelength: [500, 650, 750]
incidence: {theta_deg: [0, 30]}
lattice: {period_x: 600}
substrate: SiO2
layers:
  - {name: lines, thickness: 150, slices: 3, shapes: [{type: line, material: Si3N4, width: 250}]}
numerics: {harmonics: 4}
)";

/// sweep_case's grating with its lines' width and height as parameters (io/SCHEMA.md §1.11), their top
/// width computed from them: 2 × 2 parameter points × 3 wavelengths × 2 angles, 24 points, 2 per batch.
inline constexpr const char* parameter_case = R"case(# sweep_case's lines, their width and height swept (4 parameter points, 24 points)
parameters: {width: [200, 250], height: [150, 120], top: "${width} - 2*${height}/tand(80)"}
wavelength: [500, 650, 750]
incidence: {theta_deg: [0, 30]}
lattice: {period_x: 600}
substrate: SiO2
layers:
  - {name: lines, thickness: "${height}", slices: 3,
     shapes: [{type: trapezoid, material: Si3N4, bottom_width: "${width}", top_width: "${top}"}]}
numerics: {harmonics: 4}
)case";

/// The same sweep with harmonics: auto (io/SCHEMA.md §1.7.1): the two angles of a wavelength stop
/// at different rungs (at 500 nm M = 6 at 0°, 9 at 30°), so a batch holds points of several M.
/// sweep_case with its numerics line replaced, at compile time.
inline constexpr auto auto_sweep_text = [] {
  constexpr std::string_view text = sweep_case, fixed = "numerics: {harmonics: 4}\n",
                             automatic = "numerics: {harmonics: auto, target_error: 2e-3}\n";
  static_assert(text.find(fixed) != std::string_view::npos, "sweep_case's numerics line changed");
  constexpr std::size_t at = text.find(fixed);
  std::array<char, text.size() - fixed.size() + automatic.size() + 1> out{};  // + 1: the terminating 0
  const auto tail = std::copy(automatic.begin(), automatic.end(), std::copy_n(text.begin(), at, out.begin()));
  std::copy(text.begin() + at + fixed.size(), text.end(), tail);
  return out;
}();
inline constexpr const char* auto_sweep_case = auto_sweep_text.data();

/// `[launcher] gratingsim <arguments>` running in the background, its stdout and stderr going to
/// `log`, for tests that signal it or run another beside it. pid() is that of gratingsim, or of the
/// launcher (e.g. mpirun), itself: the shell execs it.
class Background {
 public:
  Background(const std::string& arguments, std::filesystem::path log, const std::string& launcher = "")
      : log_(std::move(log)) {
    prepare_environment("");
    const std::string command = "exec " + launcher + " '" + std::string(GRATINGSIM_EXECUTABLE) + "' " + arguments +
                                " >" + quoted(log_) + " 2>&1";
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0) ::kill(pid_, SIGKILL), ::waitpid(pid_, nullptr, 0);
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  [[nodiscard]] pid_t pid() const { return pid_; }
  void signal(int number) const { ::kill(pid_, number); }
  /// Waits for it to end: its exit status (shell_status) and its output. One still running
  /// after launch_limit_seconds hangs: it is killed, with status 124 and a line saying so.
  Execution wait() {
    int status = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(launch_limit_seconds);
    bool hung = false;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) {
        hung = true;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    if (hung)
      return {124, text.str() + "\nBackground: still running after " + std::to_string(launch_limit_seconds) +
                       " s; killed\n"};
    return {shell_status(status), text.str()};
  }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
};

/// Polls `condition` every millisecond for up to `seconds`; whether it became true.
template <class Condition>
bool wait_until(Condition condition, double seconds = 60) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace gratingsim::test
