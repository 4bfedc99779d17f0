// physics/krylov.cpp on small operators whose spectra are known, so that every expected count and
// bound follows from Krylov theory rather than from running the code:
// - GMRES terminates in exactly deg(minimal polynomial) steps (Saad, Iterative Methods for Sparse
//   Linear Systems, 2nd ed., Prop. 6.2 / §6.5.5: the Krylov space stops growing at that degree);
// - for a normal A with spectrum in the disc |λ − c| ≤ ρ, ‖r_k‖ ≤ (ρ/|c|)^k ‖r_0‖ (Saad Cor. 6.33 with
//   κ(X) = 1; the polynomial (1 − z/c)^k is a candidate of the GMRES minimisation);
// - restarted GMRES(m < n) makes no progress on the cyclic shift (Embree, "The tortoise and the hare
//   restart GMRES", SIAM Rev. 45 (2003) §2: K_k(S, e_j) ⟂ e_j for k < n);
// - BiCGStab on a Hermitian positive definite A with r̂ = r_0 carries CG's BiCG polynomial
//   (van der Vorst 1992), so it also stops after at most deg(minimal polynomial) steps.
// The exact solutions come from the spectral decompositions the operators were built from, never
// from a solver. Batches check that right-hand sides are independent, and the stopping rules
// (max_iterations, non-finite products, already-solved systems) are checked exactly.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>
#include <random>
#include <span>
#include <vector>

#include "core/error.hpp"
#include "physics/krylov.hpp"
#include "physics/vector_space.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;
using Scalar = std::complex<double>;
using Vector = std::vector<Scalar>;
/// A dense n×n matrix, row-major, complex128.
using Matrix = std::vector<Scalar>;

namespace {

/// The solver tolerance used per precision: well above rounding (complex64 ε ≈ 6e-8, complex128
/// ε ≈ 1e-16) and well below every residual the tests expect to stay unconverged.
template <class Real>
double tolerance() {
  return std::is_same_v<Real, float> ? 1e-5 : 1e-12;
}

double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(test::rng()); }
Scalar random_phase() { return std::polar(1.0, uniform(0, 2 * std::numbers::pi)); }
Vector random_vector(std::size_t n) {
  const auto v = test::random_complex<double>(n);
  return Vector(v.begin(), v.end());
}

Matrix diagonal(const Vector& d) {
  const std::size_t n = d.size();
  Matrix a(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) a[i * n + i] = d[i];
  return a;
}

Matrix multiply(const Matrix& a, const Matrix& b, std::size_t n) {
  Matrix c(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t j = 0; j < n; ++j) c[i * n + j] += a[i * n + k] * b[k * n + j];
  return c;
}

Matrix adjoint(const Matrix& a, std::size_t n) {
  Matrix t(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) t[j * n + i] = std::conj(a[i * n + j]);
  return t;
}

Vector times(const Matrix& a, const Vector& x) {
  const std::size_t n = x.size();
  Vector y(n, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) y[i] += a[i * n + j] * x[j];
  return y;
}

/// A random unitary Q: the product of three Householder reflectors I − 2vvᴴ/(vᴴv) with random v
/// (each is unitary, so their product is). Conjugating by Q keeps a spectrum and, for a normal
/// matrix, keeps it normal, while making every matrix entry non-zero.
Matrix random_unitary(std::size_t n) {
  Matrix q = diagonal(Vector(n, 1.0));
  for (int k = 0; k < 3; ++k) {
    const Vector v = random_vector(n);
    double vv = 0;
    for (Scalar z : v) vv += std::norm(z);
    Matrix h = diagonal(Vector(n, 1.0));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) h[i * n + j] -= 2.0 * v[i] * std::conj(v[j]) / vv;
    q = multiply(q, h, n);
  }
  return q;
}

/// Q M Qᴴ.
Matrix similar(const Matrix& q, const Matrix& m, std::size_t n) { return multiply(multiply(q, m, n), adjoint(q, n), n); }

/// The cyclic shift S e_j = e_{(j+1) mod n} (a permutation: unitary, eigenvalues the n-th roots of
/// unity, minimal polynomial zⁿ − 1 of degree n).
Matrix cyclic_shift(std::size_t n) {
  Matrix s(n * n, 0.0);
  for (std::size_t j = 0; j < n; ++j) s[((j + 1) % n) * n + j] = 1.0;
  return s;
}

/// One right-hand side's matrix a = Q M Qᴴ, its inverse Q M⁻¹ Qᴴ from the same decomposition, and Q.
struct System {
  Matrix a, inverse, q;
};

/// Normal matrix Q diag(λ) Qᴴ, inverse Q diag(1/λ) Qᴴ.
System normal(const Vector& eigenvalues) {
  const std::size_t n = eigenvalues.size();
  Vector inv(n);
  for (std::size_t i = 0; i < n; ++i) inv[i] = 1.0 / eigenvalues[i];
  const Matrix q = random_unitary(n);
  return {similar(q, diagonal(eigenvalues), n), similar(q, diagonal(inv), n), q};
}

