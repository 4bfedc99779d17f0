#include "physics/vector_space.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "convolution/error.hpp"

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
      : VectorSpace<Real>(layout, count), storage_(layout.size() * std::size_t(count)) {}

  Complex* data(int i) override { return storage_.data() + std::size_t(i) * this->layout_.size(); }
  [[nodiscard]] conv::Memory memory() const override { return conv::Memory::host; }

  void dot(int x, int y, std::span<Scalar> out) override {
    const BatchLayout& l = this->layout_;
    const Complex *a = data(x), *b = data(y);
    for (std::size_t r = 0; r < l.rhs; ++r) {
      Scalar sum = 0;
      for (std::size_t p = 0; p < l.slices; ++p) {
        const std::size_t off = (p * l.rhs + r) * l.block;
        for (std::size_t j = 0; j < l.block; ++j) sum += std::conj(Scalar(a[off + j])) * Scalar(b[off + j]);
      }
      out[r] = sum;
    }
  }

  void norm(int x, std::span<double> out) override {
    const BatchLayout& l = this->layout_;
    const Complex* a = data(x);
    for (std::size_t r = 0; r < l.rhs; ++r) {
      double sum = 0;
      for (std::size_t p = 0; p < l.slices; ++p) {
        const std::size_t off = (p * l.rhs + r) * l.block;
        for (std::size_t j = 0; j < l.block; ++j) sum += std::norm(Scalar(a[off + j]));
      }
      out[r] = std::sqrt(sum);
    }
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

  void copy(int x, int y) override {
    const Complex* u = data(x);
    std::copy(u, u + this->layout_.size(), data(y));
  }

  void upload(std::span<const Complex> host, int i) override {
    EXPECTS(host.size() == this->layout_.size(), "upload: size mismatch");
    std::copy(host.begin(), host.end(), data(i));
  }
  void download(int i, std::span<Complex> host) override {
    EXPECTS(host.size() == this->layout_.size(), "download: size mismatch");
    const Complex* u = data(i);
    std::copy(u, u + this->layout_.size(), host.begin());
  }

 private:
  std::vector<Complex> storage_;
};

}  // namespace

template <class Real>
std::unique_ptr<VectorSpace<Real>> make_host_vector_space(const BatchLayout& layout, int count) {
  EXPECTS(count >= 1 && layout.size() > 0, "vector space: empty layout or count");
  return std::make_unique<HostVectorSpace<Real>>(layout, count);
}
template std::unique_ptr<VectorSpace<float>> make_host_vector_space<float>(const BatchLayout&, int);
template std::unique_ptr<VectorSpace<double>> make_host_vector_space<double>(const BatchLayout&, int);

}  // namespace gratingsim::physics
