// cpu-fftw: the five-step FFT convolution with FFTW3 (fftwf_ for float, fftw_ for double), OpenMP
// across the slices × fields batch, zero rows never transformed.
//
// Per field block, in a per-thread L1×L2 workspace w stored column-major (axis 1 fast: element
// (i1, i2) at i1 + i2·L1, so a row i1 = const is a strided line and a column a contiguous one):
//   pad      w(m1 + M1, m2 + M2) = in(m1, m2), zero elsewhere: rows 0..N1−1 hold data, the rest is 0
//   rows     forward FFTs (length L2) of the data rows only (a zero row stays zero)
//   columns  forward FFTs (length L1) of all L2 columns
//   multiply by Ŝ_p = FFT(χ_p placed at n mod L) / (L1·L2)
//   columns  inverse FFTs of all L2 columns
//   rows     inverse FFTs of the kept rows only
//   extract  out(m1, m2) = w(m1 + M1, m2 + M2)
// "Data rows" are rows 0..R−1 with R = N1 rounded up to even (at most L1): the extra row is a zero
// row, and an even count lets FFTW's SIMD codelets pair the interleaved transforms (case 3
// complex64: 1.25× over unpruned instead of 1.11× with 31 rows). The column-major layout makes the
// pruned transforms the strided ones: pruning those measured as fast or faster than pruning the
// contiguous ones (case 3 complex128 1.35× instead of 1.18×, case 4 complex64 1.33× instead of
// 1.20×, one core, in cache). The pad and extract loops transpose on the fly, on data in L1 cache.
// The fields sit at index m + M, i.e. the m mod L convention of convolution.hpp circularly shifted
// by M; the circular convolution commutes with shifts, so the outputs sit at the same shifted places
// (L ≥ 2N − 1 keeps them free of aliasing) and the kernel spectrum keeps the m mod L convention. The
// shift makes the data rows 0..R−1: one plan_many covers them. Forward is e^{−2πi jk/L}
// (FFTW_FORWARD), inverse e^{+2πi jk/L} unnormalised; 1/(L1·L2) is folded into Ŝ_p.
// Without pruning (FftwOptions::prune_zero_rows = false) the rows and columns steps are the plain 2D
// FFT of the whole workspace, both ways.
//
// Threads: plans are single-threaded (FFTW's own threads are not initialised, though the _omp
// libraries are linked); parallelism is across the batch, each OpenMP thread running the plans
// through new-array execute on its own workspace. Workspaces are fftw_malloc'd, so each has the
// alignment the plans were made for; the user's buffers are only touched by the pad and extract
// loops, so their alignment does not matter.
// FFTW's planner, wisdom and plan destruction are not thread-safe: all of them run under one mutex.
#include "convolution/cpu_fftw.hpp"

#include <fftw3.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "convolution/backends.hpp"
#include "convolution/error.hpp"

namespace gratingsim::conv {
namespace {
using detail::check_kernels;
using detail::Kernels;

/// Serialises every FFTW call except execute (planner, wisdom, plan destruction), across both precisions.
std::mutex& fftw_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The two FFTW libraries behind one name per call.
template <class Real>
struct Fftw;

template <>
struct Fftw<double> {
  using Complex = fftw_complex;
  using Plan = fftw_plan;
  static void* malloc(std::size_t bytes) { return fftw_malloc(bytes); }
  static void free(void* p) { fftw_free(p); }
  static Plan plan_many(int rank, const int* n, int howmany, Complex* data, int stride, int dist, int sign,
                        unsigned flags) {
    return fftw_plan_many_dft(rank, n, howmany, data, nullptr, stride, dist, data, nullptr, stride, dist, sign,
                              flags);
  }
  static void execute(Plan plan, Complex* data) { fftw_execute_dft(plan, data, data); }
  static void destroy(Plan plan) { fftw_destroy_plan(plan); }
  static void import_wisdom(const std::string& wisdom) { fftw_import_wisdom_from_string(wisdom.c_str()); }
  static char* export_wisdom() { return fftw_export_wisdom_to_string(); }
};

template <>
struct Fftw<float> {
  using Complex = fftwf_complex;
  using Plan = fftwf_plan;
  static void* malloc(std::size_t bytes) { return fftwf_malloc(bytes); }
  static void free(void* p) { fftwf_free(p); }
  static Plan plan_many(int rank, const int* n, int howmany, Complex* data, int stride, int dist, int sign,
                        unsigned flags) {
    return fftwf_plan_many_dft(rank, n, howmany, data, nullptr, stride, dist, data, nullptr, stride, dist, sign,
                               flags);
  }
  static void execute(Plan plan, Complex* data) { fftwf_execute_dft(plan, data, data); }
  static void destroy(Plan plan) { fftwf_destroy_plan(plan); }
  static void import_wisdom(const std::string& wisdom) { fftwf_import_wisdom_from_string(wisdom.c_str()); }
  static char* export_wisdom() { return fftwf_export_wisdom_to_string(); }
};

/// An in-place FFTW plan, executed on any workspace allocated like the one it was planned on.
template <class Real>
class FftPlan {
 public:
  using Lib = Fftw<Real>;
  FftPlan() = default;
  explicit FftPlan(typename Lib::Plan plan) : plan_(plan) {}
  FftPlan(FftPlan&& other) noexcept : plan_(std::exchange(other.plan_, nullptr)) {}
  FftPlan& operator=(FftPlan&& other) noexcept {
    std::swap(plan_, other.plan_);
    return *this;
  }
  ~FftPlan() {
    if (!plan_) return;
    std::lock_guard lock(fftw_mutex());
    Lib::destroy(plan_);
  }
  void operator()(std::complex<Real>* data) const {
    Lib::execute(plan_, reinterpret_cast<typename Lib::Complex*>(data));
  }