/// α Q S Qᴴ with a random unit α, inverse (1/α) Q Sᵀ Qᴴ (S⁻¹ = Sᵀ for a permutation).
System shifted_cycle(std::size_t n) {
  const Scalar alpha = random_phase() * uniform(0.5, 2);
  const Matrix q = random_unitary(n);
  Matrix s = cyclic_shift(n), st = adjoint(s, n);
  for (Scalar& z : s) z *= alpha;
  for (Scalar& z : st) z /= alpha;
  return {similar(q, s, n), similar(q, st, n), q};
}

/// n eigenvalues uniform in the disc |λ − c| ≤ ρ, a few of them on its boundary (where the bound is
/// tightest).
Vector disc_spectrum(std::size_t n, Scalar c, double rho) {
  Vector d(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double radius = i < 4 ? rho : rho * std::sqrt(uniform(0, 1));
    d[i] = c + std::polar(radius, uniform(0, 2 * std::numbers::pi));
  }
  return d;
}

/// `distinct` eigenvalues on a circle about c (well separated, none near 0: |λ| ≥ 0.4|c|), each at
/// least once, the rest of the n repeated at random, in random order.
Vector repeated_spectrum(std::size_t n, std::size_t distinct, Scalar c) {
  Vector values(distinct), d(n);
  const double offset = uniform(0, 2 * std::numbers::pi);
  for (std::size_t k = 0; k < distinct; ++k)
    values[k] = c * (1.0 + 0.6 * std::polar(1.0, offset + 2 * std::numbers::pi * double(k) / double(distinct)));
  for (std::size_t i = 0; i < n; ++i)
    d[i] = values[i < distinct ? i : std::uniform_int_distribution<std::size_t>(0, distinct - 1)(test::rng())];
  std::shuffle(d.begin(), d.end(), test::rng());
  return d;
}

/// Element j of right-hand side r in the batch (vector_space.hpp): slice j / block, component j % block.
std::size_t batch_index(const BatchLayout& l, std::size_t j, std::size_t r) {
  return ((j / l.block) * l.rhs + r) * l.block + j % l.block;
}

/// Per-rhs dense matrices applied in the batch layout, in complex128 and rounded to Real. For the
/// non-finite tests, rhs r's output becomes `poison` from its poison_from[r]-th product on; with
/// add_noise(η), every output element gains η‖y‖/√n times a fresh random unit phase (a product
/// accurate to about η: a precision floor the solver cannot go below).
template <class Real>
class MatrixBatch final : public LinearOperator<Real> {
 public:
  using Complex = std::complex<Real>;
  MatrixBatch(std::size_t slices, std::size_t block, std::vector<Matrix> a)
      : layout_{slices, a.size(), block}, a_(std::move(a)), poison_from_(a_.size(), 0) {}
  [[nodiscard]] const BatchLayout& layout() const override { return layout_; }
  [[nodiscard]] std::unique_ptr<VectorSpace<Real>> make_space(int count) const override {
    return make_host_vector_space<Real>(layout_, count);
  }
  void apply(const Complex* x, Complex* y) override {
    ++products_;
    const std::size_t n = layout_.per_rhs();
    for (std::size_t r = 0; r < layout_.rhs; ++r) {
      Vector xr(n);
      for (std::size_t j = 0; j < n; ++j) xr[j] = Scalar(x[batch_index(layout_, j, r)]);
      Vector yr = times(a_[r], xr);
      if (noise_ > 0) {
        const double scale = noise_ * test::l2_norm<double>(yr) / std::sqrt(double(n));
        for (Scalar& z : yr) z += scale * random_phase();
      }
      const bool poisoned = poison_from_[r] > 0 && products_ >= poison_from_[r];
      for (std::size_t j = 0; j < n; ++j) y[batch_index(layout_, j, r)] = poisoned ? poison_ : Complex(yr[j]);
    }
  }
  void add_noise(double relative) { noise_ = relative; }
  [[nodiscard]] int products() const { return products_; }
  void poison(std::size_t r, int from_product, Complex value) {
    poison_from_[r] = from_product;
    poison_ = value;
  }

 private:
  BatchLayout layout_;
  std::vector<Matrix> a_;
  std::vector<int> poison_from_;
  Complex poison_{};
  int products_ = 0;
  double noise_ = 0;
};

