#pragma once
// Problems with K kernels and a sparse P×Q pattern (convolution.hpp): the normal-vector patterns physics
// uses (2D: K = 7, P = 5, Q = 3; 1D: K = 3, P = 4, Q = 3; 2D tilted: K = 12, P = 6, Q = 3), random patterns, and the
// shapes they are tested on; every backend's pattern results against cpu-direct on fresh random data,
// and cpu-direct's pattern sums against an independent reference: one scalar cpu-direct convolution
// per term, summed.
#include <algorithm>
#include <complex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"
#include "core/error.hpp"
#include "validation/convolution/backend_cases.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"
#include "validation/support/run_convolution.hpp"

namespace gratingsim::test {

/// A problem's K, P, Q and pattern, without sizes.
struct Pattern {
  std::string name;
  int kernels = 1, inputs = 1, outputs = 1;
  std::vector<conv::Term> terms;
};

/// The 2D normal-vector pattern: inputs F_x, F_y, F_z; kernels χ, C_xx, C_xy, C_yy, γn_x², γn_xn_y, γn_y²;
/// outputs J_x, J_y, J_z, D_x, D_y.
inline Pattern normal_vector_pattern() {
  return {"NV 2D (K 7, P 5, Q 3)", 7, 3, 5,
          {{0, 0, 1}, {0, 1, 2}, {1, 0, 2}, {1, 1, 3}, {2, 2, 0}, {3, 0, 4}, {3, 1, 5}, {4, 0, 5}, {4, 1, 6}}};
}

/// The 1D normal-vector pattern (n = x̂): kernels χ, C_xx, γ; outputs J_x, J_y, J_z, D_x.
inline Pattern normal_vector_1d_pattern() {
  return {"NV 1D (K 3, P 4, Q 3)", 3, 3, 4, {{0, 0, 1}, {1, 1, 0}, {2, 2, 0}, {3, 0, 2}}};
}

/// The 2D tilted normal-vector pattern (n with an out-of-plane part): kernels C_xx, C_xy, C_xz, C_yy, C_yz,
/// C_zz, then γ n_i n_j in that order; outputs J_x, J_y, J_z = C F, D_x, D_y, D_z = γ n nᵀ F (18 terms).
inline Pattern normal_vector_tilted_pattern() {
  return {"NV 2D tilted (K 12, P 6, Q 3)", 12, 3, 6,
          {{0, 0, 0}, {0, 1, 1}, {0, 2, 2}, {1, 0, 1}, {1, 1, 3}, {1, 2, 4}, {2, 0, 2}, {2, 1, 4}, {2, 2, 5},
           {3, 0, 6}, {3, 1, 7}, {3, 2, 8}, {4, 0, 7}, {4, 1, 9}, {4, 2, 10}, {5, 0, 8}, {5, 1, 10}, {5, 2, 11}}};
}

/// A random pattern: K, P, Q uniform in 1..4, each (output, input) pair a term with probability 1/2
/// and a random kernel, an output left without a term given one on a random input.
inline Pattern random_pattern() {
  std::uniform_int_distribution<int> count(1, 4);
  Pattern p;
  p.kernels = count(rng());
  p.inputs = count(rng());
  p.outputs = count(rng());
  std::bernoulli_distribution coin(0.5);
  std::uniform_int_distribution<int> kernel(0, p.kernels - 1), input(0, p.inputs - 1);
  for (int o = 0; o < p.outputs; ++o) {
    const std::size_t before = p.terms.size();
    for (int q = 0; q < p.inputs; ++q)
      if (coin(rng())) p.terms.push_back({o, q, kernel(rng())});
    if (p.terms.size() == before) p.terms.push_back({o, input(rng()), kernel(rng())});
  }
  p.name = "random (K " + std::to_string(p.kernels) + ", P " + std::to_string(p.outputs) + ", Q " +
           std::to_string(p.inputs) + ", terms";
  for (const auto& t : p.terms)
    p.name += " (" + std::to_string(t.output) + "," + std::to_string(t.input) + "," + std::to_string(t.kernel) + ")";
  p.name += ")";
  return p;
}

/// The NV patterns and three fresh random ones.
inline std::vector<Pattern> test_patterns() {
  return {normal_vector_pattern(), normal_vector_1d_pattern(), normal_vector_tilted_pattern(), random_pattern(),
          random_pattern(), random_pattern()};
}

/// Shapes the patterns are tested on: 2D square, odd and mixed N1 ≠ N2, L above the minimal, 1D gratings
/// (N2 = 1), N = 1, one group per slice. Small enough that the O(N⁴) reference stays cheap.
inline const std::vector<NamedGeometry>& pattern_test_shapes() {
  static const std::vector<NamedGeometry> shapes{
      {"2D 7 x 7 (L 16)", {.n1 = 7, .n2 = 7, .slices = 2, .per_slice = 4}},
      {"2D mixed 5 x 9 (L 16 x 32)", {.n1 = 5, .n2 = 9, .slices = 3, .per_slice = 2}},
      {"2D mixed 11 x 3 (L 32 x 8)", {.n1 = 11, .n2 = 3, .slices = 2, .per_slice = 3}},
      {"2D non-minimal L (5 x 3 -> 16 x 12)", {.n1 = 5, .n2 = 3, .l1 = 16, .l2 = 12, .slices = 2, .per_slice = 3}},
      {"2D odd L (3 x 5 -> 7 x 11)", {.n1 = 3, .n2 = 5, .l1 = 7, .l2 = 11, .slices = 2, .per_slice = 2}},
      {"1D 15 x 1 (L 32)", {.n1 = 15, .n2 = 1, .slices = 3, .per_slice = 5}},
      {"1D non-minimal L (9 x 1 -> 32 x 1)", {.n1 = 9, .n2 = 1, .l1 = 32, .slices = 2, .per_slice = 3}},
      {"N = 1", {.n1 = 1, .n2 = 1, .slices = 3, .per_slice = 2}},
      {"one group per slice (9 x 7)", {.n1 = 9, .n2 = 7, .slices = 4, .per_slice = 1}},
  };
  return shapes;
}

/// `shape` with `pattern`'s K, P, Q and terms.
inline conv::Problem with_pattern(conv::Problem shape, const Pattern& pattern) {
  shape.kernels = pattern.kernels;
  shape.inputs = pattern.inputs;
  shape.outputs = pattern.outputs;
  shape.pattern = pattern.terms;
  return shape;
}

/// The pattern's outputs as a sum of scalar cpu-direct convolutions, one scalar problem per term (o, q, k):
/// its fields are input q of every group, its kernels kernel k of every slice; its result is added to
/// output o. Independent of how any backend walks a pattern.
inline std::vector<std::complex<double>> sum_of_scalar_convolutions(const conv::Problem& problem,
                                                                    std::span<const std::complex<double>> kernels,
                                                                    std::span<const std::complex<double>> in) {
  const conv::Problem g = conv::resolve(problem);
  const std::size_t field = g.field_size(), kernel = g.kernel_size();
  const conv::Problem scalar = conv::scalar_problem(g.n1, g.n2, g.slices, g.per_slice);
  std::vector<std::complex<double>> out(g.output_size(), 0.0);
  for (const conv::Term& t : g.pattern) {
    std::vector<std::complex<double>> term_kernels(scalar.kernels_total()), term_in(scalar.input_size()), term_out;
    for (int p = 0; p < g.slices; ++p)
      std::copy_n(kernels.begin() + (std::size_t(p) * g.kernels + t.kernel) * kernel, kernel,
                  term_kernels.begin() + std::size_t(p) * kernel);
    for (std::size_t group = 0; group < g.groups(); ++group)
      std::copy_n(in.begin() + (group * g.inputs + t.input) * field, field, term_in.begin() + group * field);
    auto plan = conv::make_convolution<double>(conv::Backend::cpu_direct, scalar, term_kernels);
    run_on_host(*plan, term_in, term_out);
    for (std::size_t group = 0; group < g.groups(); ++group)
      for (std::size_t i = 0; i < field; ++i) out[(group * g.outputs + t.output) * field + i] += term_out[group * field + i];
  }
  return out;
}


/// Fresh random kernels and fields (rounded to Real, so that the complex128 reference sees what the
/// backend sees) and cpu-direct's result on them in complex128.
template <class Real>
struct PatternData {
  std::vector<std::complex<double>> kernels;
  std::vector<std::complex<Real>> in;
  std::vector<std::complex<double>> expect;
};

template <class Real>
PatternData<Real> pattern_data(const conv::Problem& g) {
  PatternData<Real> d;
  const auto rounded = random_complex<Real>(g.kernels_total());
  d.kernels.assign(rounded.begin(), rounded.end());
  d.in = random_complex<Real>(g.input_size());
  const std::vector<std::complex<double>> in_wide(d.in.begin(), d.in.end());
  auto reference = conv::make_convolution<double>(conv::Backend::cpu_direct, g, d.kernels);
  run_on_host(*reference, in_wide, d.expect);
  return d;
}

/// Runs `plan` (run_on_host: outputs poisoned with NaN first) twice on the data and checks every output
/// block against cpu-direct within the precision's tolerance.
template <class Real>
void check_plan_against_direct(conv::Convolution<Real>& plan, const PatternData<Real>& d) {
  const conv::Problem& g = plan.problem();
  std::vector<std::complex<Real>> out;
  for (int repeat = 0; repeat < 2; ++repeat) {  // the second run checks that execute() is repeatable
    run_on_host(plan, d.in, out);
    REQUIRE(l2_norm<Real>(out) > 0);
    const double worst = worst_block_error<Real>(g, out, d.expect);
    INFO("worst output-block relative error " << worst);
    CHECK(worst <= backend_tolerance<Real>());
  }
}

/// `backend` (through make_convolution) against cpu-direct for every test pattern on every test shape.
/// The backend must accept every one of them (gpu-direct's N1·N2 limit is far above these shapes), but
/// for gpu-cufft-callbacks' refusal of N1 = N2 = 1, which has no transform for its callbacks.
template <class Real>
void check_patterns_against_direct(conv::Backend backend) {
  for (const Pattern& pattern : test_patterns())
    for (const NamedGeometry& shape : pattern_test_shapes()) {
      const conv::Problem g = with_pattern(shape.geometry, pattern);
      INFO(conv::to_string(backend) << " " << to_string(precision_of<Real>()) << ", " << pattern.name
                                    << ", " << shape.name);
      const auto support = conv::traits(backend).can_implement(conv::resolve(g), precision_of<Real>());
      INFO("can_implement: " << support.reason);
      if (backend == conv::Backend::gpu_cufft_callbacks && g.n1 == 1 && g.n2 == 1) {
        CHECK_FALSE(support.ok);
        continue;
      }
      REQUIRE(support.ok);
      const auto data = pattern_data<Real>(g);
      auto plan = conv::make_convolution<Real>(backend, g, data.kernels);
      check_plan_against_direct(*plan, data);
    }
}

}  // namespace gratingsim::test
