// cpu-direct: the defining sums out_{g,o}(m) = Σ_{terms (o, q, k)} Σ_{m'} χ_k(m − m') in_{g,q}(m'),
// accumulated in complex128. O(N1²·N2²) per term and group: slow and obviously correct, the reference
// for every other backend.
#include <vector>

#include "convolution/backends.hpp"

namespace gratingsim::conv::detail {
namespace {

template <class Real>
class CpuDirect final : public Convolution<Real> {
 public:
  using typename Convolution<Real>::Complex;
  CpuDirect(const Problem& g, Kernels kernels) : Convolution<Real>(g), kernels_(g.kernels_total()) {
    set_kernels(kernels);
  }

  void set_kernels(Kernels kernels) override {
    check_kernels(this->problem_, kernels);
    for (std::size_t i = 0; i < kernels.size(); ++i) kernels_[i] = Complex(kernels[i]);
  }

  void execute(const Complex* in, Complex* out, Stream) override {
    const Problem& g = this->problem_;
    const int n1 = g.n1, n2 = g.n2, k2 = 2 * n2 - 1;
    const std::size_t field = g.field_size();
    const auto blocks = static_cast<std::ptrdiff_t>(g.output_blocks());
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t b = 0; b < blocks; ++b) {
      const std::ptrdiff_t group = b / g.outputs, slice = group / g.per_slice;
      const int o = int(b % g.outputs);
      Complex* y = out + b * field;
      std::vector<std::complex<double>> sum(field, 0.0);
      for (const Term& t : g.pattern) {
        if (t.output != o) continue;
        const Complex* chi = kernels_.data() + (slice * g.kernels + t.kernel) * g.kernel_size();
        const Complex* x = in + (group * g.inputs + t.input) * field;
        for (int i1 = 0; i1 < n1; ++i1)
          for (int i2 = 0; i2 < n2; ++i2) {
            std::complex<double>& s = sum[std::size_t(i1) * n2 + i2];
            // χ index of (m − m') is (i1 − j1 + N1 − 1, i2 − j2 + N2 − 1) with i, j the 0-based indices.
            for (int j1 = 0; j1 < n1; ++j1) {
              const Complex* chi_row = chi + (i1 - j1 + n1 - 1) * k2 + i2 + n2 - 1;
              const Complex* x_row = x + j1 * n2;
              for (int j2 = 0; j2 < n2; ++j2)
                s += std::complex<double>(chi_row[-j2]) * std::complex<double>(x_row[j2]);
            }
          }
      }
      for (std::size_t i = 0; i < field; ++i) y[i] = Complex(sum[i]);
    }
  }

  [[nodiscard]] Backend backend() const override { return Backend::cpu_direct; }

 private:
  std::vector<Complex> kernels_;  // rounded to the working precision, as every other backend sees them
};
}  // namespace

Support can_implement_cpu_direct(const Problem&, Precision) { return {}; }
std::size_t workspace_cpu_direct(const Problem& g, Precision precision) {
  return g.kernels_total() * (precision == Precision::single ? 8 : 16);
}

template <class Real>
Plan<Real> make_cpu_direct(const Problem& g, Kernels kernels) {
  return std::make_unique<CpuDirect<Real>>(g, kernels);
}
template Plan<float> make_cpu_direct<float>(const Problem&, Kernels);
template Plan<double> make_cpu_direct<double>(const Problem&, Kernels);
}  // namespace gratingsim::conv::detail
