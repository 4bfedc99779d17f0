// Problems with patterns (convolution.hpp), independent of any FFT backend: cpu-direct's pattern sums
// against one scalar cpu-direct convolution per term, summed; resolve()'s refusals of bad patterns; the
// backend table's answers (can_implement, workspace_bytes) for patterns.
#include <complex>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"
#include "core/error.hpp"
#include "validation/convolution/pattern_cases.hpp"

using namespace gratingsim;
using conv::Backend;
using conv::Problem;
using conv::Term;

TEMPLATE_TEST_CASE("cpu-direct's pattern sums equal a sum of scalar cpu-direct convolutions",
                   "[convolution][cpu-direct][pattern]", float, double) {
  for (const test::Pattern& pattern : test::test_patterns())
    for (const test::NamedGeometry& shape : test::pattern_test_shapes()) {
      const Problem g = test::with_pattern(shape.geometry, pattern);
      INFO(to_string(precision_of<TestType>()) << ", " << pattern.name << ", " << shape.name);
      const auto rounded = test::random_complex<TestType>(g.kernels_total());
      const std::vector<std::complex<double>> kernels(rounded.begin(), rounded.end());
      const auto in = test::random_complex<TestType>(g.input_size());
      const std::vector<std::complex<double>> in_wide(in.begin(), in.end());
      const auto expect = test::sum_of_scalar_convolutions(g, kernels, in_wide);
      auto plan = conv::make_convolution<TestType>(Backend::cpu_direct, g, kernels);
      std::vector<std::complex<TestType>> out;
      test::run_on_host(*plan, in, out);  // poisoned first
      REQUIRE(test::l2_norm<TestType>(out) > 0);
      // Both sum in complex128; complex64 rounds the result once.
      CHECK(test::worst_block_error<TestType>(g, out, expect) <= (std::is_same_v<TestType, float> ? 1e-6 : 1e-13));
    }
}

TEST_CASE("the sum of scalar convolutions is itself right: a pattern of delta kernels shifts and adds",
          "[convolution][pattern]") {
  // Kernel 0 = δ(n − (1, 0)), kernel 1 = δ(n − (0, −2)) in every slice: out(m) = in(m − s) inside the
  // block. Output 0 = in_0 shifted by (1, 0) + in_1 shifted by (0, −2); output 1 = in_1 shifted by (1, 0).
  const Problem g{.n1 = 7, .n2 = 5, .slices = 2, .per_slice = 3, .kernels = 2, .inputs = 2, .outputs = 2,
                  .pattern = {{0, 0, 0}, {0, 1, 1}, {1, 1, 0}}};
  std::vector<std::complex<double>> kernels(g.kernels_total(), 0.0);
  const int k2 = 2 * g.n2 - 1;
  const auto put = [&](int slice, int k, int s1, int s2) {
    kernels[(std::size_t(slice) * g.kernels + k) * g.kernel_size() + (s1 + g.n1 - 1) * k2 + (s2 + g.n2 - 1)] = 1.0;
  };
  for (int p = 0; p < g.slices; ++p) {
    put(p, 0, 1, 0);
    put(p, 1, 0, -2);
  }
  const auto in = test::random_complex<double>(g.input_size());
  const auto out = test::sum_of_scalar_convolutions(g, kernels, in);
  const int m1 = g.n1 / 2, m2 = g.n2 / 2;
  const auto at = [&](const std::vector<std::complex<double>>& v, std::size_t block, int i1, int i2) {
    const bool inside = i1 >= -m1 && i1 <= m1 && i2 >= -m2 && i2 <= m2;
    return inside ? v[block * g.field_size() + (i1 + m1) * g.n2 + (i2 + m2)] : std::complex<double>{};
  };
  for (std::size_t group = 0; group < g.groups(); ++group)
    for (int i1 = -m1; i1 <= m1; ++i1)
      for (int i2 = -m2; i2 <= m2; ++i2) {
        const auto o0 = at(in, group * 2 + 0, i1 - 1, i2) + at(in, group * 2 + 1, i1, i2 + 2);
        const auto o1 = at(in, group * 2 + 1, i1 - 1, i2);
        REQUIRE(at(out, group * 2 + 0, i1, i2) == o0);
        REQUIRE(at(out, group * 2 + 1, i1, i2) == o1);
      }
}

