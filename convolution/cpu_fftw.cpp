// cpu-fftw: the five-step FFT convolution with FFTW3 (fftwf_ for float, fftw_ for double), OpenMP
// across the groups (slice, right-hand side) of the batch, zero rows never transformed.
//
// Per group g of slice p (Q input blocks, P output blocks, the problem's pattern of terms (o, q, k)):
//   forward   X̂_q = FFT(pad(in_{g,q})) for q = 0..Q−1: each input transformed once (pruned rows, below)
//   multiply  Ŷ_o = Σ_{terms (o, q, k)} Ŝ_{p,k} · X̂_q pointwise, Ŝ_{p,k} = FFT(χ_{p,k} placed at n mod L) / (L1·L2)
//   inverse   out_{g,o} = extract(FFT⁻¹(Ŷ_o)) for o = 0..P−1: each output inverse-transformed once
// so Q forward and P inverse 2D transforms per group, whatever the number of terms. A scalar problem
// (K = P = Q = 1) multiplies in place in X̂_0 and inverts it, exactly the pipeline below with no extra
// array; a pattern sums into a separate accumulator Ŷ.
//
// One 2D transform, with R = N1 rounded up to even (at most L1):
//   pad      s(m1 + M1, m2 + M2) = in(m1, m2) in an R×L2 row-major staging array s, zero elsewhere
//   rows     forward FFTs (length L2) of the R data rows only, out of place from s into the L1×L2
//            work array w, stored column-major (element (i1, i2) at i1 + i2·L1); rows R..L1−1 of w
//            are zeroed: a zero row stays zero, so it is never transformed
//   columns  forward FFTs (length L1) of all L2 columns of w, in place (contiguous)
//   (multiply, as above)
//   columns  inverse FFTs of all L2 columns
//   rows     inverse FFTs of the R kept rows only, out of place from w into an R×L2 row-major array
//   extract  out(m1, m2) = that array at (m1 + M1, m2 + M2)
// Why this shape (measured on one core, case 3, in cache): letting the row FFTs transpose between
// the row-major staging arrays and the column-major work array makes the pruned transforms the
// strided ones, which FFTW does less well than contiguous ones, keeps pad and extract contiguous
// copies, and leaves the staging array's padding zero from one block to the next (FFTW does not
// modify the input of an out-of-place complex transform): 1.31× (complex64) and 1.47× (complex128)
// faster than the unpruned pipeline, against 1.24× and 1.18× for the same R row FFTs pruned in place
// in a row-major array. The extra row of an odd N1 is a zero row; the even count lets FFTW's SIMD
// codelets pair the transforms (in that in-place form 1.24× with 32 rows against 1.11× with 31).
// The fields sit at index m + M, i.e. the m mod L convention of convolution.hpp circularly shifted
// by M; the circular convolution commutes with shifts, so the outputs sit at the same shifted places
// (L ≥ 2N − 1 keeps them free of aliasing) and the kernel spectrum keeps the m mod L convention. The
// shift makes the data rows 0..R−1: one plan_many covers them. Forward is e^{−2πi jk/L}
// (FFTW_FORWARD), inverse e^{+2πi jk/L} unnormalised; 1/(L1·L2) is folded into Ŝ_{p,k}.
// Without pruning (FftwOptions::prune_zero_rows = false): pad into a row-major L1×L2 work array,
// the plain 2D FFT of all of it in place both ways, multiply (and sum), extract.
//
// Threads: plans are single-threaded (FFTW's own threads are not initialised, though the _omp
// libraries are linked); parallelism is across the groups, each OpenMP thread running the plans
// through new-array execute on its own arrays. Those are fftw_malloc'd, so each has the alignment
// the plans were made for; the user's buffers are only touched by the pad and extract copies, so
// their alignment does not matter.
// FFTW's planner, wisdom and plan destruction are not thread-safe: all of them run under one mutex.
#include "convolution/cpu_fftw.hpp"