 private:
  typename Lib::Plan plan_ = nullptr;
};

template <class Real>
struct FftwFree {
  void operator()(std::complex<Real>* p) const { Fftw<Real>::free(p); }
};
template <class Real>
using Workspace = std::unique_ptr<std::complex<Real>[], FftwFree<Real>>;

FftwPlanning planning_from_environment() {
  const char* value = std::getenv("GRATINGSIM_FFTW_PLANNING");
  if (!value || !*value) return FftwPlanning::measure;
  try {
    return parse_fftw_planning(value);
  } catch (const InvalidArgument&) {
    EXPECTS(false, std::string("GRATINGSIM_FFTW_PLANNING='") + value +
                       "' is not measure, estimate or wisdom-only");
  }
}

unsigned planner_flags(FftwPlanning planning) {
  switch (planning) {
    case FftwPlanning::estimate: return FFTW_ESTIMATE;
    case FftwPlanning::wisdom_only: return FFTW_MEASURE | FFTW_WISDOM_ONLY;
    case FftwPlanning::measure: break;
  }
  return FFTW_MEASURE;
}

std::string read_file(const std::filesystem::path& file) {
  std::ifstream stream(file, std::ios::binary);
  std::ostringstream text;
  if (stream) text << stream.rdbuf();
  return text.str();
}

/// Writes `text` to `file` through a temporary in the same directory and a rename, so a reader never
/// sees a half-written file. Failures are ignored (wisdom is a cache).
void write_file_atomically(const std::filesystem::path& file, const std::string& text) {
  std::error_code ignored;
  std::filesystem::create_directories(file.parent_path(), ignored);
  std::filesystem::path temporary = file;
  temporary += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream stream(temporary, std::ios::binary | std::ios::trunc);
    if (!stream) return;
    stream << text;
    stream.close();
    if (!stream) {
      std::filesystem::remove(temporary, ignored);
      return;
    }
  }
  std::filesystem::rename(temporary, file, ignored);
  if (ignored) std::filesystem::remove(temporary, ignored);
}

// The spectrum multiply is about a tenth of the pipeline; built for the baseline ISA alone (SSE2) it
// needs shuffles for every complex product, so on x86-64 an AVX2 clone is picked at load time.
#if defined(__x86_64__) && defined(__GNUC__)
#define GRATINGSIM_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define GRATINGSIM_AVX2_CLONE
#endif

/// w ← w · s elementwise over `count` complex values, as interleaved (re, im) pairs. Written out
/// because std::complex's operator* checks for NaN/inf (C Annex G), which blocks vectorisation.
template <class Real>
GRATINGSIM_AVX2_CLONE void multiply(Real* __restrict w, const Real* __restrict s, std::size_t count) {
  for (std::size_t k = 0; k < 2 * count; k += 2) {
    const Real re = w[k] * s[k] - w[k + 1] * s[k + 1];
    const Real im = w[k] * s[k + 1] + w[k + 1] * s[k];
    w[k] = re;
    w[k + 1] = im;
  }
}

template <class Real>
class FftwConvolution final : public Convolution<Real> {
 public:
  using typename Convolution<Real>::Complex;
  using Lib = Fftw<Real>;

