#include "app/progress.hpp"

#include <cmath>
#include <cstdio>

namespace gratingsim::app {

Progress::Progress(std::size_t total, std::size_t already_done, bool enabled)
    : total_(total), resumed_(already_done), enabled_(enabled) {}

void Progress::update(std::size_t done, const std::string& doing) {
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // The rate of this run only: points resumed from a file took no time here.
  const std::size_t solved = done - resumed_;
  std::string eta = "ETA -";
  if (solved > 0) eta = "ETA " + format_duration(elapsed / double(solved) * double(total_ - done));
  std::fprintf(stderr, "\r\033[K[%zu/%zu points] %s · %s elapsed · %s", done, total_, doing.c_str(),
               format_duration(elapsed).c_str(), eta.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::clear() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

std::string format_duration(double seconds) {
  char buffer[64];
  if (seconds < 60) {
    std::snprintf(buffer, sizeof buffer, "%.1f s", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buffer, sizeof buffer, "%d min %02d s", int(seconds / 60), int(std::fmod(seconds, 60)));
  } else {
    std::snprintf(buffer, sizeof buffer, "%d h %02d min", int(seconds / 3600), int(std::fmod(seconds, 3600) / 60));
  }
  return buffer;
}

}  // namespace gratingsim::app