/// Per-rhs vectors packed into the batch layout (rounded to Real), and back.
template <class Real>
std::vector<std::complex<Real>> pack(const BatchLayout& l, const std::vector<Vector>& per_rhs) {
  std::vector<std::complex<Real>> out(l.size());
  for (std::size_t r = 0; r < l.rhs; ++r)
    for (std::size_t j = 0; j < l.per_rhs(); ++j) out[batch_index(l, j, r)] = std::complex<Real>(per_rhs[r][j]);
  return out;
}
template <class Real>
Vector unpack(const BatchLayout& l, std::span<const std::complex<Real>> batch, std::size_t r) {
  Vector out(l.per_rhs());
  for (std::size_t j = 0; j < l.per_rhs(); ++j) out[j] = Scalar(batch[batch_index(l, j, r)]);
  return out;
}

double norm(const Vector& v) { return test::l2_norm<double>(v); }
/// ‖a − b‖ / ‖b‖.
double relative_error(const Vector& a, const Vector& b) { return test::relative_l2<double, double>(a, b); }
/// ‖b − A x‖ / ‖b‖ in complex128, independent of the solver's own residual.
double relative_residual(const Matrix& a, const Vector& b, const Vector& x) {
  Vector r = times(a, x);
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = b[i] - r[i];
  return norm(r) / norm(b);
}

/// Solves one system (layout: `slices` slices of `block`, one rhs) from x0; returns stats and x.
template <class Real>
std::pair<SolveStats, Vector> solve_one(const Matrix& a, std::size_t slices, std::size_t block, const Vector& b,
                                        const Vector& x0, const KrylovSettings& settings) {
  MatrixBatch<Real> op(slices, block, {a});
  const auto bb = pack<Real>(op.layout(), {b});
  auto x = pack<Real>(op.layout(), {x0});
  const std::vector<SolveStats> stats = solve<Real>(op, bb, x, settings);
  REQUIRE(stats.size() == 1);
  return {stats[0], unpack<Real>(op.layout(), std::span<const std::complex<Real>>(x), 0)};
}

KrylovSettings gmres(int restart, double tolerance, int max_iterations = 2000) {
  KrylovSettings s;
  s.method = Method::gmres;
  s.restart = restart;
  s.tolerance = tolerance;
  s.max_iterations = max_iterations;
  return s;
}
KrylovSettings bicgstab(double tolerance, int max_iterations = 2000) {
  KrylovSettings s;
  s.method = Method::bicgstab;
  s.tolerance = tolerance;
  s.max_iterations = max_iterations;
  return s;
}

}  // namespace

TEMPLATE_TEST_CASE("GMRES(m ≥ d) on a diagonal operator with d distinct eigenvalues converges in exactly d steps",
                   "[physics][krylov]", float, double) {
  // Saad Prop. 6.2: the Krylov space K_k(A, r0) stops growing at k = deg of the minimal polynomial
  // of A with respect to r0, here d (every eigenvalue is hit by a random b); before that the GMRES
  // residual is min over degree-(d−1) polynomials p, p(0) = 1, of ‖p(Λ) b‖ > 0, and for eigenvalues
  // spread on a circle of radius 0.6|c| about c that minimum is far above the tolerance.
  const double tol = tolerance<TestType>();
  constexpr std::size_t slices = 8, block = 3, n = slices * block;
  for (std::size_t d : {1, 3, 5}) {
    const Scalar c = random_phase() * uniform(0.5, 3);
    const Vector lambda = repeated_spectrum(n, d, c);
    const Vector b = random_vector(n);
    Vector exact(n);
    for (std::size_t i = 0; i < n; ++i) exact[i] = b[i] / lambda[i];  // x = Λ⁻¹ b
    for (int restart : {int(d), int(d) + 3, 40}) {
      INFO("distinct eigenvalues " << d << ", GMRES(" << restart << ")");
      const auto [stats, x] = solve_one<TestType>(diagonal(lambda), slices, block, b, Vector(n, 0.0), gmres(restart, tol));
      CHECK(stats.converged);
      CHECK(stats.iterations == int(d));
      CHECK(stats.residual <= tol);
      CHECK(relative_residual(diagonal(lambda), b, x) <= 2 * tol);
      // cond(Λ) ≤ 1.6/0.4 = 4: the error is at most cond·(relative residual)
      CHECK(relative_error(x, exact) <= 4 * 2 * tol);
    }
  }
}

