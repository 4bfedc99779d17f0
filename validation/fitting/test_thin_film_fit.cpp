// The statistical proof of issue #11 at library level: Ψ/Δ spectra of a two-film stack (analytic,
// validation/fitting/thin_film.hpp) at known parameters plus Gaussian noise of stated levels, fitted
// from a start off the truth. Every parameter is recovered within 3 standard errors in at least 95 % of
// the draws (the 19 of 20, over 100 draws), and the reported standard errors agree with the
// scatter of the estimates over draws within a factor 1.5.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "fitting/levenberg_marquardt.hpp"
#include "validation/fitting/thin_film.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::fitting;

namespace {

// The stack: film 1 (unknown thickness d1 and real index n1) on film 2 (index 2.0, unknown thickness
// d2) on a silicon-like substrate; 41 wavelengths 400–800 nm at θ = 65° and 75°.
const std::complex<double> film2_index{2.0, 0.0}, substrate{3.88, 0.02};
const double sigma_psi_deg = 0.05, sigma_delta_deg = 0.1;  // the stated noise levels (1σ)

struct StackModel : BatchModel {
  std::vector<double> wavelengths_nm, thetas_deg{65, 75};
  StackModel() {
    for (int i = 0; i <= 40; ++i) wavelengths_nm.push_back(400 + 10 * i);
  }
  /// Outputs per (λ, θ): Ψ then Δ.
  [[nodiscard]] std::size_t outputs() const override { return 2 * wavelengths_nm.size() * thetas_deg.size(); }
  [[nodiscard]] Eigen::VectorXd spectrum(const Eigen::VectorXd& p) const {  // p = (d1, n1, d2)
    Eigen::VectorXd out(static_cast<Eigen::Index>(outputs()));
    Eigen::Index i = 0;
    for (const double wavelength : wavelengths_nm)
      for (const double theta : thetas_deg) {
        const auto [psi, delta] = test::thin_film_psi_delta({{p[1], p[0]}, {film2_index, p[2]}}, substrate, wavelength, theta);
        out[i++] = psi;
        out[i++] = delta;
      }
    return out;
  }
  Eigen::MatrixXd evaluate(const std::vector<Eigen::VectorXd>& points) override {
    Eigen::MatrixXd out(Eigen::Index(outputs()), Eigen::Index(points.size()));
    for (std::size_t k = 0; k < points.size(); ++k) out.col(Eigen::Index(k)) = spectrum(points[k]);
    return out;
  }
};

}  // namespace

TEST_CASE("thin films: parameters recovered within 3 standard errors in 95 of 100 noise draws, errors match the scatter") {
  StackModel model;
  const Eigen::Index m = Eigen::Index(model.outputs());
  const Eigen::Vector3d truth(100.0, 1.46, 50.0);  // d1 (nm), n1, d2 (nm)
  const Eigen::VectorXd clean = model.spectrum(truth);
  Measurement measurement;
  measurement.sigmas.resize(m);
  measurement.periods = Eigen::VectorXd::Zero(m);
  for (Eigen::Index i = 0; i < m; i += 2) {
    measurement.sigmas[i] = sigma_psi_deg;
    measurement.sigmas[i + 1] = sigma_delta_deg;
    measurement.periods[i + 1] = 360;  // Δ is a phase
  }
  std::normal_distribution<double> noise(0, 1);
  std::uniform_real_distribution<double> offset(-1, 1);
  // The coverage, 19 of 20 draws within 3 errors, is a rate of 95 %; it is tested over 100 draws.
  // Over 20 it failed by chance: two 3σ events among 20 draws have a probability ≈ 190 · 0.0027² ≈
  // 0.14 % per parameter, 0.4 % for the three (1 failure in 300 runs; CI seed 4193836235). Six among 100
  // have ≈ C(100,6) · 0.0027⁶ ≈ 5e-7, while an error estimate whose true coverage is 90 % fails the 100-draw
  // test in 94 % of runs against 61 % over 20. The scatter is taken over 100 draws too: 20 estimate a
  // standard deviation only to ±16 % (1σ), so a factor-1.5 bound on 20 would fail by chance in ≈ 2 % of
  // runs per parameter; over 100 (±7 %) the bound lies ≥ 5σ away.
  const int draws = 100, coverage_allowed = draws / 20;
  std::vector<Eigen::VectorXd> estimates, errors;
  std::vector<int> outside(3, 0);
  double reduced_chi2_sum = 0;
  const auto begin = std::chrono::steady_clock::now();
  for (int draw = 0; draw < draws; ++draw) {
    measurement.values = clean;
    for (Eigen::Index i = 0; i < m; ++i) measurement.values[i] += measurement.sigmas[i] * noise(test::rng());
    // A start off the truth by up to 5 nm, 0.03 and 5 nm; bounds well away from the optimum.
    const std::vector<Parameter> parameters{
        {.name = "d1", .start = truth[0] + 5 * offset(test::rng()), .lower = 50, .upper = 150, .relative_step = 1e-5},
        {.name = "n1", .start = truth[1] + 0.03 * offset(test::rng()), .lower = 1.3, .upper = 1.7, .relative_step = 1e-5},
        {.name = "d2", .start = truth[2] + 5 * offset(test::rng()), .lower = 20, .upper = 80, .relative_step = 1e-5}};
    const FitResult result = fit(model, parameters, measurement);
    INFO("draw " << draw << ": " << result.reason);
    REQUIRE(result.converged);
    REQUIRE(result.standard_errors.allFinite());
    estimates.push_back(result.parameters);
    errors.push_back(result.standard_errors);
    reduced_chi2_sum += result.reduced_chi2;
    for (int j = 0; j < 3; ++j) outside[std::size_t(j)] += std::abs(result.parameters[j] - truth[j]) > 3 * result.standard_errors[j];
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::printf("%d fits of %lld values in %.3f s; mean reduced chi2 %.3f\n", draws, static_cast<long long>(m), seconds,
              reduced_chi2_sum / draws);
  const char* names[] = {"d1", "n1", "d2"};
  for (int j = 0; j < 3; ++j) {
    double mean = 0, error = 0;
    for (int d = 0; d < draws; ++d) mean += estimates[std::size_t(d)][j] / draws;
    double scatter = 0;
    for (int d = 0; d < draws; ++d) {
      scatter += std::pow(estimates[std::size_t(d)][j] - mean, 2) / (draws - 1);
      error += errors[std::size_t(d)][j] / draws;
    }
    const double ratio = std::sqrt(scatter) / error;
    std::printf("%s: true %g, mean estimate %.6g, reported error %.3g, scatter/error %.3f; "
                "%d of %d draws beyond 3 errors\n",
                names[j], truth[j], mean, error, ratio, outside[std::size_t(j)], draws);
    INFO(names[j]);
    CHECK(outside[std::size_t(j)] <= coverage_allowed);
    CHECK(ratio > 1 / 1.5);
    CHECK(ratio < 1.5);
    CHECK(std::abs(mean - truth[j]) < 4 * error / std::sqrt(double(draws)));  // unbiased to within the noise
  }
  CHECK(std::abs(reduced_chi2_sum / draws - 1) < 0.1);  // ν = 161: per draw ±0.11, the mean ±0.011
}