#include <fftw3.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "convolution/backends.hpp"
#include "convolution/devices.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace gratingsim::conv {
namespace {
using detail::check_kernels;
using detail::Kernels;

/// Serialises every FFTW call except execute (planner, wisdom, plan destruction), across both
/// precisions. Recursive: a plan replaced or unwound while planning destroys itself under the lock.
std::recursive_mutex& fftw_mutex() {
  static std::recursive_mutex mutex;
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
  static Plan plan_many(int rank, const int* n, int howmany, Complex* in, int istride, int idist, Complex* out,
                        int ostride, int odist, int sign, unsigned flags) {
    return fftw_plan_many_dft(rank, n, howmany, in, nullptr, istride, idist, out, nullptr, ostride, odist, sign,
                              flags);
  }
  static void execute(Plan plan, Complex* in, Complex* out) { fftw_execute_dft(plan, in, out); }
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
  static Plan plan_many(int rank, const int* n, int howmany, Complex* in, int istride, int idist, Complex* out,
                        int ostride, int odist, int sign, unsigned flags) {
    return fftwf_plan_many_dft(rank, n, howmany, in, nullptr, istride, idist, out, nullptr, ostride, odist, sign,
                               flags);
  }
  static void execute(Plan plan, Complex* in, Complex* out) { fftwf_execute_dft(plan, in, out); }
  static void destroy(Plan plan) { fftwf_destroy_plan(plan); }
  static void import_wisdom(const std::string& wisdom) { fftwf_import_wisdom_from_string(wisdom.c_str()); }
  static char* export_wisdom() { return fftwf_export_wisdom_to_string(); }
};

/// An FFTW plan, executed on any buffers allocated like the ones it was planned on.
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
  void operator()(std::complex<Real>* in, std::complex<Real>* out) const {
    using C = typename Lib::Complex;
    Lib::execute(plan_, reinterpret_cast<C*>(in), reinterpret_cast<C*>(out));
  }

 private:
  typename Lib::Plan plan_ = nullptr;
};

template <class Real>
struct FftwFree {
  void operator()(std::complex<Real>* p) const { Fftw<Real>::free(p); }
};
/// An fftw_malloc'd array: aligned as FFTW's SIMD codelets want, so plans made on one such array run
/// on any other.
template <class Real>
class Buffer {
 public:
  explicit Buffer(std::size_t size) {
    const std::size_t bytes = std::max<std::size_t>(size, 1) * sizeof(std::complex<Real>);
    data_.reset(static_cast<std::complex<Real>*>(Fftw<Real>::malloc(bytes)));
    if (!data_) throw std::bad_alloc();
  }
  [[nodiscard]] std::complex<Real>* get() const { return data_.get(); }

 private:
  std::unique_ptr<std::complex<Real>[], FftwFree<Real>> data_;
};