TEMPLATE_TEST_CASE("GMRES on a normal operator with spectrum in |λ − c| ≤ ρ meets ‖r_k‖ ≤ (ρ/|c|)^k ‖r_0‖",
                   "[physics][krylov]", float, double) {
  // Saad Cor. 6.33 with κ(X) = 1 (A = Q Λ Qᴴ, Q unitary): ‖r_k‖ = min_p ‖p(Λ) Qᴴ r0‖ ≤
  // max_{λ ∈ disc} |1 − λ/c|^k ‖r0‖ = (ρ/|c|)^k ‖r0‖. n = 60 distinct eigenvalues, so finite termination
  // (60 steps) is far beyond the predicted counts: only the bound can make the solve converge early.
  const double tol = tolerance<TestType>();
  // The floor under which the computed residual is rounding, not GMRES (complex64 vectors).
  const double floor = std::is_same_v<TestType, float> ? 1e-6 : 1e-14;
  constexpr std::size_t slices = 20, block = 3, n = slices * block;
  const double q = 0.5;  // ρ/|c|
  const Scalar c = random_phase() * uniform(1, 3);
  const Vector lambda = disc_spectrum(n, c, q * std::abs(c));
  const System sys = normal(lambda);
  const Vector b = random_vector(n);
  const Vector zero(n, 0.0);
  // No restart (m > every count below): after exactly k steps the true residual obeys the bound.
  for (int k : {1, 4, 8, 16}) {
    INFO("k = " << k);
    const auto [stats, x] = solve_one<TestType>(sys.a, slices, block, b, zero, gmres(100, 1e-30, k));
    CHECK(stats.iterations == k);
    CHECK_FALSE(stats.converged);
    CHECK(stats.residual <= std::pow(q, k) * (1 + 1e-6) + floor);
    CHECK(relative_residual(sys.a, b, x) <= std::pow(q, k) * (1 + 1e-6) + floor);
  }
  // To the tolerance: converged within k* = ⌈log(tol)/log(q)⌉ steps (20 in complex64, 40 in complex128).
  const int predicted = int(std::ceil(std::log(tol) / std::log(q)));
  REQUIRE(predicted < int(n));
  const auto [stats, x] = solve_one<TestType>(sys.a, slices, block, b, zero, gmres(100, tol));
  CHECK(stats.converged);
  CHECK(stats.iterations <= predicted);
  CHECK(stats.residual <= tol);
  // cond(A) ≤ (1 + q)/(1 − q) = 3
  CHECK(relative_error(x, times(sys.inverse, b)) <= 3 * 2 * tol);
}

TEMPLATE_TEST_CASE("restarted GMRES(m < n) stagnates on a cyclic shift and says so, GMRES(n) solves it in n steps",
                   "[physics][krylov]", float, double) {
  // A = α Q S Qᴴ, b = Q e_j: K_k(A, b) = Q span{e_j, …, e_{j+k−1}} and A K_k ⟂ b for k < n, so the
  // minimal residual over x0 + K_k is ‖b‖ itself (Embree 2003 §2): each restart cycle returns with
  // y = 0, the residual stays 1, and the minimal polynomial zⁿ − αⁿ makes n the exact step count.
  const double tol = tolerance<TestType>();
  // Rounding moves a stagnating residual by O(ε) per cycle.
  const double drift = std::is_same_v<TestType, float> ? 1e-4 : 1e-10;
  constexpr std::size_t slices = 4, block = 3, n = slices * block;
  const System sys = shifted_cycle(n);
  const std::size_t j = std::uniform_int_distribution<std::size_t>(0, n - 1)(test::rng());
  const Scalar beta = random_phase() * uniform(0.5, 2);
  Vector b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = beta * sys.q[i * n + j];  // β Q e_j
  const Vector zero(n, 0.0), exact = times(sys.inverse, b);
  for (int restart : {1, 5, int(n) - 1}) {
    // A step count that is not a multiple of the restart length: the cap is honoured mid-cycle.
    const int cap = 2 * restart + 1;
    INFO("GMRES(" << restart << "), max_iterations " << cap);
    const auto [stats, x] = solve_one<TestType>(sys.a, slices, block, b, zero, gmres(restart, tol, cap));
    CHECK_FALSE(stats.converged);
    CHECK(stats.iterations == cap);
    CHECK(std::abs(stats.residual - 1) <= drift);
    CHECK(std::abs(relative_residual(sys.a, b, x) - 1) <= drift);
    CHECK(norm(x) <= drift * norm(exact));  // no progress: x stays x0 = 0
  }
  // Without restarts the same system is solved, in exactly n steps.
  const auto [stats, x] = solve_one<TestType>(sys.a, slices, block, b, zero, gmres(int(n), tol));
  CHECK(stats.converged);
  CHECK(stats.iterations == int(n));
  CHECK(relative_error(x, exact) <= 2 * tol);  // A is a multiple of a unitary: cond = 1
}

