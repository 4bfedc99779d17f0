#include "physics/vector_space.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/zeroed_allocator.hpp"

namespace gratingsim::physics {
namespace {

// Element-wise work below this many elements runs on the calling thread: a parallel region costs
// more than it saves there (and far more on an oversubscribed machine).
constexpr std::size_t parallel_threshold = std::size_t(1) << 16;

template <class Real>
class HostVectorSpace final : public VectorSpace<Real> {
 public:
  using typename VectorSpace<Real>::Complex;
  using typename VectorSpace<Real>::Scalar;
  HostVectorSpace(const BatchLayout& layout, int count)
      : VectorSpace<Real>(layout, count),
        storage_(layout.size() * std::size_t(count)),
        partials_(std::min<std::size_t>(reduction_chunks, layout.slices) * std::size_t(count) * layout.rhs) {}

  Complex* data(int i) override { return storage_.data() + std::size_t(i) * this->layout_.size(); }
  [[nodiscard]] Memory memory() const override { return Memory::host; }

  void norm(int x, std::span<double> out) override {
    const BatchLayout& l = this->layout_;
    std::vector<Scalar> sums(l.rhs);
    reduce(1, sums, [&](std::size_t p, std::size_t r, Scalar* acc) { norm_row(x, p, r, acc); });
    for (std::size_t r = 0; r < l.rhs; ++r) out[r] = std::sqrt(sums[r].real());
  }

  void dots(int first, int count, int y, std::span<Scalar> out) override {
    const BatchLayout& l = this->layout_;
    GS_EXPECTS(out.size() >= std::size_t(count) * l.rhs, "vector space: one dot per basis vector and right-hand side");
    reduce(std::size_t(count), out,
           [&](std::size_t p, std::size_t r, Scalar* acc) { dot_row(first, count, y, p, r, acc); });
  }

  void combine(std::span<const Scalar> a, int first, int count, int y) override {
    check_combine(a, first, count, y);
#pragma omp parallel for schedule(static) if (this->layout_.size() * std::size_t(count) >= parallel_threshold)
    for (std::ptrdiff_t p = 0; p < std::ptrdiff_t(this->layout_.slices); ++p)
      for (std::size_t r = 0; r < this->layout_.rhs; ++r) combine_row(a, first, count, y, std::size_t(p), r);
  }

  void combine_dots(std::span<const Scalar> a, int first, int count, int y, std::span<Scalar> out) override {
    const BatchLayout& l = this->layout_;
    check_combine(a, first, count, y);
    GS_EXPECTS(out.size() >= std::size_t(count) * l.rhs, "vector space: one dot per basis vector and right-hand side");
    // Each row is updated, then its dots taken, by the one thread that owns its chunk of slices: the update's
    // arithmetic is combine()'s and the sums dots()'s (the same partition), so the bits are theirs.
    reduce(std::size_t(count), out, [&](std::size_t p, std::size_t r, Scalar* acc) {
      combine_row(a, first, count, y, p, r);
      dot_row(first, count, y, p, r, acc);
    });
  }

  void combine_norm(std::span<const Scalar> a, int first, int count, int y, std::span<double> out) override {
    const BatchLayout& l = this->layout_;
    check_combine(a, first, count, y);
    std::vector<Scalar> sums(l.rhs);
    reduce(1, sums, [&](std::size_t p, std::size_t r, Scalar* acc) {
      combine_row(a, first, count, y, p, r);
      norm_row(y, p, r, acc);
    });
    for (std::size_t r = 0; r < l.rhs; ++r) out[r] = std::sqrt(sums[r].real());
  }

  void axpy(std::span<const Scalar> a, int x, int y) override {
    const BatchLayout& l = this->layout_;
    const Complex* u = data(x);
    Complex* v = data(y);
#pragma omp parallel for schedule(static) if (l.size() >= parallel_threshold)
    for (std::ptrdiff_t p = 0; p < std::ptrdiff_t(l.slices); ++p)
      for (std::size_t r = 0; r < l.rhs; ++r) {
        if (a[r] == Scalar(0)) continue;
        const Complex ar(a[r]);
        const std::size_t off = (p * l.rhs + r) * l.block;
        for (std::size_t j = 0; j < l.block; ++j) v[off + j] += ar * u[off + j];
      }
  }

  void scale(std::span<const Scalar> a, int x) override {
    const BatchLayout& l = this->layout_;
    Complex* v = data(x);
#pragma omp parallel for schedule(static) if (l.size() >= parallel_threshold)
    for (std::ptrdiff_t p = 0; p < std::ptrdiff_t(l.slices); ++p)
      for (std::size_t r = 0; r < l.rhs; ++r) {
        const Complex ar(a[r]);
        const std::size_t off = (p * l.rhs + r) * l.block;
        for (std::size_t j = 0; j < l.block; ++j) v[off + j] *= ar;
      }
  }