  FftwConvolution(const Geometry& geometry, Kernels kernels, const FftwOptions& options)
      : Convolution<Real>(geometry),
        prune_(options.prune_zero_rows),
        area_(std::size_t(this->geometry_.l1) * this->geometry_.l2),
        spectra_(this->geometry_.slices * area_) {
    const int threads = std::max(1, omp_get_max_threads());
    for (int t = 0; t < threads; ++t) {
      workspaces_.emplace_back(static_cast<Complex*>(Lib::malloc(area_ * sizeof(Complex))));
      if (!workspaces_.back()) throw std::bad_alloc();
    }
    make_plans(options.planning ? *options.planning : planning_from_environment());
    set_kernels(kernels);
  }

  void set_kernels(Kernels kernels) override {
    const Geometry& g = this->geometry_;
    check_kernels(g, kernels);
    const int k1 = 2 * g.n1 - 1, k2 = 2 * g.n2 - 1;
    const Real scale = Real(1.0 / double(area_));
    Complex* w = workspaces_.front().get();
    for (int p = 0; p < g.slices; ++p) {
      const auto* chi = kernels.data() + p * g.kernel_size();
      std::fill(w, w + area_, Complex{});
      // χ(n1, n2), n ∈ [−2M, 2M], at FFT index n mod L; rounded to Real as every backend sees it.
      for (int a1 = 0; a1 < k1; ++a1) {
        const int i1 = (a1 - (g.n1 - 1) + g.l1) % g.l1;
        for (int a2 = 0; a2 < k2; ++a2) {
          const int i2 = (a2 - (g.n2 - 1) + g.l2) % g.l2;
          w[i1 + std::size_t(i2) * g.l1] = Complex(chi[a1 * k2 + a2]);
        }
      }
      forward_2d_(w);
      Complex* spectrum = spectra_.data() + p * area_;
      for (std::size_t k = 0; k < area_; ++k) spectrum[k] = w[k] * scale;
    }
  }

  void execute(const Complex* in, Complex* out, Stream) override {
    const Geometry& g = this->geometry_;
    const int n1 = g.n1, n2 = g.n2;
    const std::size_t l1 = g.l1, field = g.field_size();
    const auto batch = static_cast<std::ptrdiff_t>(g.batch());
    // The team is capped at the workspace count, in case the caller raised the thread count since planning.
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(workspaces_.size()))
    for (std::ptrdiff_t b = 0; b < batch; ++b) {
      Complex* w = workspaces_[omp_get_thread_num()].get();
      const Complex* x = in + b * field;
      Complex* y = out + b * field;
      // The user's blocks are read and written in order (they stream from memory); the transposing
      // side is the workspace, which stays in L1 cache.
      for (int i2 = 0; i2 < n2; ++i2) std::fill(w + i2 * l1 + n1, w + (i2 + 1) * l1, Complex{});
      std::fill(w + n2 * l1, w + area_, Complex{});
      for (int i1 = 0; i1 < n1; ++i1)
        for (int i2 = 0; i2 < n2; ++i2) w[i1 + i2 * l1] = x[i1 * n2 + i2];
      if (prune_) {
        rows_forward_(w);
        columns_forward_(w);
      } else {
        forward_2d_(w);
      }
      multiply<Real>(reinterpret_cast<Real*>(w),
                     reinterpret_cast<const Real*>(spectra_.data() + (b / g.per_slice) * area_), area_);
      if (prune_) {
        columns_inverse_(w);
        rows_inverse_(w);
      } else {
        inverse_2d_(w);
      }
      for (int i1 = 0; i1 < n1; ++i1)
        for (int i2 = 0; i2 < n2; ++i2) y[i1 * n2 + i2] = w[i1 + i2 * l1];
    }
  }

  [[nodiscard]] Backend backend() const override { return Backend::cpu_fftw; }