TEMPLATE_TEST_CASE("BiCGStab solves Hermitian positive definite systems to the tolerance", "[physics][krylov]", float,
                   double) {
  // With r̂ = r0 on a Hermitian positive definite A, BiCG is CG, so BiCGStab's residual polynomial
  // contains CG's and vanishes after deg(minimal polynomial) steps (van der Vorst 1992, §3): at most
  // d steps for d distinct eigenvalues, plus one restart's worth for rounding.
  const double tol = tolerance<TestType>();
  constexpr std::size_t slices = 20, block = 3, n = slices * block;
  const Vector b = random_vector(n), zero(n, 0.0);
  SECTION("diagonal, eigenvalues in [1, 10]") {
    Vector lambda(n), exact(n);
    for (std::size_t i = 0; i < n; ++i) {
      lambda[i] = uniform(1, 10);
      exact[i] = b[i] / lambda[i];
    }
    const auto [stats, x] = solve_one<TestType>(diagonal(lambda), slices, block, b, zero, bicgstab(tol));
    CHECK(stats.converged);
    CHECK(stats.iterations > 0);
    CHECK(stats.residual <= tol);
    CHECK(relative_residual(diagonal(lambda), b, x) <= 2 * tol);
    CHECK(relative_error(x, exact) <= 10 * 2 * tol);  // cond ≤ 10
  }
  SECTION("Q Λ Qᴴ with 4 distinct positive eigenvalues: at most 4 steps (+1 for rounding)") {
    Vector lambda = repeated_spectrum(n, 4, 1.0);
    for (Scalar& z : lambda) z = 1.0 + 3.0 * std::abs(z);  // real, positive, still 4 distinct values
    const System sys = normal(lambda);
    const auto [stats, x] = solve_one<TestType>(sys.a, slices, block, b, zero, bicgstab(tol));
    CHECK(stats.converged);
    CHECK(stats.iterations <= 5);
    CHECK(relative_residual(sys.a, b, x) <= 2 * tol);
    CHECK(relative_error(times(sys.a, x), b) <= 2 * tol);
    CHECK(relative_error(x, times(sys.inverse, b)) <= 10 * 2 * tol);
  }
}

TEMPLATE_TEST_CASE("GMRES from a zero guess takes no product for its first residual", "[physics][krylov]", float, double) {
  // r_0 = b − A·0 = b: krylov.cpp's zero start. A matrix of 3 distinct eigenvalues: 3 Arnoldi steps and the
  // restart test's true residual, 4 products, where a non-zero guess (the same system, x0 a random multiple of
  // 1e-30: the same iterates to rounding) takes 5. The zero start's result is checked bit for bit against a
  // product's by the batch test below (rhs 0 alone, with a zero guess, against rhs 0 in a batch whose rhs 3 has a
  // non-zero one).
  constexpr std::size_t slices = 10, block = 3, n = slices * block;
  const double tol = tolerance<TestType>();
  const System easy = normal(repeated_spectrum(n, 3, random_phase() * 2.0));
  const Vector b = random_vector(n);
  Vector tiny = random_vector(n);
  for (Scalar& z : tiny) z *= 1e-30;
  for (bool zero : {true, false}) {
    INFO((zero ? "zero guess" : "tiny guess"));
    MatrixBatch<TestType> op(slices, block, {easy.a});
    const auto bb = pack<TestType>(op.layout(), {b});
    auto x = pack<TestType>(op.layout(), {zero ? Vector(n, 0.0) : tiny});
    const std::vector<SolveStats> stats = solve<TestType>(op, bb, x, gmres(10, tol));
    CHECK(stats[0].converged);
    CHECK(stats[0].iterations == 3);
    CHECK(op.products() == (zero ? 4 : 5));
    CHECK(stats[0].matvecs == op.products());
    CHECK(relative_residual(easy.a, b, unpack<TestType>(op.layout(), std::span<const std::complex<TestType>>(x), 0)) <= 2 * tol);
  }
}