TEST_CASE("resolve refuses bad patterns, naming the term", "[convolution][pattern]") {
  const Problem nv = test::with_pattern(Problem{.n1 = 5, .n2 = 5}, test::normal_vector_pattern());
  CHECK_NOTHROW(conv::resolve(nv));
  const auto refused = [](Problem g, const std::string& fragment) {
    INFO("expected a refusal mentioning '" << fragment << "'");
    try {
      conv::resolve(g);
      FAIL("resolve accepted the pattern");
    } catch (const InvalidArgument& e) {
      CHECK_THAT(e.what(), Catch::Contains(fragment));
    }
  };
  Problem g = nv;
  g.pattern.push_back({5, 0, 0});  // output out of range (P = 5)
  refused(g, "(output 5, input 0, kernel 0) is out of range");
  g = nv;
  g.pattern.push_back({0, 3, 0});  // input out of range (Q = 3)
  refused(g, "out of range");
  g = nv;
  g.pattern[0].kernel = 7;  // kernel out of range (K = 7)
  refused(g, "kernel 7) is out of range");
  g = nv;
  g.pattern.push_back({-1, 0, 0});
  refused(g, "out of range");
  g = nv;
  g.pattern.push_back({0, 0, 3});  // (0, 0) again, with another kernel
  refused(g, "repeats its (output, input) pair");
  g = nv;
  g.pattern.erase(g.pattern.begin() + 4);  // (2, 2, 0): J_z's only term
  refused(g, "output 2 has no term");
  g = nv;
  g.pattern.clear();
  refused(g, "output 0 has no term");
  CHECK_THROWS_AS(conv::resolve(Problem{.kernels = 0}), InvalidArgument);
  CHECK_THROWS_AS(conv::resolve(Problem{.inputs = 0}), InvalidArgument);
  CHECK_THROWS_AS(conv::resolve(Problem{.outputs = 0}), InvalidArgument);
  // A kernel nobody uses and an input nobody reads are allowed (the pattern need not be dense).
  CHECK_NOTHROW(conv::resolve(Problem{.kernels = 3, .inputs = 2, .outputs = 1, .pattern = {{0, 1, 2}}}));
  // make_convolution refuses the same, and a kernel array of the wrong size for K.
  const std::vector<std::complex<double>> kernels(nv.kernels_total(), 1.0);
  g = nv;
  g.pattern.push_back({0, 0, 3});
  CHECK_THROWS_AS(conv::make_convolution<double>(Backend::cpu_direct, g, kernels), InvalidArgument);
  CHECK_THROWS_AS(conv::make_convolution<double>(Backend::cpu_fftw, nv, std::span(kernels).first(kernels.size() - 1)),
                  InvalidArgument);
}

TEST_CASE("the backend table's answers for patterns", "[convolution][pattern]") {
  const Problem nv = conv::resolve(test::with_pattern(Problem{.n1 = 15, .n2 = 15, .slices = 4, .per_slice = 6},
                                                      test::normal_vector_pattern()));
  const Problem big = conv::resolve(test::with_pattern(Problem{.n1 = 63, .n2 = 63, .slices = 2, .per_slice = 6},
                                                       test::normal_vector_1d_pattern()));
  const Problem scalar = conv::resolve(conv::scalar_problem(15, 15, 4, 18));
  for (auto precision : {Precision::single, Precision::double_}) {
    INFO(to_string(precision));
    // The CPU backends serve every valid problem.
    for (Backend b : {Backend::cpu_direct, Backend::cpu_fftw})
      for (const Problem& g : {nv, big, scalar}) CHECK(conv::traits(b).can_implement(g, precision).ok);
    for (Backend b : {Backend::gpu_cufft, Backend::gpu_cufft_callbacks, Backend::gpu_fused, Backend::gpu_direct}) {
      INFO(conv::to_string(b));
      if (!conv::backend_available(b)) {  // no CUDA in this build, or no device: refused with the reason
        const auto s = conv::traits(b).can_implement(nv, precision);
        CHECK_FALSE(s.ok);
        CHECK_FALSE(s.reason.empty());
      }
    }
    if (conv::backend_available(Backend::gpu_cufft)) {
      CHECK(conv::traits(Backend::gpu_cufft).can_implement(nv, precision).ok);
      CHECK(conv::traits(Backend::gpu_cufft).can_implement(big, precision).ok);
    }
    if (conv::backend_available(Backend::gpu_cufft_callbacks)) {  // any pattern, as gpu-cufft (a callback route permitting)
      CHECK(conv::traits(Backend::gpu_cufft_callbacks).can_implement(nv, precision).ok);
      CHECK(conv::traits(Backend::gpu_cufft_callbacks).can_implement(big, precision).ok);
    }
    if (conv::backend_available(Backend::gpu_fused)) {  // any pattern whose sets fit in shared memory
      CHECK(conv::traits(Backend::gpu_fused).can_implement(nv, precision).ok);
      CHECK(conv::traits(Backend::gpu_fused).can_implement(big, precision).ok);  // one input per output
    }
    if (conv::backend_available(Backend::gpu_direct)) {
      CHECK(conv::traits(Backend::gpu_direct).can_implement(nv, precision).ok);
      const auto s = conv::traits(Backend::gpu_direct).can_implement(big, precision);  // N1·N2 = 3969 > 961
      CHECK_FALSE(s.ok);
      CHECK_THAT(s.reason, Catch::Contains("N1*N2 <= 961"));
    }

    // Workspace: the kernel spectra grow with K, cpu-fftw's per-thread arrays with Q (and the sum array).
    const std::size_t c = precision == Precision::single ? 8 : 16;
    CHECK(conv::traits(Backend::cpu_direct).workspace_bytes(nv, precision) == nv.kernels_total() * c);
    const std::size_t area = std::size_t(nv.l1) * nv.l2;
    const auto fftw_nv = conv::traits(Backend::cpu_fftw).workspace_bytes(nv, precision);
    Problem nv_one_slice = nv;
    nv_one_slice.slices = 1;
    const auto fftw_one_slice = conv::traits(Backend::cpu_fftw).workspace_bytes(nv_one_slice, precision);
    CHECK(fftw_nv - fftw_one_slice == std::size_t(nv.slices - 1) * nv.kernels * area * c);  // slices·K spectra
    CHECK(fftw_one_slice > std::size_t(nv.kernels + nv.inputs + 1) * area * c);  // + Q inputs and the sum, per thread
    for (Backend b : {Backend::gpu_cufft, Backend::gpu_cufft_callbacks, Backend::gpu_fused, Backend::gpu_direct})
      if (conv::backend_available(b)) CHECK(conv::traits(b).workspace_bytes(nv, precision) >= nv.kernels_total() * c);
  }
}
