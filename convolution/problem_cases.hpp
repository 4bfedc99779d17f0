#pragma once
// The four problem cases of the small-convolutions paper (its Table 1; docs/convolution.md §5), written
// once: `gratingsim bench conv`, `bench solve` and `bench e2e` and the tests read this table. Plain data;
// how a case becomes a convolution problem, a structure or a case file is its reader's.

namespace gratingsim::conv {

struct ProblemCase {
  int number;     ///< 1-4: `--case N`, configs/problem_case_N.yaml
  int harmonics;  ///< M: the orders −M..M on both axes
  int fft_size;   ///< L: the FFT length on both axes, the smallest power of two ≥ 2N − 1
  int layers;     ///< the grating's slices in z (the paper's layers)
  /// N = 2M + 1 harmonics per axis.
  [[nodiscard]] constexpr int n() const { return 2 * harmonics + 1; }
  /// Kernel spectra of one batch: the layers + 1 (the table's batch is slices × fields_per_slice).
  [[nodiscard]] constexpr int slices() const { return layers + 1; }
};

/// 8 angles × 3 field components: the convolutions that share each slice's spectrum.
inline constexpr int fields_per_slice = 24;

inline constexpr ProblemCase problem_cases[] = {
    {.number = 1, .harmonics = 3, .fft_size = 16, .layers = 32},
    {.number = 2, .harmonics = 7, .fft_size = 32, .layers = 64},
    {.number = 3, .harmonics = 15, .fft_size = 64, .layers = 128},
    {.number = 4, .harmonics = 31, .fft_size = 128, .layers = 256},
};

// Numbered 1, 2, ... in order (problem_cases[number − 1]); L the smallest power of two ≥ 2N − 1.
static_assert([] {
  int number = 0;
  for (const ProblemCase& c : problem_cases)
    if (c.number != ++number || c.fft_size < 2 * c.n() - 1 || c.fft_size / 2 >= 2 * c.n() - 1 ||
        (c.fft_size & (c.fft_size - 1)) != 0)
      return false;
  return true;
}());

}  // namespace gratingsim::conv