TEMPLATE_TEST_CASE("a batch of right-hand sides of different difficulty: each behaves as if solved alone",
                   "[physics][krylov]", float, double) {
  // Every rhs has its own scalars and stopping test (krylov.hpp), so its iterations, products,
  // residual and solution must be those of the same system solved alone, bit for bit on the host
  // (a distributed sweep relies on it). Rhs 2 (b = 0) and 3 (x0 = A⁻¹b) are solved on entry: 0 steps.
  const double tol = tolerance<TestType>();
  constexpr std::size_t slices = 20, block = 3, n = slices * block;
  constexpr int cap = 25;
  const Vector zero(n, 0.0);
  std::vector<Matrix> a;
  std::vector<Vector> b, x0;
  // 0: 3 distinct eigenvalues (3 GMRES steps); 1: disc with q = ρ/|c| = 0.25 (≤ 20 GMRES steps,
  // restarted or not: each cycle of m steps gains at least q^m); 2: b = 0; 3: x0 = A⁻¹b;
  // 4: eigenvalues spread over the unit circle, around 0: no polynomial with p(0) = 1 is small
  // there, so neither method gets near the tolerance in 25 steps (BiCGStab: 50 products < n = 60).
  Vector circle(n);
  for (Scalar& z : circle) z = random_phase();
  const System easy = normal(repeated_spectrum(n, 3, random_phase() * 2.0));
  const System medium = normal(disc_spectrum(n, random_phase() * 2.0, 0.5));
  const System solved = normal(disc_spectrum(n, random_phase() * 2.0, 1.0));
  const System hard = normal(circle);
  for (const System* s : {&easy, &medium, &solved, &solved, &hard}) a.push_back(s->a);
  for (int r = 0; r < 5; ++r) b.push_back(r == 2 ? zero : random_vector(n));
  for (int r = 0; r < 5; ++r) x0.push_back(r == 3 ? times(solved.inverse, b[3]) : zero);
  for (const KrylovSettings& settings : {gmres(10, tol, cap), bicgstab(tol, cap)}) {
    INFO((settings.method == Method::gmres ? "GMRES(10)" : "BiCGStab"));
    MatrixBatch<TestType> op(slices, block, a);
    const BatchLayout& l = op.layout();
    const auto bb = pack<TestType>(l, b);
    auto x = pack<TestType>(l, x0);
    const std::vector<SolveStats> together = solve<TestType>(op, bb, x, settings);
    REQUIRE(together.size() == 5);
    for (std::size_t r = 0; r < 5; ++r) {
      INFO("rhs " << r);
      const auto [alone, x_alone] = solve_one<TestType>(a[r], slices, block, b[r], x0[r], settings);
      const Vector x_together = unpack<TestType>(l, std::span<const std::complex<TestType>>(x), r);
      CHECK(together[r].iterations == alone.iterations);
      CHECK(together[r].matvecs == alone.matvecs);
      CHECK(together[r].converged == alone.converged);
      CHECK(together[r].residual == alone.residual);
      CHECK(x_together == x_alone);
    }
    CHECK((together[0].converged && together[1].converged));
    CHECK(together[0].iterations < together[1].iterations);
    for (std::size_t r : {2, 3}) {
      CHECK(together[r].converged);
      CHECK(together[r].iterations == 0);
      CHECK(unpack<TestType>(l, std::span<const std::complex<TestType>>(x), r) ==
            unpack<TestType>(l, std::span<const std::complex<TestType>>(pack<TestType>(l, x0)), r));
    }
    CHECK_FALSE(together[4].converged);
    CHECK(together[4].iterations == cap);
    CHECK(together[4].residual > tol);
  }
}

TEMPLATE_TEST_CASE("the in-place solve (b and x in a space of the operator) equals the host-vector solve, bit for bit",
                   "[physics][krylov]", float, double) {
  // solve(op, space, settings) is what the solver runs (b and x never leave the operator's memory); the host-vector
  // solve uploads into such a space and downloads x. Same steps, same bits; the other vectors of the space are the
  // method's (poisoned here: it must not read them before writing), and a space too small is refused.
  using Complex = std::complex<TestType>;
  const double tol = tolerance<TestType>();
  constexpr std::size_t slices = 12, block = 3, n = slices * block;
  const System easy = normal(repeated_spectrum(n, 4, random_phase() * 2.0));
  const System medium = normal(disc_spectrum(n, random_phase() * 2.0, 0.5));
  const std::vector<Vector> b = {random_vector(n), random_vector(n)}, x0 = {random_vector(n), Vector(n, 0.0)};
  KrylovSettings dense;
  dense.method = Method::dense_lu;
  dense.tolerance = tol;
  for (const KrylovSettings& settings : {gmres(5, tol), bicgstab(tol), dense}) {
    INFO("method " << int(settings.method));
    MatrixBatch<TestType> op(slices, block, {easy.a, medium.a});
    const BatchLayout& l = op.layout();
    const auto bb = pack<TestType>(l, b);
    auto x = pack<TestType>(l, x0);
    const std::vector<SolveStats> reference = solve<TestType>(op, bb, x, settings);

    const int count = solve_space_size(settings);
    const auto space = op.make_space(count);
    const std::vector<Complex> poisoned(l.size(), test::poison<TestType>());
    for (int i = 2; i < count; ++i) space->upload(poisoned, i);
    space->upload(bb, 0);
    space->upload(pack<TestType>(l, x0), 1);
    const std::vector<SolveStats> in_place = solve<TestType>(op, *space, settings);
    std::vector<Complex> x_in_place(l.size(), test::poison<TestType>());
    space->download(1, x_in_place);
    REQUIRE(in_place.size() == reference.size());
    for (std::size_t r = 0; r < l.rhs; ++r) {
      CHECK(in_place[r].iterations == reference[r].iterations);
      CHECK(in_place[r].matvecs == reference[r].matvecs);
      CHECK(in_place[r].residual == reference[r].residual);
      CHECK(in_place[r].converged);
    }
    CHECK(x_in_place == x);
    const auto small = op.make_space(count - 1);
    CHECK_THROWS_AS(solve<TestType>(op, *small, settings), gratingsim::InvalidArgument);
  }
}

