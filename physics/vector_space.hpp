#pragma once
// Storage and per-right-hand-side BLAS-1 for batched Krylov vectors, behind an interface so that a
// device implementation can keep every Krylov vector on the GPU.
//
// A batched vector holds n_rhs independent vectors interleaved in the convolution engine's layout:
// element (slice p, rhs r, j) at (p·n_rhs + r)·block + j, block = 3·orders (component-major), i.e.
// b = slice·per_slice + rhs·3 + component with per_slice = 3·n_rhs (convolution.hpp).
// Scalars (one per right-hand side) live on the host in complex128; reductions return there (a
// device implementation synchronises in dot(), dots() and norm()).
#include <complex>
#include <cstddef>
#include <memory>
#include <span>

#include "convolution/convolution.hpp"

namespace gratingsim::physics {

struct BatchLayout {
  std::size_t slices = 0, rhs = 0, block = 0;
  [[nodiscard]] std::size_t size() const { return slices * rhs * block; }
  [[nodiscard]] std::size_t per_rhs() const { return slices * block; }
};

template <class Real>
class VectorSpace {
 public:
  using Complex = std::complex<Real>;
  using Scalar = std::complex<double>;
  virtual ~VectorSpace() = default;

  [[nodiscard]] const BatchLayout& layout() const { return layout_; }
  [[nodiscard]] int count() const { return count_; }
  /// Vector i (0 ≤ i < count()) in this space's memory.
  virtual Complex* data(int i) = 0;
  [[nodiscard]] virtual Memory memory() const = 0;
  /// The stream a device space enqueues every operation on (nullptr for a host space).
  [[nodiscard]] virtual Stream stream() const { return nullptr; }

  /// out[r] = Σ conj(x_r)·y_r.
  void dot(int x, int y, std::span<Scalar> out) { dots(x, 1, y, out); }
  /// out[r] = ‖x_r‖₂.
  virtual void norm(int x, std::span<double> out) = 0;
  /// y_r += a[r]·x_r.
  virtual void axpy(std::span<const Scalar> a, int x, int y) = 0;
  /// x_r *= a[r].
  virtual void scale(std::span<const Scalar> a, int x) = 0;
  /// The basis pass of classical Gram–Schmidt: out[i·rhs + r] = Σ conj(V_{first+i, r})·y_r for
  /// 0 ≤ i < count, reading each basis vector once (device: one launch and one synchronisation).
  virtual void dots(int first, int count, int y, std::span<Scalar> out) = 0;
  /// y_r += Σ_{i<count} a[i·rhs + r]·V_{first+i, r} (y not among the V_i): one pass over y.
  virtual void combine(std::span<const Scalar> a, int first, int count, int y) = 0;
  /// combine(a, first, count, y), then out[i·rhs + r] = Σ conj(V_{first+i, r})·y_r of the updated y (dots()): the
  /// same results bit for bit. A host space does both in one pass over the basis (each row of y updated, then its
  /// dots taken while that row of the basis is still in cache: CGS2's pass-1 update and pass-2 projection); the
  /// default is the two calls.
  virtual void combine_dots(std::span<const Scalar> a, int first, int count, int y, std::span<Scalar> out) {
    combine(a, first, count, y);
    dots(first, count, y, out);
  }
  /// combine(a, first, count, y), then out[r] = ‖y_r‖ (norm()), the same bits; one pass on a host space.
  virtual void combine_norm(std::span<const Scalar> a, int first, int count, int y, std::span<double> out) {
    combine(a, first, count, y);
    norm(y, out);
  }
  /// y_r ← a[r]·y_r + b[r]·u_r + c[r]·w_r (y, u and w distinct), then, where `norms` is not empty, norms[r] = ‖y_r‖
  /// of the result. Where a[r] = 0, y_r must still hold finite numbers (0·y_r is taken; a host space does not read
  /// it there). A host space makes one pass over the three vectors (BiCGStab's updates: 3 or 4 vectors moved
  /// instead of up to 9); the default is separate calls: copy (every a 0 and b 1) or scale (unless every a is 1)
  /// and axpy, then axpy and norm.
  virtual void linear_update(std::span<const Scalar> a, int y, std::span<const Scalar> b, int u,
                             std::span<const Scalar> c, int w, std::span<double> norms) {
    const std::size_t n = layout_.rhs;
    const auto all = [n](std::span<const Scalar> s, double v) {
      for (std::size_t r = 0; r < n; ++r)
        if (s[r] != Scalar(v)) return false;
      return true;
    };
    if (all(a, 0) && all(b, 1)) {
      copy(u, y);
    } else {
      if (!all(a, 1)) scale(a, y);
      axpy(b, u, y);
    }
    axpy(c, w, y);
    if (!norms.empty()) norm(y, norms);
  }
  /// y ← x.
  virtual void copy(int x, int y) = 0;
  /// Vector i ← host data (layout().size() elements), and back.
  virtual void upload(std::span<const Complex> host, int i) = 0;
  virtual void download(int i, std::span<Complex> host) = 0;
  /// Vector i ← zero except element offset + k·stride = values[k] (host, k < values.size(); empty values: zero).
  /// A sparse vector's upload: only the values cross to a device (the background field, one order of each
  /// block). Waits for a device.
  virtual void upload_strided(std::span<const Complex> values, std::size_t offset, std::size_t stride, int i) = 0;
  /// Vector i ← 0.
  void zero(int i) { upload_strided({}, 0, 1, i); }

 protected:
  VectorSpace(const BatchLayout& layout, int count) : layout_(layout), count_(count) {}
  BatchLayout layout_;
  int count_;
};

/// Host vectors: OpenMP over slices; reductions in complex128, summed over a fixed partition of the
/// slices so that results do not depend on the number of threads.
template <class Real>
std::unique_ptr<VectorSpace<Real>> make_host_vector_space(const BatchLayout& layout, int count);

}  // namespace gratingsim::physics
