// cpu-direct: the defining sum out(m) = Σ_{m'} χ(m − m') in(m'), accumulated in complex128.
// O(N1²·N2²) per block: slow and obviously correct, the reference for every other backend.
#include <vector>

#include "convolution/backends.hpp"

namespace gratingsim::conv::detail {
namespace {

template <class Real>
class CpuDirect final : public Convolution<Real> {
 public:
  using typename Convolution<Real>::Complex;
  CpuDirect(const Geometry& g, Kernels kernels) : Convolution<Real>(g), kernels_(g.kernels_total()) {
    set_kernels(kernels);
  }

  void set_kernels(Kernels kernels) override {
    check_kernels(this->geometry_, kernels);
    for (std::size_t i = 0; i < kernels.size(); ++i) kernels_[i] = Complex(kernels[i]);
  }

  void execute(const Complex* in, Complex* out, Stream) override {
    const Geometry& g = this->geometry_;
    const int n1 = g.n1, n2 = g.n2, k2 = 2 * n2 - 1;
    const auto batch = static_cast<std::ptrdiff_t>(g.batch());
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t b = 0; b < batch; ++b) {
      const Complex* chi = kernels_.data() + (b / g.per_slice) * g.kernel_size();
      const Complex* x = in + b * g.field_size();
      Complex* y = out + b * g.field_size();
      for (int i1 = 0; i1 < n1; ++i1)
        for (int i2 = 0; i2 < n2; ++i2) {
          std::complex<double> sum = 0;
          // χ index of (m − m') is (i1 − j1 + N1 − 1, i2 − j2 + N2 − 1) with i, j the 0-based indices.
          for (int j1 = 0; j1 < n1; ++j1) {
            const Complex* chi_row = chi + (i1 - j1 + n1 - 1) * k2 + i2 + n2 - 1;
            const Complex* x_row = x + j1 * n2;
            for (int j2 = 0; j2 < n2; ++j2)
              sum += std::complex<double>(chi_row[-j2]) * std::complex<double>(x_row[j2]);
          }
          y[i1 * n2 + i2] = Complex(sum);
        }
    }
  }

  [[nodiscard]] Backend backend() const override { return Backend::cpu_direct; }

 private:
  std::vector<Complex> kernels_;  // rounded to the working precision, as every other backend sees them
};
}  // namespace

template <class Real>
Plan<Real> make_cpu_direct(const Geometry& g, Kernels kernels) {
  return std::make_unique<CpuDirect<Real>>(g, kernels);
}
template Plan<float> make_cpu_direct<float>(const Geometry&, Kernels);
template Plan<double> make_cpu_direct<double>(const Geometry&, Kernels);
}  // namespace gratingsim::conv::detail