TEMPLATE_TEST_CASE("b = 0 is solved by x = 0 whatever the initial guess, never by keeping x0", "[physics][krylov]",
                   float, double) {
  // A x = 0 with A invertible has the one solution x = 0; the stopping test ‖b − A x‖ ≤ tol·‖b‖ = 0
  // holds only there. Returning a non-zero x0 as "converged" would be a wrong answer.
  constexpr std::size_t slices = 4, block = 3, n = slices * block;
  const System sys = normal(disc_spectrum(n, random_phase() * 2.0, 1.0));
  for (const KrylovSettings& settings : {gmres(10, tolerance<TestType>()), bicgstab(tolerance<TestType>())}) {
    INFO((settings.method == Method::gmres ? "GMRES(10)" : "BiCGStab"));
    const auto [stats, x] = solve_one<TestType>(sys.a, slices, block, Vector(n, 0.0), random_vector(n), settings);
    CHECK(stats.converged);
    CHECK(stats.iterations == 0);
    CHECK(stats.residual == 0);
    CHECK(x == Vector(n, 0.0));
  }
}

TEMPLATE_TEST_CASE("GMRES and BiCGStab stop where the residual stalls at the operator's precision floor, and say so",
                   "[physics][krylov]", float, double) {
  // A well-conditioned normal operator (spectrum in |λ − c| ≤ 0.5|c|: GMRES converges like 0.5^k) whose
  // products carry a relative error η far above the tolerance: the true residual cannot fall much below
  // η, while the Arnoldi estimate (built from the same noisy products) keeps claiming the tolerance
  // within a few steps. So every cycle after the first ends early with the true residual still near η:
  // after stagnation_cycles such cycles (the default) GMRES stops, unconverged and marked stagnated, long
  // before max_iterations; with the check off it spends them all. BiCGStab's recursion claims the
  // tolerance the same way and restarts from the true residual: the same stop after as many restarts.
  constexpr std::size_t slices = 10, block = 3, n = slices * block;
  const double tol = tolerance<TestType>(), eta = std::is_same_v<TestType, float> ? 1e-3 : 1e-8;
  const System sys = normal(disc_spectrum(n, random_phase() * 2.0, 1.0));
  const Vector b = random_vector(n), zero(n, 0.0);
  const auto run = [&](int stagnation_cycles, Method method = Method::gmres) {
    MatrixBatch<TestType> op(slices, block, {sys.a});
    op.add_noise(eta);
    const auto bb = pack<TestType>(op.layout(), {b});
    auto x = pack<TestType>(op.layout(), {zero});
    KrylovSettings settings = method == Method::gmres ? gmres(40, tol, 400) : bicgstab(tol, 400);
    settings.stagnation_cycles = stagnation_cycles;
    const std::vector<SolveStats> stats = solve<TestType>(op, bb, x, settings);
    REQUIRE(stats.size() == 1);
    return std::pair{stats[0], unpack<TestType>(op.layout(), std::span<const std::complex<TestType>>(x), 0)};
  };
  const int cycles = KrylovSettings{}.stagnation_cycles;
  REQUIRE(cycles >= 1);
  const auto [stopped, x] = run(cycles);
  CHECK_FALSE(stopped.converged);
  CHECK(stopped.stagnated);
  // cycles + 1 short cycles of about log(tol)/log(0.5) steps (< 40), not 400
  CHECK(stopped.iterations < (cycles + 1) * 40);
  CHECK(stopped.residual > tol);
  CHECK(stopped.residual < 100 * eta);  // it got down to the floor first
  CHECK(relative_residual(sys.a, b, x) < 100 * eta);
  const auto [spent, ignored] = run(0);
  CHECK_FALSE(spent.converged);
  CHECK_FALSE(spent.stagnated);
  CHECK(spent.iterations == 400);
  const auto [bicg_stopped, bicg_x] = run(cycles, Method::bicgstab);
  CHECK_FALSE(bicg_stopped.converged);
  CHECK(bicg_stopped.stagnated);
  CHECK(bicg_stopped.iterations < 200);
  CHECK(bicg_stopped.residual < 100 * eta);
  CHECK(relative_residual(sys.a, b, bicg_x) < 100 * eta);
  const auto [bicg_spent, bicg_ignored] = run(0, Method::bicgstab);
  CHECK_FALSE(bicg_spent.stagnated);
  CHECK(bicg_spent.iterations == 400);
  // Noise-free, the same system converges and is never called stagnated (its last cycle ends short too,
  // but on a true residual at the tolerance).
  for (const KrylovSettings& settings : {gmres(40, tol, 400), bicgstab(tol, 400)}) {
    const auto [clean, exact_x] = solve_one<TestType>(sys.a, slices, block, b, zero, settings);
    CHECK(clean.converged);
    CHECK_FALSE(clean.stagnated);
  }
}