 private:
  void make_plans(FftwPlanning planning) {
    const Geometry& g = this->geometry_;
    const unsigned flags = planner_flags(planning);
    const std::filesystem::path wisdom_file = fftw_wisdom_file(precision_of<Real>());
    auto* w = reinterpret_cast<typename Lib::Complex*>(workspaces_.front().get());

    std::lock_guard lock(fftw_mutex());
    const std::string stored = wisdom_file.empty() ? std::string() : read_file(wisdom_file);
    if (!stored.empty()) Lib::import_wisdom(stored);  // unreadable wisdom is ignored: FFTW then just plans

    const auto plan = [&](int rank, const int* n, int howmany, int stride, int dist, int sign, unsigned f) {
      auto p = Lib::plan_many(rank, n, howmany, w, stride, dist, sign, f);
      if (!p) {
        std::ostringstream message;
        message << "FFTW could not plan " << howmany << " in-place transform(s) of size " << n[0];
        if (rank == 2) message << "x" << n[1];
        if (planning == FftwPlanning::wisdom_only)
          message << " from wisdom alone (none for it in '" << wisdom_file.string() << "')";
        SUPPORTS(false, message.str());
      }
      return FftPlan<Real>(p);
    };
    // Column-major L1×L2 is row-major L2×L1 to FFTW: axis 2 is its slow dimension.
    const int lengths_2d[] = {g.l2, g.l1};
    // The 2D forward plan computes the kernel spectra; when pruning, that is its only use (once per
    // set_kernels), so it is not worth measuring.
    forward_2d_ = plan(2, lengths_2d, 1, 1, 0, FFTW_FORWARD, prune_ ? FFTW_ESTIMATE : flags);
    if (prune_) {
      const int rows = std::min(g.l1, g.n1 + g.n1 % 2);  // data rows, rounded up to even (see top)
      rows_forward_ = plan(1, &g.l2, rows, g.l1, 1, FFTW_FORWARD, flags);
      columns_forward_ = plan(1, &g.l1, g.l2, 1, g.l1, FFTW_FORWARD, flags);
      columns_inverse_ = plan(1, &g.l1, g.l2, 1, g.l1, FFTW_BACKWARD, flags);
      rows_inverse_ = plan(1, &g.l2, rows, g.l1, 1, FFTW_BACKWARD, flags);
    } else {
      inverse_2d_ = plan(2, lengths_2d, 1, 1, 0, FFTW_BACKWARD, flags);
    }

    if (planning == FftwPlanning::measure && !wisdom_file.empty()) {
      std::unique_ptr<char, FftwFreeChars> learnt(Lib::export_wisdom());
      if (learnt && stored != learnt.get()) write_file_atomically(wisdom_file, learnt.get());
    }
  }

  struct FftwFreeChars {
    void operator()(char* p) const { Lib::free(p); }
  };

  bool prune_;
  std::size_t area_;               // L1·L2
  std::vector<Complex> spectra_;   // Ŝ_p, slices blocks of L1×L2, 1/(L1·L2) folded in
  std::vector<Workspace<Real>> workspaces_;  // one L1×L2 array per OpenMP thread
  FftPlan<Real> forward_2d_, inverse_2d_;
  FftPlan<Real> rows_forward_, columns_forward_, columns_inverse_, rows_inverse_;
};

}  // namespace

FftwPlanning parse_fftw_planning(std::string_view name) {
  if (name == "measure") return FftwPlanning::measure;
  if (name == "estimate") return FftwPlanning::estimate;
  if (name == "wisdom-only") return FftwPlanning::wisdom_only;
  EXPECTS(false, "unknown FFTW planning '" + std::string(name) + "' (expected measure, estimate or wisdom-only)");
}

std::filesystem::path fftw_wisdom_file(Precision precision) {
  const std::string name = "fftw-wisdom." + std::string(to_string(precision));
  if (const char* stem = std::getenv("GRATINGSIM_FFTW_WISDOM")) {
    if (!*stem) return {};
    return std::string(stem) + "." + std::string(to_string(precision));
  }
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache)
    return std::filesystem::path(cache) / "gratingsim" / name;
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "gratingsim" / name;
  return {};
}

template <class Real>
std::unique_ptr<Convolution<Real>> make_fftw_convolution(const Geometry& geometry,
                                                         std::span<const std::complex<double>> kernels,
                                                         FftwOptions options) {
  const Geometry g = resolve(geometry);
  detail::check_kernels(g, kernels);
  return std::make_unique<FftwConvolution<Real>>(g, kernels, options);
}
template std::unique_ptr<Convolution<float>> make_fftw_convolution<float>(const Geometry&,
                                                                          std::span<const std::complex<double>>,
                                                                          FftwOptions);
template std::unique_ptr<Convolution<double>> make_fftw_convolution<double>(const Geometry&,
                                                                            std::span<const std::complex<double>>,
                                                                            FftwOptions);

namespace detail {
template <class Real>
Plan<Real> make_cpu_fftw(const Geometry& g, Kernels kernels) {
  return make_fftw_convolution<Real>(g, kernels, FftwOptions{});
}
template Plan<float> make_cpu_fftw<float>(const Geometry&, Kernels);
template Plan<double> make_cpu_fftw<double>(const Geometry&, Kernels);
}  // namespace detail

}  // namespace gratingsim::conv
