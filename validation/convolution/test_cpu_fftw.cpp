// cpu-fftw, pruned and unpruned, against cpu-direct (complex128) on fresh random data; repeated
// execute; set_kernels; the OpenMP team growing after planning; planning options from the environment;
// the wisdom file round trip (a child process plans from the saved file alone); problems with patterns
// (the NV patterns and random ones, pruned and unpruned) against cpu-direct.
#include <omp.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>

#include "convolution/cpu_fftw.hpp"
#include "core/error.hpp"
#include "validation/convolution/backend_cases.hpp"
#include "validation/convolution/pattern_cases.hpp"

using namespace gratingsim;
using conv::FftwOptions;
using conv::FftwPlanning;
using conv::Problem;

namespace {

constexpr FftwOptions pruned{.prune_zero_rows = true, .planning = FftwPlanning::estimate};
constexpr FftwOptions unpruned{.prune_zero_rows = false, .planning = FftwPlanning::estimate};

/// Random kernels already rounded to Real, so the complex128 reference sees what the backend sees.
template <class Real>
std::vector<std::complex<double>> random_kernels(const Problem& g) {
  const auto rounded = test::random_complex<Real>(g.kernels_total());
  return {rounded.begin(), rounded.end()};
}

/// Fresh random fields and their convolution by cpu-direct in complex128.
template <class Real>
struct DirectReference {
  std::vector<std::complex<Real>> in;
  std::vector<std::complex<double>> expect;
};

template <class Real>
DirectReference<Real> direct_reference(const Problem& g, const std::vector<std::complex<double>>& kernels) {
  DirectReference<Real> r{test::random_complex<Real>(g.input_size()), {}};
  const std::vector<std::complex<double>> in_wide(r.in.begin(), r.in.end());
  auto direct = conv::make_convolution<double>(conv::Backend::cpu_direct, g, kernels);
  test::run_on_host(*direct, in_wide, r.expect);
  return r;
}

/// Runs `plan` on the reference's fields and returns the worst per-block relative error.
template <class Real>
double worst_error(conv::Convolution<Real>& plan, const DirectReference<Real>& reference) {
  const Problem& g = plan.problem();
  std::vector<std::complex<Real>> out;
  test::run_on_host(plan, reference.in, out);
  REQUIRE(test::l2_norm<Real>(out) > 0);
  double worst = 0;
  const auto n = g.field_size();
  for (std::size_t b = 0; b < g.input_blocks(); ++b)
    worst = std::max(worst, test::relative_l2<Real, double>(std::span(out).subspan(b * n, n),
                                                            std::span(reference.expect).subspan(b * n, n)));
  return worst;
}

/// The same on fresh random fields.
template <class Real>
double worst_error_against_direct(conv::Convolution<Real>& plan, const std::vector<std::complex<double>>& kernels) {
  return worst_error(plan, direct_reference<Real>(plan.problem(), kernels));
}

/// Shapes beyond the shared harness: non-power-of-two and odd L, many slices of one field each.
const std::vector<test::NamedGeometry>& extra_geometries() {
  static const std::vector<test::NamedGeometry> cases{
      {"odd L (5 x 3 -> 9 x 7)", {.n1 = 5, .n2 = 3, .l1 = 9, .l2 = 7, .slices = 3, .per_slice = 4}},
      {"L 24 x 20 (11 x 9)", {.n1 = 11, .n2 = 9, .l1 = 24, .l2 = 20, .slices = 2, .per_slice = 3}},
      {"one field per slice", {.n1 = 7, .n2 = 7, .slices = 9, .per_slice = 1}},
      {"1D grating, non-minimal L (9 x 1 -> 32 x 3)",
       {.n1 = 9, .n2 = 1, .l1 = 32, .l2 = 3, .slices = 2, .per_slice = 3}},
  };
  return cases;
}

/// Sets an environment variable for one scope, restoring the previous value (or its absence) after.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string read_text(const std::filesystem::path& file) {
  std::ifstream stream(file, std::ios::binary);
  std::ostringstream text;
  text << stream.rdbuf();
  return text.str();
}

/// The geometry the wisdom round trip plans (and the child process re-plans from wisdom alone).
const Problem wisdom_geometry{.n1 = 5, .n2 = 3, .slices = 2, .per_slice = 3};

}  // namespace