TEMPLATE_TEST_CASE("max_iterations is honoured exactly", "[physics][krylov]", float, double) {
  // A normal operator with q = ρ/|c| = 0.97 needs ~ log(tol)/log(q) ≫ 13 steps, so every cap below
  // binds (n = 60 > 2·13 products: no finite termination either).
  constexpr std::size_t slices = 20, block = 3, n = slices * block;
  const double floor = std::is_same_v<TestType, float> ? 1e-6 : 1e-14;  // rounding in the residual
  const System sys = normal(disc_spectrum(n, random_phase() * 2.0, 1.94));
  const Vector b = random_vector(n), zero(n, 0.0);
  for (int cap : {1, 7, 13}) {
    for (const KrylovSettings& settings : {gmres(3, tolerance<TestType>(), cap), gmres(40, tolerance<TestType>(), cap),
                                           bicgstab(tolerance<TestType>(), cap)}) {
      INFO("cap " << cap << (settings.method == Method::gmres ? ", GMRES(" + std::to_string(settings.restart) + ")"
                                                               : std::string(", BiCGStab")));
      const auto [stats, x] = solve_one<TestType>(sys.a, slices, block, b, zero, settings);
      CHECK(stats.iterations == cap);
      CHECK_FALSE(stats.converged);
      CHECK(stats.residual > tolerance<TestType>());
      // GMRES minimises the residual over a growing space from x0 = 0: it never exceeds ‖b‖
      // (BiCGStab's may, transiently).
      if (settings.method == Method::gmres) CHECK(stats.residual < 1);
      // the reported residual is that of the returned x
      CHECK(std::abs(relative_residual(sys.a, b, x) - stats.residual) <= 1e-5 * stats.residual + floor);
    }
  }
}

TEMPLATE_TEST_CASE("GMRES and BiCGStab refuse steps_ahead outside 1..2, with its name", "[physics][krylov]", float,
                   double) {
  constexpr std::size_t slices = 4, block = 3, n = slices * block;
  const System sys = normal(disc_spectrum(n, random_phase() * 2.0, 1.0));
  const Vector b = random_vector(n), zero(n, 0.0);
  for (const Method method : {Method::gmres, Method::bicgstab})
    for (int ahead : {0, 3}) {
      KrylovSettings settings = gmres(5, tolerance<TestType>(), 50);
      settings.method = method;
      settings.steps_ahead = ahead;
      const std::string name = method == Method::gmres ? "GMRES" : "BiCGStab";
      INFO(name << ", steps_ahead " << ahead);
      CHECK_THROWS_WITH(solve_one<TestType>(sys.a, slices, block, b, zero, settings),
                        Catch::Contains(name + ": steps_ahead must be 1 or 2, got " + std::to_string(ahead)));
    }
}

TEMPLATE_TEST_CASE("a non-finite operator output is reported unconverged, and other rhs are unaffected",
                   "[physics][krylov]", float, double) {
  // rhs 1's products turn NaN or ∞ from its first product (the initial residual) or mid-solve; rhs 0 is a
  // well-posed system in the same batch. NaN ≤ tol is false, so a missing isfinite test would still not
  // claim convergence — but it would run to max_iterations: the count is checked too.
  using Complex = std::complex<TestType>;
  const double tol = tolerance<TestType>();
  constexpr std::size_t slices = 4, block = 3, n = slices * block;
  const System good = normal(repeated_spectrum(n, 4, random_phase() * 2.0));
  const System bad = normal(disc_spectrum(n, random_phase() * 2.0, 1.0));
  const std::vector<Vector> b{random_vector(n), random_vector(n)}, x0(2, Vector(n, 0.0));
  const TestType nan = std::numeric_limits<TestType>::quiet_NaN(), inf = std::numeric_limits<TestType>::infinity();
  for (const KrylovSettings& settings : {gmres(10, tol, 500), bicgstab(tol, 500)})
    for (int from : {1, 3})
      for (Complex poison : {Complex(nan, 0), Complex(inf, -inf)}) {
        INFO((settings.method == Method::gmres ? "GMRES(10)" : "BiCGStab")
             << ", poisoned from product " << from << " with " << poison);
        MatrixBatch<TestType> op(slices, block, {good.a, bad.a});
        op.poison(1, from, poison);
        const BatchLayout& l = op.layout();
        const auto bb = pack<TestType>(l, b);
        auto x = pack<TestType>(l, x0);
        const std::vector<SolveStats> stats = solve<TestType>(op, bb, x, settings);
        const auto [alone, x_alone] = solve_one<TestType>(good.a, slices, block, b[0], x0[0], settings);
        CHECK(stats[0].converged);
        CHECK(stats[0].iterations == alone.iterations);
        CHECK(unpack<TestType>(l, std::span<const Complex>(x), 0) == x_alone);
        CHECK_FALSE(stats[1].converged);
        CHECK_FALSE(stats[1].residual <= tol);
        CHECK(stats[1].iterations < 500);  // stopped at the non-finite value, not at the cap
      }
}
