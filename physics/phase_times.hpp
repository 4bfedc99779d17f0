#pragma once
// Wall time per phase of one wavelength batch (issue #15: where the time around the Krylov solve
// goes). physics::solve fills every phase but `writing`, which the application adds; the run summary,
// the result file (io/SCHEMA.md, solver/phase_seconds) and `gratingsim bench e2e` show them.
//
// GPU phases: every set-up step that uploads (convolution kernels and spectra, z-operator
// coefficients, preconditioner) waits for the stream it ran on (the calling thread's default stream,
// core/device_buffer.hpp) before returning, and the Krylov phase ends waiting for the problem's stream
// (solver.cpp, solve_group: problem.synchronize()), so a lap taken on the host after each of them holds the device work it started (and,
// with several workers on one GPU, none of the others'). Richardson's two solves run side by side on a device
// (solver.cpp, overlap_richardson): their wall time is then shared among both solves' phases in proportion
// to them, so a batch's phases still sum to at most its wall time.
#include <array>
#include <chrono>
#include <cstddef>
#include <string_view>

namespace gratingsim::physics {

enum class Phase : std::size_t {
  structure,       ///< slicing, Floquet orders, shape functions and kernels per slice (host)
  spectra_plans,   ///< memory check (device: cudaMemGetInfo), convolution plan, kernel spectra (device: their
                   ///< upload), the stream
  z_operator,      ///< Green (z-operator) coefficients on the host, and the right-hand sides
  uploads,         ///< device backends: the z-operator's upload (host backends: its host tables)
  preconditioner,  ///< the averaged preconditioner: mean tensors, inverses, their upload
  krylov,          ///< the Krylov iterations (with loading b, a sparse upload, and x = b; both stay in the solver's memory)
  far_field,       ///< far-field amplitudes (one more convolution), orders, efficiencies, fields
  writing,         ///< the result file's writes of the batch's points (added by the application)
  count
};
inline constexpr std::size_t phase_count = std::size_t(Phase::count);

/// Names as the summary, the result file's `phases` attribute and bench e2e print them.
inline constexpr std::array<std::string_view, phase_count> phase_names = {
    "structure", "spectra+plans", "z-operator", "uploads", "preconditioner", "krylov", "far-field", "writing"};

struct PhaseTimes {
  std::array<double, phase_count> seconds{};  ///< s per phase

  double& operator[](Phase p) { return seconds[std::size_t(p)]; }
  double operator[](Phase p) const { return seconds[std::size_t(p)]; }
  [[nodiscard]] double total() const {
    double sum = 0;
    for (const double s : seconds) sum += s;
    return sum;
  }
  PhaseTimes& operator+=(const PhaseTimes& o) {
    for (std::size_t i = 0; i < phase_count; ++i) seconds[i] += o.seconds[i];
    return *this;
  }
};

/// A steady_clock stopwatch over the phases of one batch: lap(phase) adds the time since the last
/// lap (or construction) to `phase` and restarts. Laps never overlap, so their sum is at most the wall
/// time since construction.
class PhaseTimer {
 public:
  PhaseTimer() : last_(std::chrono::steady_clock::now()) {}
  void lap(Phase phase) {
    const auto now = std::chrono::steady_clock::now();
    times_[phase] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  [[nodiscard]] const PhaseTimes& times() const { return times_; }

 private:
  PhaseTimes times_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace gratingsim::physics