TEMPLATE_TEST_CASE("cpu-fftw pruned and unpruned equal cpu-direct", "[convolution][cpu-fftw]", float, double) {
  std::vector<test::NamedGeometry> cases = test::backend_test_geometries();
  cases.insert(cases.end(), extra_geometries().begin(), extra_geometries().end());
  for (const auto& c : cases) {
    const auto kernels = random_kernels<TestType>(c.geometry);
    const auto reference = direct_reference<TestType>(c.geometry, kernels);
    for (const auto& options : {pruned, unpruned}) {
      INFO(c.name << (options.prune_zero_rows ? ", pruned" : ", unpruned"));
      auto plan = conv::make_fftw_convolution<TestType>(c.geometry, kernels, options);
      CHECK(plan->backend() == conv::Backend::cpu_fftw);
      CHECK(worst_error(*plan, reference) <= test::backend_tolerance<TestType>());
    }
  }
}

TEMPLATE_TEST_CASE("cpu-fftw repeated execute and set_kernels", "[convolution][cpu-fftw]", float, double) {
  const Problem g{.n1 = 15, .n2 = 7, .slices = 3, .per_slice = 5};
  for (const auto& options : {pruned, unpruned}) {
    INFO((options.prune_zero_rows ? "pruned" : "unpruned"));
    const auto first = random_kernels<TestType>(g);
    auto plan = conv::make_fftw_convolution<TestType>(g, first, options);
    // Each run leaves non-zero data in the work arrays' padding rows: later runs must not see it.
    for (int repeat = 0; repeat < 3; ++repeat)
      CHECK(worst_error_against_direct(*plan, first) <= test::backend_tolerance<TestType>());
    const auto second = random_kernels<TestType>(g);
    plan->set_kernels(second);
    CHECK(worst_error_against_direct(*plan, second) <= test::backend_tolerance<TestType>());
    plan->set_kernels(first);
    CHECK(worst_error_against_direct(*plan, first) <= test::backend_tolerance<TestType>());
    CHECK_THROWS_AS(plan->set_kernels(std::span(first).first(first.size() - 1)), InvalidArgument);
  }
}

TEST_CASE("cpu-fftw keeps to its per-thread arrays when the OpenMP team grows after planning",
          "[convolution][cpu-fftw]") {
  const Problem g{.n1 = 7, .n2 = 5, .slices = 4, .per_slice = 6};
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto kernels = random_kernels<double>(g);
  auto plan = conv::make_fftw_convolution<double>(g, kernels, pruned);
  omp_set_num_threads(std::max(4, 2 * threads));
  CHECK(worst_error_against_direct(*plan, kernels) <= test::backend_tolerance<double>());
  omp_set_num_threads(threads);
}

TEST_CASE("cpu-fftw planning effort from the environment", "[convolution][cpu-fftw]") {
  CHECK(conv::parse_fftw_planning("measure") == FftwPlanning::measure);
  CHECK(conv::parse_fftw_planning("estimate") == FftwPlanning::estimate);
  CHECK(conv::parse_fftw_planning("wisdom-only") == FftwPlanning::wisdom_only);
  CHECK_THROWS_AS(conv::parse_fftw_planning("patient"), InvalidArgument);

  // Odd lengths no other test plans, so no wisdom in this process covers them.
  const Problem g{.n1 = 3, .n2 = 5, .l1 = 11, .l2 = 13, .slices = 1, .per_slice = 2};
  const auto kernels = random_kernels<double>(g);
  const ScopedEnvironment no_wisdom_files("GRATINGSIM_FFTW_WISDOM", "");
  CHECK(conv::fftw_wisdom_file(Precision::double_).empty());
  {
    const ScopedEnvironment planning("GRATINGSIM_FFTW_PLANNING", "wisdom-only");
    CHECK_THROWS_AS(conv::make_convolution<double>(conv::Backend::cpu_fftw, g, kernels), Unsupported);
  }
  {
    const ScopedEnvironment planning("GRATINGSIM_FFTW_PLANNING", "fastest");
    CHECK_THROWS_AS(conv::make_convolution<double>(conv::Backend::cpu_fftw, g, kernels), InvalidArgument);
  }
  {
    const ScopedEnvironment planning("GRATINGSIM_FFTW_PLANNING", "estimate");
    auto plan = conv::make_convolution<double>(conv::Backend::cpu_fftw, g, kernels);
    CHECK(worst_error_against_direct(*plan, kernels) <= test::backend_tolerance<double>());
  }
}