  void linear_update(std::span<const Scalar> a, int y, std::span<const Scalar> b, int u, std::span<const Scalar> c,
                     int w, std::span<double> norms) override {
    const BatchLayout& l = this->layout_;
    GS_EXPECTS(a.size() >= l.rhs && b.size() >= l.rhs && c.size() >= l.rhs,
               "vector space: one coefficient per right-hand side");
    GS_EXPECTS(y != u && y != w && u != w, "vector space: linear_update of three distinct vectors");
    if (norms.empty()) {
#pragma omp parallel for schedule(static) if (l.size() >= parallel_threshold)
      for (std::ptrdiff_t p = 0; p < std::ptrdiff_t(l.slices); ++p)
        for (std::size_t r = 0; r < l.rhs; ++r) update_row(a[r], y, b[r], u, c[r], w, std::size_t(p), r);
      return;
    }
    GS_EXPECTS(norms.size() >= l.rhs, "vector space: one norm per right-hand side");
    std::vector<Scalar> sums(l.rhs);
    reduce(1, sums, [&](std::size_t p, std::size_t r, Scalar* acc) {
      update_row(a[r], y, b[r], u, c[r], w, p, r);
      norm_row(y, p, r, acc);
    });
    for (std::size_t r = 0; r < l.rhs; ++r) norms[r] = std::sqrt(sums[r].real());
  }

  void copy(int x, int y) override {
    const BatchLayout& l = this->layout_;
    const Complex* u = data(x);
    Complex* v = data(y);
#pragma omp parallel for schedule(static) if (l.size() >= parallel_threshold)
    for (std::ptrdiff_t p = 0; p < std::ptrdiff_t(l.slices); ++p)
      std::copy_n(u + std::size_t(p) * l.rhs * l.block, l.rhs * l.block, v + std::size_t(p) * l.rhs * l.block);
  }

  void upload_strided(std::span<const Complex> values, std::size_t offset, std::size_t stride, int i) override {
    const BatchLayout& l = this->layout_;
    GS_EXPECTS(values.empty() || offset + (values.size() - 1) * stride < l.size(), "upload_strided: beyond the vector");
    Complex* v = data(i);
#pragma omp parallel for schedule(static) if (l.size() >= parallel_threshold)
    for (std::ptrdiff_t p = 0; p < std::ptrdiff_t(l.slices); ++p)
      std::fill_n(v + std::size_t(p) * l.rhs * l.block, l.rhs * l.block, Complex(0));
    for (std::size_t k = 0; k < values.size(); ++k) v[offset + k * stride] = values[k];
  }

  void upload(std::span<const Complex> host, int i) override {
    GS_EXPECTS(host.size() == this->layout_.size(), "upload: size mismatch");
    std::copy(host.begin(), host.end(), data(i));
  }
  void download(int i, std::span<Complex> host) override {
    GS_EXPECTS(host.size() == this->layout_.size(), "download: size mismatch");
    const Complex* u = data(i);
    std::copy(u, u + this->layout_.size(), host.begin());
  }

