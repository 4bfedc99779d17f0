#pragma once
// The cpu-fftw backend's own knobs, for the benchmark and tests (make_convolution(Backend::cpu_fftw)
// is the ordinary way in and uses the defaults below). No FFTW header here: only cpu_fftw.cpp sees it.
//
// Environment:
//   GRATINGSIM_FFTW_PLANNING  measure (default) | estimate | wisdom-only: the planning effort when
//                             FftwOptions::planning is unset. `estimate` plans instantly (tests, CI);
//                             `measure` times candidate algorithms once per shape and keeps the
//                             result as wisdom.
//   GRATINGSIM_FFTW_WISDOM    wisdom file stem: files <stem>.single and <stem>.double; empty: no wisdom
//                             files. Unset: $XDG_CACHE_HOME/gratingsim/fftw-wisdom.<precision>, or
//                             ~/.cache/gratingsim/... without XDG_CACHE_HOME.
// Wisdom is loaded before planning and, after FFTW_MEASURE planning that learnt something, saved
// atomically (temporary file, then rename). A missing, unreadable or unwritable wisdom file is not an
// error: planning just starts from what FFTW already knows. The test suite runs with
// GRATINGSIM_FFTW_PLANNING=estimate (set by CTest in validation/CMakeLists.txt).
//
// A plan holds one set of work arrays per OpenMP thread (omp_get_max_threads() when planned), shared
// by its execute() calls: run one execute() at a time per plan. FFTW's own threads are not used:
// the batch is spread over OpenMP threads instead.
#include <complex>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "convolution/convolution.hpp"

namespace gratingsim::conv {

enum class FftwPlanning {
  measure,      ///< FFTW_MEASURE: time candidate algorithms (slow the first time per shape; wisdom keeps it)
  estimate,     ///< FFTW_ESTIMATE: heuristic plans, no timing, nothing saved
  wisdom_only,  ///< FFTW_MEASURE | FFTW_WISDOM_ONLY: plans only from loaded wisdom, else Unsupported
};

struct FftwOptions {
  /// true: row FFTs only on the N1 rows holding data, inverse row FFTs only on the N1 kept rows (the
  /// cpu-fftw backend; N1 rounded up to even, see cpu_fftw.cpp). false: the plain 2D FFT of the whole
  /// padded L1×L2 array both ways (the comparison the benchmark needs).
  bool prune_zero_rows = true;
  /// Unset: from GRATINGSIM_FFTW_PLANNING (default measure).
  std::optional<FftwPlanning> planning;
};

/// Parses "measure", "estimate", "wisdom-only"; throws InvalidArgument otherwise.
FftwPlanning parse_fftw_planning(std::string_view name);

/// The wisdom file used for `precision` under the current environment; empty when there is none.
std::filesystem::path fftw_wisdom_file(Precision precision);

/// 64-byte aligned storage, the alignment GridDft's plans are made for.
template <class T>
struct GridAllocator {
  using value_type = T;
  GridAllocator() = default;
  template <class U>
  explicit GridAllocator(const GridAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{64}); }
  friend bool operator==(const GridAllocator&, const GridAllocator&) { return true; }
};
using GridBuffer = std::vector<std::complex<double>, GridAllocator<std::complex<double>>>;

/// In-place 2D DFTs of one R × R row-major complex128 grid g[iy·R + ix] on the host, for set-up work
/// beside the engine (physics' normal-field rasters). forward: G(ky, kx) = Σ g(iy, ix) e^{−2πi (iy ky + ix kx)/R},
/// inverse: e^{+2πi …}; both unscaled. "Kept columns" are the x frequencies kx ∈ [0, kept] ∪ [R − kept, R):
/// forward_kept transforms every row, then those columns only (the others hold row transforms alone);
/// inverse_kept transforms those columns only, then every row (every other column must be zero).
/// R is a power of two ≥ 8. Planned once, FFTW_ESTIMATE (instant, no timing: a grid's transform is the
/// same in every run and thread, and a kept column's the same whatever `kept` is); the transforms are
/// const and may run concurrently on distinct grids.
class GridDft {
 public:
  GridDft(int r, int kept);
  ~GridDft();
  GridDft(const GridDft&) = delete;
  GridDft& operator=(const GridDft&) = delete;
  void forward(GridBuffer& grid) const;
  void inverse(GridBuffer& grid) const;
  void forward_kept(GridBuffer& grid) const;
  void inverse_kept(GridBuffer& grid) const;

 private:
  struct Plans;
  void check(const GridBuffer& grid) const;
  void whole(std::complex<double>* grid, bool inverse) const;
  void columns(std::complex<double>* grid, bool inverse) const;
  int r_, kept_, block_;
  std::unique_ptr<Plans> plans_;
};

/// The cpu-fftw pipeline with explicit options (make_convolution(Backend::cpu_fftw, ...) equals
/// make_fftw_convolution(..., {}) ). Throws Unsupported when wisdom_only finds no wisdom for a shape.
template <class Real>
std::unique_ptr<Convolution<Real>> make_fftw_convolution(const Problem& geometry,
                                                         std::span<const std::complex<double>> kernels,
                                                         FftwOptions options);

}  // namespace gratingsim::conv