TEST_CASE("cpu-fftw wisdom file round trip", "[convolution][cpu-fftw][wisdom]") {
  std::random_device entropy;
  const auto directory = std::filesystem::temp_directory_path() /
                         ("gratingsim-wisdom-" + std::to_string(::getpid()) + "-" + std::to_string(entropy()));
  std::filesystem::create_directories(directory);
  const auto stem = directory / "wisdom";
  const ScopedEnvironment wisdom("GRATINGSIM_FFTW_WISDOM", stem.string());
  const auto single_file = conv::fftw_wisdom_file(Precision::single);
  const auto double_file = conv::fftw_wisdom_file(Precision::double_);
  CHECK(single_file == directory / "wisdom.single");
  CHECK(double_file == directory / "wisdom.double");

  // A garbage file is no error, and measured planning replaces it with real wisdom.
  std::ofstream(single_file) << "not wisdom";
  const FftwOptions measure{.planning = FftwPlanning::measure};
  const auto kernels = random_kernels<float>(wisdom_geometry);
  auto single = conv::make_fftw_convolution<float>(wisdom_geometry, kernels, measure);
  auto double_ = conv::make_fftw_convolution<double>(wisdom_geometry, kernels, measure);
  CHECK(worst_error_against_direct(*single, kernels) <= test::backend_tolerance<float>());
  CHECK(worst_error_against_direct(*double_, kernels) <= test::backend_tolerance<double>());
  CHECK(read_text(single_file).starts_with("(fftw-3"));
  CHECK(read_text(single_file).find("fftwf_wisdom") != std::string::npos);
  CHECK(read_text(double_file).starts_with("(fftw-3"));
  CHECK(read_text(double_file).find("fftw_wisdom") != std::string::npos);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(directory)) ++entries;
  CHECK(entries == 2);  // the two wisdom files, no temporaries left behind

  // A fresh process (no wisdom in memory) plans the same shapes from the files alone.
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string child = "'" + self.string() + "' '[.wisdom-child]'";
  CHECK(std::system(child.c_str()) == 0);

  // An unwritable wisdom location is no error either.
  {
    const ScopedEnvironment unwritable("GRATINGSIM_FFTW_WISDOM", (single_file / "below-a-file").string());
    const Problem g{.n1 = 3, .n2 = 3, .l1 = 6, .l2 = 10, .slices = 2, .per_slice = 2};
    const auto other_kernels = random_kernels<double>(g);
    auto plan = conv::make_fftw_convolution<double>(g, other_kernels, measure);
    CHECK(worst_error_against_direct(*plan, other_kernels) <= test::backend_tolerance<double>());
  }
  std::filesystem::remove_all(directory);
}

// Run only by the round-trip test above, in a child process started with GRATINGSIM_FFTW_WISDOM set.
TEST_CASE("cpu-fftw plans from a wisdom file alone", "[.wisdom-child]") {
  REQUIRE(std::getenv("GRATINGSIM_FFTW_WISDOM"));
  const FftwOptions wisdom_only{.planning = FftwPlanning::wisdom_only};
  const auto kernels = random_kernels<float>(wisdom_geometry);
  auto single = conv::make_fftw_convolution<float>(wisdom_geometry, kernels, wisdom_only);
  auto double_ = conv::make_fftw_convolution<double>(wisdom_geometry, kernels, wisdom_only);
  CHECK(worst_error_against_direct(*single, kernels) <= test::backend_tolerance<float>());
  CHECK(worst_error_against_direct(*double_, kernels) <= test::backend_tolerance<double>());
  // A shape the file does not hold fails: wisdom_only really plans from the file.
  const ScopedEnvironment no_wisdom_files("GRATINGSIM_FFTW_WISDOM", "");
  const Problem unseen{.n1 = 5, .n2 = 3, .l1 = 17, .l2 = 19, .slices = 1, .per_slice = 1};
  CHECK_THROWS_AS(conv::make_fftw_convolution<double>(unseen, random_kernels<double>(unseen), wisdom_only),
                  Unsupported);
}

TEMPLATE_TEST_CASE("cpu-fftw pattern problems equal cpu-direct", "[convolution][cpu-fftw][pattern]", float, double) {
  test::check_patterns_against_direct<TestType>(conv::Backend::cpu_fftw);  // make_convolution: pruned, planned from the environment
  for (const test::Pattern& pattern : test::test_patterns())
    for (const test::NamedGeometry& shape : test::pattern_test_shapes()) {
      const Problem g = test::with_pattern(shape.geometry, pattern);
      const auto data = test::pattern_data<TestType>(g);
      for (const auto& options : {pruned, unpruned}) {
        INFO(pattern.name << ", " << shape.name << (options.prune_zero_rows ? ", pruned" : ", unpruned"));
        auto plan = conv::make_fftw_convolution<TestType>(g, data.kernels, options);
        test::check_plan_against_direct(*plan, data);
      }
    }
}

TEMPLATE_TEST_CASE("cpu-fftw pattern: set_kernels replaces every slice's K spectra", "[convolution][cpu-fftw][pattern]",
                   float, double) {
  const Problem g = test::with_pattern({.n1 = 9, .n2 = 5, .slices = 3, .per_slice = 2}, test::normal_vector_pattern());
  auto first = test::pattern_data<TestType>(g);
  auto plan = conv::make_convolution<TestType>(conv::Backend::cpu_fftw, g, first.kernels);
  test::check_plan_against_direct(*plan, first);
  const auto second = test::pattern_data<TestType>(g);
  plan->set_kernels(second.kernels);
  test::check_plan_against_direct(*plan, second);
}