 private:
  // The row operations are compiled once (noinline): inlined into different loops, the compiler may contract
  // their multiply-adds differently, and the fused passes must give the separate ones' bits.
  /// acc[0] += ‖x‖² over row (p, r).
  [[gnu::noinline]] void norm_row(int x, std::size_t p, std::size_t r, Scalar* acc) {
    const BatchLayout& l = this->layout_;
    const Complex* a = data(x) + (p * l.rhs + r) * l.block;
    double sum = 0;
    for (std::size_t j = 0; j < l.block; ++j) sum += std::norm(Scalar(a[j]));
    acc[0] += sum;
  }
  /// acc[i·rhs] += Σ conj(V_{first+i})·y over row (p, r), i < count.
  [[gnu::noinline]] void dot_row(int first, int count, int y, std::size_t p, std::size_t r, Scalar* acc) {
    const BatchLayout& l = this->layout_;
    const std::size_t off = (p * l.rhs + r) * l.block;
    const Complex* b = data(y) + off;
    for (int i = 0; i < count; ++i) {
      const Complex* a = data(first + i) + off;
      Scalar sum = 0;
      for (std::size_t j = 0; j < l.block; ++j) sum += std::conj(Scalar(a[j])) * Scalar(b[j]);
      acc[std::size_t(i) * l.rhs] += sum;
    }
  }
  /// y += Σ_i a[i·rhs + r] V_{first+i} over row (p, r) (zero coefficients skipped).
  [[gnu::noinline]] void combine_row(std::span<const Scalar> a, int first, int count, int y, std::size_t p,
                                     std::size_t r) {
    const BatchLayout& l = this->layout_;
    const std::size_t off = (p * l.rhs + r) * l.block;
    Complex* v = data(y) + off;
    for (int i = 0; i < count; ++i) {
      const Scalar ai = a[std::size_t(i) * l.rhs + r];
      if (ai == Scalar(0)) continue;
      const Complex c(ai);
      const Complex* u = data(first + i) + off;
      for (std::size_t j = 0; j < l.block; ++j) v[j] += c * u[j];
    }
  }
  /// Row (p, r) of y ← a·y + b·u + c·w: y not read where a = 0, the row left alone where (a, b, c) = (1, 0, 0).
  [[gnu::noinline]] void update_row(Scalar a, int y, Scalar b, int u, Scalar c, int w, std::size_t p, std::size_t r) {
    if (a == Scalar(1) && b == Scalar(0) && c == Scalar(0)) return;
    const BatchLayout& l = this->layout_;
    const std::size_t off = (p * l.rhs + r) * l.block;
    Complex* v = data(y) + off;
    const Complex* x1 = data(u) + off;
    const Complex* x2 = data(w) + off;
    const Complex ar(a), br(b), cr(c);
    if (a == Scalar(0)) {
      for (std::size_t j = 0; j < l.block; ++j) v[j] = br * x1[j] + cr * x2[j];
    } else {
      for (std::size_t j = 0; j < l.block; ++j) v[j] = ar * v[j] + br * x1[j] + cr * x2[j];
    }
  }
  void check_combine(std::span<const Scalar> a, int first, int count, int y) const {
    GS_EXPECTS(a.size() >= std::size_t(count) * this->layout_.rhs,
               "vector space: one coefficient per basis vector and right-hand side");
    GS_EXPECTS(y < first || y >= first + count, "vector space: combine into one of its own basis vectors");
  }

  /// Per-rhs sums of `terms` values each (out[t·rhs + r]): `row(p, r, acc)` adds row (p, r)'s
  /// contributions to acc[t·rhs] (acc points at rhs r of the chunk's partials). The slices are split
  /// into a fixed number of chunks (not one per thread), each summed in order, the chunks added in
  /// order: the same result for any number of threads.
  template <class Row>
  void reduce(std::size_t terms, std::span<Scalar> out, Row row) {
    const BatchLayout& l = this->layout_;
    const std::size_t chunks = std::min<std::size_t>(reduction_chunks, l.slices);
    const std::size_t per = terms * l.rhs;
    GS_EXPECTS(chunks * per <= partials_.size(), "vector space: more dots than basis vectors");
    std::fill(partials_.begin(), partials_.begin() + std::ptrdiff_t(chunks * per), Scalar(0));
#pragma omp parallel for schedule(dynamic) if (l.size() * terms >= parallel_threshold)
    for (std::ptrdiff_t c = 0; c < std::ptrdiff_t(chunks); ++c) {
      const std::size_t p0 = l.slices * std::size_t(c) / chunks, p1 = l.slices * std::size_t(c + 1) / chunks;
      for (std::size_t p = p0; p < p1; ++p)
        for (std::size_t r = 0; r < l.rhs; ++r) row(p, r, partials_.data() + c * per + r);
    }
    for (std::size_t k = 0; k < per; ++k) {
      Scalar sum = 0;
      for (std::size_t c = 0; c < chunks; ++c) sum += partials_[c * per + k];
      out[k] = sum;
    }
  }

  static constexpr std::size_t reduction_chunks = 64;
  // Zeros from calloc (core/zeroed_allocator.hpp): a large block comes zeroed from the kernel, its pages touched
  // (faulted in) only when a vector is first written. A restart-m basis whose solve converges in a few iterations
  // (the sweep's) then costs the pages of the vectors it uses, not m + 1 vectors' (a value-initialised
  // std::vector wrote them all: 35 % of the page faults of configs/default.yaml's sweep on cpu-fftw).
  std::vector<Complex, ZeroedAllocator<Complex>> storage_;
  std::vector<Scalar> partials_;  // reduce()'s chunk sums, for up to count() terms
};

}  // namespace

template <class Real>
std::unique_ptr<VectorSpace<Real>> make_host_vector_space(const BatchLayout& layout, int count) {
  GS_EXPECTS(count >= 1 && layout.size() > 0, "vector space: empty layout or count");
  return std::make_unique<HostVectorSpace<Real>>(layout, count);
}
template std::unique_ptr<VectorSpace<float>> make_host_vector_space<float>(const BatchLayout&, int);
template std::unique_ptr<VectorSpace<double>> make_host_vector_space<double>(const BatchLayout&, int);

}  // namespace gratingsim::physics
