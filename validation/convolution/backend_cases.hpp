#pragma once
// Every backend against cpu-direct on fresh random data: the four problem cases of
// docs/convolution.md §5 (sizes N, L of Table 1, convolution/problem_cases.hpp; fewer slices so the
// O(N⁴) reference stays cheap) and odd shapes (N1 ≠ N2, N2 = 1, N = 1, non-minimal L, per_slice not a multiple of 3).
#include <complex>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"
#include "convolution/problem_cases.hpp"
#include "core/error.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"
#include "validation/support/run_convolution.hpp"

namespace gratingsim::test {

struct NamedGeometry {
  std::string name;
  conv::Problem geometry;
};

/// Problem case `number` of convolution/problem_cases.hpp (its N and L) with `slices` × `per_slice`
/// fields: fewer than the table's, so the O(N⁴) cpu-direct reference stays cheap.
inline NamedGeometry problem_case_geometry(int number, int slices, int per_slice) {
  const conv::ProblemCase& c = conv::problem_cases[number - 1];  // numbered 1, 2, ... in order
  return {"case " + std::to_string(number) + " (N " + std::to_string(c.n()) + ", L " + std::to_string(c.fft_size) + ")",
          {.n1 = c.n(), .n2 = c.n(), .l1 = c.fft_size, .l2 = c.fft_size, .slices = slices, .per_slice = per_slice}};
}

inline const std::vector<NamedGeometry>& backend_test_geometries() {
  static const std::vector<NamedGeometry> cases{
      problem_case_geometry(1, 3, 24),
      problem_case_geometry(2, 2, 24),
      problem_case_geometry(3, 2, 6),
      problem_case_geometry(4, 1, 3),
      {"N1 != N2 (7 x 3)", {.n1 = 7, .n2 = 3, .slices = 4, .per_slice = 5}},
      {"N1 < N2 (3 x 15)", {.n1 = 3, .n2 = 15, .slices = 2, .per_slice = 3}},
      {"non-square L (9 x 63 -> 16 x 128)", {.n1 = 9, .n2 = 63, .slices = 2, .per_slice = 2}},
      {"1D grating (21 x 1)", {.n1 = 21, .n2 = 1, .slices = 5, .per_slice = 6}},
      {"1D grating (63 x 1)", {.n1 = 63, .n2 = 1, .slices = 2, .per_slice = 3}},
      {"N = 1", {.n1 = 1, .n2 = 1, .slices = 3, .per_slice = 4}},
      {"N = 1, one field per slice", {.n1 = 1, .n2 = 1, .slices = 2, .per_slice = 1}},
      {"1D, one field per slice (3 x 1)", {.n1 = 3, .n2 = 1, .slices = 1, .per_slice = 1}},
      {"N1 = 1 (1 x 9)", {.n1 = 1, .n2 = 9, .slices = 2, .per_slice = 3}},
      {"non-minimal L (5 -> 16)", {.n1 = 5, .n2 = 5, .l1 = 16, .l2 = 16, .slices = 2, .per_slice = 3}},
  };
  return cases;
}

/// Kernels χ_p = δ(n − s) in every slice: the convolution then shifts each field by s.
inline std::vector<std::complex<double>> delta_kernels(const conv::Problem& g, int s1, int s2) {
  std::vector<std::complex<double>> k(g.kernels_total(), 0.0);
  const int k2 = 2 * g.n2 - 1;
  for (int p = 0; p < g.slices; ++p) k[p * g.kernel_size() + (s1 + g.n1 - 1) * k2 + (s2 + g.n2 - 1)] = 1.0;
  return k;
}

/// The exact result of delta_kernels(g, s1, s2), independent of every backend: out(m) = in(m − s)
/// inside the block, 0 where m − s leaves it.
template <class Real>
std::vector<std::complex<Real>> shifted_fields(const conv::Problem& g, const std::vector<std::complex<Real>>& in,
                                               int s1, int s2) {
  const int m1 = g.n1 / 2, m2 = g.n2 / 2;
  std::vector<std::complex<Real>> out(in.size());
  for (std::size_t b = 0; b < g.input_blocks(); ++b)
    for (int i1 = -m1; i1 <= m1; ++i1)
      for (int i2 = -m2; i2 <= m2; ++i2) {
        const int j1 = i1 - s1, j2 = i2 - s2;
        const bool inside = j1 >= -m1 && j1 <= m1 && j2 >= -m2 && j2 <= m2;
        out[b * g.field_size() + (i1 + m1) * g.n2 + (i2 + m2)] =
            inside ? in[b * g.field_size() + (j1 + m1) * g.n2 + (j2 + m2)] : std::complex<Real>{};
      }
  return out;
}

/// Relative tolerance by precision (‖out − ref‖₂/‖ref‖₂ per field block).
template <class Real>
constexpr double backend_tolerance() {
  return std::is_same_v<Real, float> ? 1e-5 : 1e-12;
}

/// Runs `backend` on fresh random kernels and fields and compares every block with cpu-direct in
/// complex128 on the same (rounded) inputs. Only gpu-direct (a small-N backend) may decline a shape,
/// and gpu-cufft-callbacks N1 = N2 = 1 (no transform to attach its callbacks to) (Unsupported: reported
/// as a warning); every other backend must serve every test geometry.
template <class Real>
void check_backend_against_direct(conv::Backend backend, const NamedGeometry& c) {
  using Complex = std::complex<Real>;
  const conv::Problem& g = c.geometry;
  INFO(std::string(conv::to_string(backend)) << " " << to_string(precision_of<Real>()) << ", "
                                             << c.name);
  // Kernels rounded to Real, so the complex128 reference sees exactly what the backend sees.
  const auto rounded = random_complex<Real>(g.kernels_total());
  const std::vector<std::complex<double>> kernels(rounded.begin(), rounded.end());
  const std::vector<Complex> in = random_complex<Real>(g.input_size());
  const std::vector<std::complex<double>> in_wide(in.begin(), in.end());

  std::unique_ptr<conv::Convolution<Real>> plan;
  try {
    plan = conv::make_convolution<Real>(backend, g, kernels);
  } catch (const Unsupported& e) {
    const bool may_decline = backend == conv::Backend::gpu_direct ||
                             (backend == conv::Backend::gpu_cufft_callbacks && g.n1 == 1 && g.n2 == 1);
    if (!may_decline) throw;
    WARN(conv::to_string(backend) << " declines this shape: " << e.what());
    return;
  }
  auto reference = conv::make_convolution<double>(conv::Backend::cpu_direct, g, kernels);
  std::vector<std::complex<double>> expect;
  run_on_host(*reference, in_wide, expect);

  std::vector<Complex> out;
  for (int repeat = 0; repeat < 2; ++repeat) {  // the second run checks that execute() is repeatable
    run_on_host(*plan, in, out);
    REQUIRE(l2_norm<Real>(out) > 0);
    double worst = 0;
    for (std::size_t b = 0; b < g.input_blocks(); ++b) {
      const auto n = g.field_size();
      worst = std::max(worst, relative_l2<Real, double>(std::span(out).subspan(b * n, n),
                                                        std::span(expect).subspan(b * n, n)));
    }
    INFO("worst block relative error " << worst);
    CHECK(worst <= backend_tolerance<Real>());
  }
}

}  // namespace gratingsim::test