// ---- GridDft: the host's plain 2D DFTs of R × R grids (physics' normal-field rasters) ----------------

namespace {
/// The 2D DFT by its defining sum, sign −1 (forward) or +1 (inverse), unscaled.
conv::GridBuffer direct_dft(const conv::GridBuffer& g, int r, int sign) {
  conv::GridBuffer out(g.size());
  const double step = sign * 2 * 3.14159265358979323846 / r;
  for (int ky = 0; ky < r; ++ky)
    for (int kx = 0; kx < r; ++kx) {
      std::complex<double> sum = 0;
      for (int iy = 0; iy < r; ++iy)
        for (int ix = 0; ix < r; ++ix)
          sum += g[std::size_t(iy) * r + ix] * std::polar(1.0, step * double((iy * ky + ix * kx) % r));
      out[std::size_t(ky) * r + kx] = sum;
    }
  return out;
}
conv::GridBuffer random_grid(int r) {
  const auto v = test::random_complex<double>(std::size_t(r) * r);
  return {v.begin(), v.end()};
}
bool kept_column(int kx, int r, int kept) { return kx <= kept || kx >= r - kept; }
}  // namespace

TEST_CASE("GridDft: whole and kept-column 2D DFTs equal the direct sums", "[convolution][cpu-fftw][grid]") {
  for (const int r : {8, 16, 64}) {
    for (const int kept : {0, 1, r / 4 + 1, r / 2 - 1}) {
      INFO("R = " << r << ", kept columns |kx| <= " << kept);
      const conv::GridDft dft(r, kept);
      const conv::GridBuffer x = random_grid(r);
      const double tol = 1e-13 * r * r;
      const conv::GridBuffer forward_reference = direct_dft(x, r, -1), inverse_reference = direct_dft(x, r, +1);

      conv::GridBuffer g = x;
      dft.forward(g);
      for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(std::abs(g[i] - forward_reference[i]) < tol);
      g = x;
      dft.inverse(g);
      for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(std::abs(g[i] - inverse_reference[i]) < tol);

      // forward_kept: the kept columns are the whole transform's; the others are not read (not checked).
      g = x;
      dft.forward_kept(g);
      for (int ky = 0; ky < r; ++ky)
        for (int kx = 0; kx < r; ++kx)
          if (kept_column(kx, r, kept)) {
            const std::size_t i = std::size_t(ky) * r + kx;
            REQUIRE(std::abs(g[i] - forward_reference[i]) < tol);
          }

      // inverse_kept of a spectrum zero outside the kept columns: the whole inverse of that spectrum.
      conv::GridBuffer spectrum = x;
      for (int ky = 0; ky < r; ++ky)
        for (int kx = 0; kx < r; ++kx)
          if (!kept_column(kx, r, kept)) spectrum[std::size_t(ky) * r + kx] = 0;
      const conv::GridBuffer kept_reference = direct_dft(spectrum, r, +1);
      g = spectrum;
      dft.inverse_kept(g);
      for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(std::abs(g[i] - kept_reference[i]) < tol);

      // The same plan gives the same bits every time (the normal fields' results must not depend on
      // which thread or run made them).
      conv::GridBuffer again = spectrum;
      dft.inverse_kept(again);
      CHECK(std::equal(g.begin(), g.end(), again.begin()));
    }
  }
  // A kept column's transform does not depend on how many columns are kept (physics caches a circle's
  // cell per harmonic range and needs its bits to depend on nothing else).
  const conv::GridBuffer x = random_grid(32);
  conv::GridBuffer few = x, many = x;
  conv::GridDft(32, 3).forward_kept(few);
  conv::GridDft(32, 12).forward_kept(many);
  for (int ky = 0; ky < 32; ++ky)
    for (int kx = 0; kx < 32; ++kx)
      if (kept_column(kx, 32, 3)) CHECK(few[std::size_t(ky) * 32 + kx] == many[std::size_t(ky) * 32 + kx]);
  CHECK_THROWS_AS(conv::GridDft(16, 8), InvalidArgument);  // kept must stay below R/2
  CHECK_THROWS_AS(conv::GridDft(12, 2), InvalidArgument);  // R a power of two
  const conv::GridDft dft(8, 1);
  conv::GridBuffer wrong(63);
  CHECK_THROWS_AS(dft.forward(wrong), InvalidArgument);
}
