#pragma once
// The progress line of a sweep on stderr: one line rewritten in place ("\r", erase to its end),
// with the points done, the current wavelength, the elapsed time and an estimate of the time left.
#include <chrono>
#include <cstddef>
#include <string>

namespace gratingsim::app {

class Progress {
 public:
  /// `total` points of which `already_done` were finished by an earlier run (--resume). Shown only
  /// if `enabled` (the caller decides: stderr is a terminal, not --quiet, more than one point).
  Progress(std::size_t total, std::size_t already_done, bool enabled);
  /// `done` points finished in all; `doing` says what is being solved now.
  void update(std::size_t done, const std::string& doing);
  /// Erases the line, so that a message or the summary starts on a clean line.
  void clear();

 private:
  std::size_t total_, resumed_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// 75 → "1 min 15 s", 3.2 → "3.2 s".
std::string format_duration(double seconds);

}  // namespace gratingsim::app