FftwPlanning planning_from_environment() {
  const char* value = std::getenv("GRATINGSIM_FFTW_PLANNING");
  if (!value || !*value) return FftwPlanning::measure;
  try {
    return parse_fftw_planning(value);
  } catch (const InvalidArgument&) {
    GS_EXPECTS(false, std::string("GRATINGSIM_FFTW_PLANNING='") + value +
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

/// Publishes `text` as `file` atomically (core/atomic_file.hpp): a reader never sees a half-written
/// file. Failures are ignored (wisdom is a cache).
void save_wisdom_file(const std::filesystem::path& file, const std::string& text) {
  try {
    write_file_atomically(file, text);
  } catch (const FileError&) {
    // wisdom is an optimisation: a cache that cannot be written only costs planning time next run
  }
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

/// y ← x · s (first term of an output) or y ← y + x · s (every further term), elementwise, as above.
template <class Real, bool accumulate>
GRATINGSIM_AVX2_CLONE void multiply_into(Real* __restrict y, const Real* __restrict x, const Real* __restrict s,
                                         std::size_t count) {
  for (std::size_t k = 0; k < 2 * count; k += 2) {
    const Real re = x[k] * s[k] - x[k + 1] * s[k + 1];
    const Real im = x[k] * s[k + 1] + x[k + 1] * s[k];
    if constexpr (accumulate) {
      y[k] += re;
      y[k + 1] += im;
    } else {
      y[k] = re;
      y[k + 1] = im;
    }
  }
}

template <class Real>
class FftwConvolution final : public Convolution<Real> {
 public:
  using typename Convolution<Real>::Complex;
  using Lib = Fftw<Real>;

  FftwConvolution(const Problem& geometry, Kernels kernels, const FftwOptions& options)
      : Convolution<Real>(geometry),
        prune_(options.prune_zero_rows),
        rows_(std::min(this->problem_.l1, this->problem_.n1 + this->problem_.n1 % 2)),
        area_(std::size_t(this->problem_.l1) * this->problem_.l2),
        spectra_(std::size_t(this->problem_.slices) * this->problem_.kernels * area_) {
    const Problem& g = this->problem_;
    // The pattern grouped by output: terms_[term_begin_[o] .. term_begin_[o + 1]) are output o's.
    for (int o = 0; o < g.outputs; ++o) {
      term_begin_.push_back(terms_.size());
      for (const Term& t : g.pattern)
        if (t.output == o) terms_.push_back(t);
    }
    term_begin_.push_back(terms_.size());
    const std::size_t staging = prune_ ? std::size_t(rows_) * g.l2 : 0;
    const int threads = std::max(1, omp_get_max_threads());
    for (int t = 0; t < threads; ++t) {
      ThreadBuffers& b = buffers_.emplace_back(Buffer<Real>(staging), Buffer<Real>(g.scalar() ? 0 : area_),
                                               Buffer<Real>(staging));
      for (int q = 0; q < g.inputs; ++q) b.inputs.emplace_back(area_);
    }
    make_plans(options.planning ? *options.planning : planning_from_environment());
    // Planning scribbles on the buffers; the pad then writes only the data, the rest stays zero.
    for (auto& b : buffers_) std::fill_n(b.staging_in.get(), staging, Complex{});
    set_kernels(kernels);
  }

  void set_kernels(Kernels kernels) override {
    const Problem& g = this->problem_;
    check_kernels(g, kernels);
    const int k1 = 2 * g.n1 - 1, k2 = 2 * g.n2 - 1;
    const Real scale = Real(1.0 / double(area_));
    Complex* w = buffers_.front().inputs.front().get();
    for (std::size_t p = 0; p < std::size_t(g.slices) * g.kernels; ++p) {  // kernel k of slice s at p = s·K + k
      const auto* chi = kernels.data() + p * g.kernel_size();
      std::fill(w, w + area_, Complex{});
      // χ(n1, n2), n ∈ [−2M, 2M], at FFT index n mod L, in the work layout; rounded to Real as every
      // backend sees it.
      for (int a1 = 0; a1 < k1; ++a1) {
        const std::size_t i1 = (a1 - (g.n1 - 1) + g.l1) % g.l1;
        for (int a2 = 0; a2 < k2; ++a2) {
          const std::size_t i2 = (a2 - (g.n2 - 1) + g.l2) % g.l2;
          w[prune_ ? i1 + i2 * g.l1 : i1 * g.l2 + i2] = Complex(chi[a1 * k2 + a2]);
        }
      }
      forward_2d_(w, w);
      Complex* spectrum = spectra_.data() + p * area_;
      for (std::size_t k = 0; k < area_; ++k) spectrum[k] = w[k] * scale;
    }
  }

  void execute(const Complex* in, Complex* out, Stream) override {
    const Problem& g = this->problem_;
    const std::size_t field = g.field_size();
    const auto groups = static_cast<std::ptrdiff_t>(g.groups());
    const bool scalar = g.scalar();
    // The team is capped at the buffer count, in case the caller raised the thread count since planning.
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(buffers_.size()))
    for (std::ptrdiff_t group = 0; group < groups; ++group) {
      const ThreadBuffers& t = buffers_[omp_get_thread_num()];
      const Complex* spectra = spectra_.data() + std::size_t(group / g.per_slice) * g.kernels * area_;
      for (int q = 0; q < g.inputs; ++q) forward(t, in + (group * g.inputs + q) * field, t.inputs[q].get());
      for (int o = 0; o < g.outputs; ++o) {
        Complex* y = t.sum.get();
        if (scalar) {
          y = t.inputs.front().get();
          multiply<Real>(reinterpret_cast<Real*>(y), reinterpret_cast<const Real*>(spectra), area_);
        } else {
          for (std::size_t i = term_begin_[o]; i < term_begin_[o + 1]; ++i) {
            const Term& term = terms_[i];
            const auto* x = reinterpret_cast<const Real*>(t.inputs[term.input].get());
            const auto* s = reinterpret_cast<const Real*>(spectra + term.kernel * area_);
            if (i == term_begin_[o])
              multiply_into<Real, false>(reinterpret_cast<Real*>(y), x, s, area_);
            else
              multiply_into<Real, true>(reinterpret_cast<Real*>(y), x, s, area_);
          }
        }
        inverse(t, y, out + (group * g.outputs + o) * field);
      }
    }
  }

  [[nodiscard]] Backend backend() const override { return Backend::cpu_fftw; }

 private:
  // One OpenMP thread's arrays.
  //   pruned:   staging_in  R×L2 row-major: the pad target; zero outside the data, and kept so (the
  //                         forward row FFTs read it out of place, which FFTW guarantees not to modify)
  //             inputs      Q arrays L1×L2 column-major, X̂_q: the row FFTs write them transposed,
  //                         columns run in place
  //             sum         L1×L2 column-major, Ŷ_o (empty for a scalar problem, which multiplies X̂_0
  //                         in place); the inverse columns run in place
  //             staging_out R×L2 row-major: the inverse row FFTs write it transposed back; extract reads it
  //   unpruned: inputs and sum L1×L2 row-major, everything in place (the staging arrays are empty)
  struct ThreadBuffers {
    Buffer<Real> staging_in, sum, staging_out;
    std::vector<Buffer<Real>> inputs;
  };

  /// w ← the 2D spectrum of the padded field block x (N1×N2 row-major), in the work layout.
  void forward(const ThreadBuffers& t, const Complex* x, Complex* w) const {
    const Problem& g = this->problem_;
    const int n1 = g.n1, n2 = g.n2;
    const std::size_t l1 = g.l1, l2 = g.l2;
    if (prune_) {
      Complex* s = t.staging_in.get();
      for (int i1 = 0; i1 < n1; ++i1) std::copy_n(x + i1 * n2, n2, s + i1 * l2);
      for (std::size_t i2 = 0; i2 < l2; ++i2) std::fill(w + i2 * l1 + rows_, w + (i2 + 1) * l1, Complex{});
      rows_forward_(s, w);
      columns_forward_(w, w);
    } else {
      for (int i1 = 0; i1 < n1; ++i1) {
        std::copy_n(x + i1 * n2, n2, w + i1 * l2);
        std::fill(w + i1 * l2 + n2, w + (i1 + 1) * l2, Complex{});
      }
      std::fill(w + n1 * l2, w + area_, Complex{});
      forward_2d_(w, w);
    }
  }

  /// y (N1×N2 row-major) ← the kept outputs of the inverse 2D transform of the spectrum w (destroyed).
  void inverse(const ThreadBuffers& t, Complex* w, Complex* y) const {
    const Problem& g = this->problem_;
    const int n1 = g.n1, n2 = g.n2;
    const std::size_t l2 = g.l2;
    if (prune_) {
      columns_inverse_(w, w);
      Complex* o = t.staging_out.get();
      rows_inverse_(w, o);
      for (int i1 = 0; i1 < n1; ++i1) std::copy_n(o + i1 * l2, n2, y + i1 * n2);
    } else {
      inverse_2d_(w, w);
      for (int i1 = 0; i1 < n1; ++i1) std::copy_n(w + i1 * l2, n2, y + i1 * n2);
    }
  }

  void make_plans(FftwPlanning planning) {
    const Problem& g = this->problem_;
    const unsigned flags = planner_flags(planning);
    const std::filesystem::path wisdom_file = fftw_wisdom_file(precision_of<Real>());
    const auto fftw = [](const Buffer<Real>& b) { return reinterpret_cast<typename Lib::Complex*>(b.get()); };
    auto* s = fftw(buffers_.front().staging_in);
    auto* w = fftw(buffers_.front().inputs.front());
    auto* o = fftw(buffers_.front().staging_out);
    std::lock_guard lock(fftw_mutex());
    const std::string stored = wisdom_file.empty() ? std::string() : read_file(wisdom_file);
    if (!stored.empty()) Lib::import_wisdom(stored);  // unreadable wisdom is ignored: FFTW then just plans

    // plan(n, howmany, in, istride, idist, out, ostride, odist, ...), rank 1; a 2D transform passes n[2].
    const auto plan = [&](int rank, const int* n, int howmany, typename Lib::Complex* in, int istride, int idist,
                          typename Lib::Complex* out, int ostride, int odist, int sign, unsigned f) {
      auto p = Lib::plan_many(rank, n, howmany, in, istride, idist, out, ostride, odist, sign, f);
      if (!p) {
        std::ostringstream message;
        message << "FFTW could not plan " << howmany << " transform(s) of size " << n[0];
        if (rank == 2) message << "x" << n[1];
        if (planning == FftwPlanning::wisdom_only)
          message << " from wisdom alone (none for it in '" << wisdom_file.string() << "')";
        GS_SUPPORTS(false, message.str());
      }
      return FftPlan<Real>(p);
    };
    const int l1 = g.l1, l2 = g.l2;
    if (prune_) {
      // The kernel spectra (once per set_kernels) are this 2D plan's only use: not worth measuring.
      // Column-major L1×L2 is row-major L2×L1 to FFTW.
      const int transposed[] = {l2, l1};
      forward_2d_ = plan(2, transposed, 1, w, 1, 0, w, 1, 0, FFTW_FORWARD, FFTW_ESTIMATE);
      rows_forward_ = plan(1, &l2, rows_, s, 1, l2, w, l1, 1, FFTW_FORWARD, flags);
      columns_forward_ = plan(1, &l1, l2, w, 1, l1, w, 1, l1, FFTW_FORWARD, flags);
      columns_inverse_ = plan(1, &l1, l2, w, 1, l1, w, 1, l1, FFTW_BACKWARD, flags);
      rows_inverse_ = plan(1, &l2, rows_, w, l1, 1, o, 1, l2, FFTW_BACKWARD, flags | FFTW_DESTROY_INPUT);
    } else {
      const int lengths[] = {l1, l2};
      forward_2d_ = plan(2, lengths, 1, w, 1, 0, w, 1, 0, FFTW_FORWARD, flags);
      inverse_2d_ = plan(2, lengths, 1, w, 1, 0, w, 1, 0, FFTW_BACKWARD, flags);
    }

    if (planning == FftwPlanning::measure && !wisdom_file.empty()) {
      std::unique_ptr<char, FftwFreeChars> learnt(Lib::export_wisdom());
      if (learnt && stored != learnt.get()) save_wisdom_file(wisdom_file, learnt.get());
    }
  }

  struct FftwFreeChars {
    void operator()(char* p) const { Lib::free(p); }
  };

  bool prune_;
  int rows_;                      // R: the rows transformed along axis 2 when pruning (N1 rounded up to even)
  std::size_t area_;              // L1·L2
  std::vector<Complex> spectra_;  // Ŝ_{p,k}, slices·K blocks of L1×L2 in the work layout, 1/(L1·L2) folded in
  std::vector<Term> terms_;                // the pattern, sorted by output
  std::vector<std::size_t> term_begin_;    // P + 1 offsets into terms_
  std::vector<ThreadBuffers> buffers_;     // one set per OpenMP thread
  FftPlan<Real> forward_2d_, inverse_2d_;
  FftPlan<Real> rows_forward_, columns_forward_, columns_inverse_, rows_inverse_;
};

}  // namespace

FftwPlanning parse_fftw_planning(std::string_view name) {
  if (name == "measure") return FftwPlanning::measure;
  if (name == "estimate") return FftwPlanning::estimate;
  if (name == "wisdom-only") return FftwPlanning::wisdom_only;
  GS_EXPECTS(false, "unknown FFTW planning '" + std::string(name) + "' (expected measure, estimate or wisdom-only)");
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
std::unique_ptr<Convolution<Real>> make_fftw_convolution(const Problem& geometry,
                                                         std::span<const std::complex<double>> kernels,
                                                         FftwOptions options) {
  const Problem g = resolve(geometry);
  detail::check_kernels(g, kernels);
  const Support support = detail::can_implement_cpu_fftw(g, precision_of<Real>());
  GS_SUPPORTS(support.ok, "backend cpu-fftw: " + support.reason);
  return std::make_unique<FftwConvolution<Real>>(g, kernels, options);
}
template std::unique_ptr<Convolution<float>> make_fftw_convolution<float>(const Problem&,
                                                                          std::span<const std::complex<double>>,
                                                                          FftwOptions);
template std::unique_ptr<Convolution<double>> make_fftw_convolution<double>(const Problem&,
                                                                            std::span<const std::complex<double>>,
                                                                            FftwOptions);

namespace detail {
// Any valid problem: any N, any L ≥ 2N − 1 FFTW can plan (every length), any pattern. The limits are
// memory (below) and int sizes: FFTW's plan_many takes int lengths, strides and distances (L1·L2 < 2^31).
Support can_implement_cpu_fftw(const Problem& g, Precision) {
  if (std::size_t(g.l1) * g.l2 > std::size_t(INT32_MAX))
    return unsupported("needs L1*L2 < 2^31 (FFTW's int strides), got " + std::to_string(g.l1) + "*" +
                       std::to_string(g.l2));
  return {};
}
// The plan of make_convolution (rows pruned): the kernel spectra, slices·K arrays of L1·L2, and per
// OpenMP thread the Q input spectra X̂_q, the sum Ŷ (not for a scalar problem) and the two R×L2
// staging arrays. FFTW's plans themselves (twiddle tables, a few kB) are not counted.
std::size_t workspace_cpu_fftw(const Problem& g, Precision precision) {
  const std::size_t c = precision == Precision::single ? 8 : 16;
  const std::size_t area = std::size_t(g.l1) * g.l2, threads = std::size_t(std::max(1, omp_get_max_threads()));
  const std::size_t rows = std::size_t(std::min(g.l1, g.n1 + g.n1 % 2));
  const std::size_t per_thread = (g.inputs + (g.scalar() ? 0 : 1)) * area + 2 * rows * g.l2;
  return (std::size_t(g.slices) * g.kernels * area + threads * per_thread) * c;
}

template <class Real>
Plan<Real> make_cpu_fftw(const Problem& g, Kernels kernels) {
  return make_fftw_convolution<Real>(g, kernels, FftwOptions{});
}
template Plan<float> make_cpu_fftw<float>(const Problem&, Kernels);
template Plan<double> make_cpu_fftw<double>(const Problem&, Kernels);
}  // namespace detail

struct GridDft::Plans {
  Buffer<double> scratch;  // the array the plans are made on; grids must share its alignment
  FftPlan<double> rows_forward, rows_inverse, columns_forward, columns_inverse;
  explicit Plans(std::size_t size) : scratch(size) {}
};

namespace {
/// a ← aᵀ for an R × R row-major grid, in tiles (the whole 2D transforms are rows, transpose, rows,
/// transpose: FFTW_ESTIMATE's in-place 2D plan ran 5x slower at R = 512, its columns strided).
void transpose_in_place(std::complex<double>* a, int r) {
  constexpr int tile = 32;
  for (int i0 = 0; i0 < r; i0 += tile)
    for (int j0 = i0; j0 < r; j0 += tile)
      for (int i = i0; i < std::min(i0 + tile, r); ++i)
        for (int j = std::max(j0, i + 1); j < std::min(j0 + tile, r); ++j)
          std::swap(a[std::size_t(i) * r + j], a[std::size_t(j) * r + i]);
}
}  // namespace

GridDft::GridDft(int r, int kept) : r_(r), kept_(kept), block_(std::min(8, r / 2)) {
  GS_EXPECTS(r >= 8 && std::has_single_bit(unsigned(r)) && kept >= 0 && 2 * kept < r,
             "GridDft: needs R a power of two >= 8 and 0 <= kept < R/2, got R = " + std::to_string(r) +
                 ", kept = " + std::to_string(kept));
  plans_ = std::make_unique<Plans>(std::size_t(r) * r);
  using C = fftw_complex;
  C* const a = reinterpret_cast<C*>(plans_->scratch.get());
  std::lock_guard lock(fftw_mutex());
  const auto plan = [&](int howmany, int stride, int dist, int sign) {
    auto p = Fftw<double>::plan_many(1, &r, howmany, a, stride, dist, a, stride, dist, sign, FFTW_ESTIMATE);
    GS_EXPECTS(p != nullptr, "GridDft: FFTW could not plan a transform of R = " + std::to_string(r));
    return FftPlan<double>(p);
  };
  plans_->rows_forward = plan(r, 1, r, FFTW_FORWARD);
  plans_->rows_inverse = plan(r, 1, r, FFTW_BACKWARD);
  plans_->columns_forward = plan(block_, r, 1, FFTW_FORWARD);
  plans_->columns_inverse = plan(block_, r, 1, FFTW_BACKWARD);
}

GridDft::~GridDft() = default;

void GridDft::check(const GridBuffer& grid) const {
  GS_EXPECTS(grid.size() == std::size_t(r_) * r_, "GridDft: the grid holds " + std::to_string(grid.size()) +
                                                     " values, not R² = " + std::to_string(std::size_t(r_) * r_));
  GS_EXPECTS(fftw_alignment_of(reinterpret_cast<double*>(const_cast<std::complex<double>*>(grid.data()))) ==
                 fftw_alignment_of(reinterpret_cast<double*>(plans_->scratch.get())),
             "GridDft: the grid is not aligned as the plans were made for");
}

void GridDft::whole(std::complex<double>* g, bool inverse) const {
  const FftPlan<double>& rows = inverse ? plans_->rows_inverse : plans_->rows_forward;
  for (int pass = 0; pass < 2; ++pass) {
    rows(g, g);
    transpose_in_place(g, r_);
  }
}

void GridDft::forward(GridBuffer& grid) const {
  check(grid);
  whole(grid.data(), false);
}

void GridDft::inverse(GridBuffer& grid) const {
  check(grid);
  whole(grid.data(), true);
}

// The kept columns in blocks of block_ adjacent columns, [0, ⌈(kept + 1)/b⌉·b) and [R − ⌈kept/b⌉·b, R): each
// column is transformed by the same plan at the same alignment whatever `kept` is (its bits do not depend on
// how many columns are kept); the two ranges never overlap, since b divides R/2 and kept < R/2.
void GridDft::columns(std::complex<double>* g, bool inverse) const {
  const FftPlan<double>& plan = inverse ? plans_->columns_inverse : plans_->columns_forward;
  for (int c = 0; c <= kept_; c += block_) plan(g + c, g + c);
  for (int c = r_ - block_; c + block_ > r_ - kept_; c -= block_) plan(g + c, g + c);
}

void GridDft::forward_kept(GridBuffer& grid) const {
  check(grid);
  plans_->rows_forward(grid.data(), grid.data());
  columns(grid.data(), false);
}

void GridDft::inverse_kept(GridBuffer& grid) const {
  check(grid);
  columns(grid.data(), true);
  plans_->rows_inverse(grid.data(), grid.data());
}

std::string fftw_version() { return ::fftw_version; }

}  // namespace gratingsim::conv
