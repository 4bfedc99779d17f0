#pragma once
// Right preconditioning (issue #10; docs/solver.md §6, §7): P = L⁻¹ L̄ Ā⁻¹, exact for laterally
// uniform structures and for structures whose slices do not interact, applied as A P u = b,
// x = P u, so that residuals ‖b − A x‖ keep their meaning.
//
// Ā, the laterally averaged problem: every kernel of a slice replaced by its mean over the unit cell
// (its Fourier coefficient (0, 0)). The convolution then maps each order onto itself, and per
// (incidence, order m) Ā couples only the n = 3·Nz values (slice p, Cartesian component):
//   (Ā f)_q = f_q + D̄_q f_q − Σ_p K_qp(m) k1² C̄_p f_p,
// with the 3×3 mean tensors C̄_p (the source: the pattern's outputs 0..2; χ̄ I for Laurent) and D̄_p
// (the D outputs: the mean of γ n nᵀ; zero for Laurent). It is the exact operator of the averaged
// (laterally uniform, possibly anisotropic) stack, with all slices coupled. Ā⁻¹ is applied by a sweep
// over the slices per (incidence, order) (AveragedSweep: sweep_preconditioner.hpp's recursion for one
// order, 3×3 blocks), O(Nz) to build and to apply, not by a dense LU of the 3Nz × 3Nz matrix.
//
// L_p, the slice's own block of A (z-local, all orders coupled): L_p = I + D_p⊛ − K_pp k1² C_p⊛, and
// L̄_p its averaged counterpart (3×3 per order). L⁻¹ L̄ corrects Ā⁻¹ for the lateral structure of
// each slice: the strong contrast of 1/ε and ε across edges that the averaged stack does not see.
// (Ā⁻¹ alone was measured too: on a wire-grid polariser in p it took 3–6× more iterations than no
// preconditioner; the product is better or equal on every case measured, see the closing note of #10.)
//
// Both parts are built from the z-operator's own GreenCoefficients (the same exponentials, weights
// and self terms: docs/formulation.md §6), in complex128. L_p is factored by partial-pivoting LU in
// complex128: on the host the LU factors are kept (rounded to Real) and applied by two triangular
// solves, on the device (device.hpp) cuBLAS inverts them and the inverses are kept (rounded to Real);
// the sweep's matrices stay in complex128 on both:
//   memory  34·Nz·orders·incidences complex128 (Ā⁻¹) + (3·orders)²·Nz·incidences complex (L_p);
//   apply   about 40·Nz·orders multiply-adds per right-hand side for Ā⁻¹, (3·orders)²·Nz for L⁻¹.
// The second term grows as orders²: for 2D lattices (orders = N1·N2) it dominates quickly.
#include <array>
#include <complex>
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "convolution/convolution.hpp"
#include "physics/krylov.hpp"
#include "physics/z_operator.hpp"

namespace gratingsim::physics {

/// none: plain GMRES/BiCGStab; averaged: P = L⁻¹ L̄ Ā⁻¹ below, always; automatic: on host backends the
/// sweep (below) for 1D lattices up to sweep_orders_limit orders (321 where a layer holds a metal), otherwise averaged for 1D lattices,
/// normal-vector formulation, complex128; each when its matrices need at most a quarter of the memory
/// left, else none (docs/solver.md §7: on the GPU averaged measured faster). Averaged, measured as the automatic choice before the sweep, on an H100 (gpu-cufft, complex128, validation/results/
/// preconditioner-h100.txt): configs/default.yaml 3.7× faster, si_lines_metrology in normal-vector
/// 5.1× (and all 204 solves converged instead of 199), wire_grid_polarizer 2.8×.
/// Why not more: 2D lattices, the slice blocks grow as orders² (problem_case_2: 1.6× fewer
/// iterations but 11× slower, the host inverses dominate: 2D lattices get `coarse` instead); Laurent's rule, whose operator is already
/// well conditioned in 1D (si_lines_metrology: 15 % more iterations and 2.8× slower with it); complex64, Ā can be nearly singular (guided modes of the averaged stack
/// at evanescent orders), and the rounding it amplifies left an ε = 12 lamellar grating in s
/// unconverged at 1e-6 (converged in 53 iterations without); in complex128 the same effect sets
/// floors near 1e-11 relative residual on such cases.
///
/// coarse (2D lattices, docs/solver.md §6.1, §7): the two-level P below (CoarseMatrices), only when asked
/// for. Measured on one core of the dev CPU (cpu-fftw): rectangles (validation/peers) 1.6× faster in
/// total at M = 6 and 10 (362 → 188 iterations at M = 6), pillars 96 instead of 154 iterations but
/// 0.1–0.3 s slower (the LU of A_c); on an H200 (gpu-fused) about half the iterations but a set-up of
/// 0.13 s against Krylov phases of 0.01–0.03 s: automatic leaves 2D lattices unpreconditioned.
///
/// sweep (sweep_preconditioner.hpp, docs/solver.md §6.3): P = A⁻¹ exactly, by a sweep over the slices with
/// every order coupled; a solve then takes one or two iterations, for a set-up of about 69·orders³
/// complex multiply-adds per slice and incidence on the host (114 on the device).
enum class Preconditioning { automatic, averaged, coarse, sweep, none };
std::string_view to_string(Preconditioning p);   ///< "auto", "averaged", "coarse", "sweep", "none"
Preconditioning parse_preconditioning(std::string_view name);  ///< throws InvalidArgument naming the choices

/// Per (incidence a, order m) the dense matrix Ā, n = 3·slices, column-major: element (i, j) at
/// ((a·orders + m)·n + j)·n + i, with i = slice·3 + component (x, y, z). The coarse preconditioner's
/// Green blocks are assembled as one (with C̄ = I, D̄ = 0); the preconditioner itself applies Ā⁻¹ by
/// AveragedSweep.
struct AveragedMatrices {
  int incidences = 0, orders = 0, slices = 0;
  std::vector<std::complex<double>> matrices;
  [[nodiscard]] std::size_t n() const { return std::size_t(3) * slices; }
  [[nodiscard]] std::size_t count() const { return std::size_t(incidences) * orders; }
};

/// Ā⁻¹ by the sweep of sweep_preconditioner.hpp for one order at a time: per (incidence a, order m) the
/// averaged stack's slices are 3×3 blocks (L'_p = I + D̄_p + (c_p self + ẑẑ) C̄_p), its waves the e and p
/// amplitudes of order m, so every matrix of the recursion is 3×3, 3×2, 2×3 or 2×2:
///   N_p = L'_p + Ẽ⁺ ρ_p Φ_p,  K_p = N_p⁻¹ Ẽ⁺,  H_p = N_p⁻¹ (Ẽ⁺ ρ_p + Ẽ⁻),  Γ_p = ρ_p Φ_p + w_p Π⁺ C̄_p,
///   Φ_p = w_p Π⁻ C̄_p,  ρ_{N−1} = e^{2ikz z_{N−1}} diag(r_s, r_p),  ρ_{p−1} = s_p² (ρ_p − Γ_p H_p),
/// and Ā⁻¹ b is one sweep up (v_p = N_p⁻¹ b_p − K_p g_p, g_{p−1} = s_p (g_p + Γ_p v_p), g_{N−1} = 0) and
/// one down (x_p = v_p − H_p a_p, a_{p+1} = s_{p+1} (a_p + Φ_p x_p), a_0 = 0). Built in O(Nz) per order
/// (the dense Ā's LU cost (3Nz)³), applied in about 40 multiply-adds per slice and order.
/// values: complex128, entry e of (a, p, m) at ((a·slices + p)·entries + e)·orders + m (consecutive
/// orders adjacent: a device thread per order reads consecutive addresses); the small matrices
/// row-major from their entry offset; step s_p (0 at p = 0).
struct AveragedSweep {
  static constexpr int inverse = 0, gain_g = 9, gain_a = 15, up = 21, down = 27, step = 33, entries = 34;
  int incidences = 0, orders = 0, slices = 0;
  std::vector<std::complex<double>> values;
  [[nodiscard]] std::size_t at(int a, int p, int entry, int m) const {
    return ((std::size_t(a) * slices + std::size_t(p)) * entries + std::size_t(entry)) * orders + std::size_t(m);
  }
};

/// Bytes the preconditioner needs in Real storage (its matrices and two scratch vectors).
std::size_t preconditioner_bytes(std::size_t slices, std::size_t orders, std::size_t incidences, std::size_t real_bytes);

/// The 3×3 mean tensors of one slice, row-major [row·3 + col]: c (the source J = C̄ f) and d (D̄;
/// rows of absent components zero), from the slice's kernels (K blocks of (2N1−1)(2N2−1) coefficients,
/// the engine's layout) and the convolution problem's pattern (outputs 0..2 are J, then D's
/// components: normal_field.hpp's d_axes).
/// The scalar problem (Laurent) gives c = χ̄ I, d = 0.
struct MeanTensors {
  std::array<std::complex<double>, 9> c{}, d{};
};
MeanTensors mean_tensors(const conv::Problem& problem, std::span<const std::complex<double>> slice_kernels);
/// mean_tensors of every engine slice of the problem, from all its kernels (the engine's layout).
std::vector<MeanTensors> slice_mean_tensors(const conv::Problem& problem, std::span<const std::complex<double>> kernels);
/// The same tensors at any Fourier offset Δ = (d1, d2) = m − m' (|d1| ≤ 2M1, |d2| ≤ 2M2): the
/// convolution maps order m' onto order m with C(Δ) and D(Δ); mean_tensors is Δ = 0.
MeanTensors kernel_tensors(const conv::Problem& problem, std::span<const std::complex<double>> slice_kernels, int d1,
                           int d2);

/// Assembles Ā for the slices' mean tensors and the Green coefficients of the problem (all its
/// incidences, of one or several wavelengths): one tensor per engine slice s = p·members + member
/// (problem.hpp), incidence a's slice p reads member_of(coefficients, a)'s.
AveragedMatrices averaged_matrices(const GreenCoefficients& coefficients, std::span<const MeanTensors> slices);

/// The sweep of Ā for the slices' mean tensors (one per engine slice p·members + member, as
/// averaged_matrices). Throws InvalidArgument naming the incidence, order index and slice where N_p is
/// singular (smallest LU pivot not above 1e-13 of its largest element, or not finite): a guided resonance
/// of the averaged stack below that slice.
AveragedSweep averaged_sweep(const GreenCoefficients& coefficients, std::span<const MeanTensors> slices);

/// The z-local part of A: per (incidence a, slice p) L_p, the diagonal block of A in the slices with
/// all orders coupled,
///   L_p = I + D_p⊛ − K_pp k1² C_p⊛    (K_pp: the diagonal block of K, self and reflected parts, one
///                                      3×3 dyad per order),
/// n_l = 3·orders, column-major, element (i, j) at ((a·slices + p)·n_l + j)·n_l + i with
/// i = component·orders + m (the batched layout's order within a (slice, rhs) block); and the
/// averaged L̄_p (the same with the mean tensors: one 3×3 per order, row-major) at
/// ((a·orders + m)·slices + p)·9.
struct LocalMatrices {
  int incidences = 0, orders = 0, slices = 0;
  std::vector<std::complex<double>> matrices, averaged;
  [[nodiscard]] std::size_t n() const { return std::size_t(3) * orders; }
  [[nodiscard]] std::size_t count() const { return std::size_t(incidences) * slices; }
};
/// `problem` is the convolution problem (pattern and sizes: slices × members engine slices), `kernels`
/// every engine slice's kernels in its layout, `slices` their mean tensors (as averaged_matrices).
LocalMatrices local_matrices(const GreenCoefficients& coefficients, const conv::Problem& problem,
                             std::span<const std::complex<double>> kernels, std::span<const MeanTensors> slices);

/// L_p's ingredients without its dense matrices, for the device to assemble them (device.hpp), O(1) per
/// element: L_p(ci·orders + m, cj·orders + m') = δ + Σ_{D terms (ci, cj, k)} κ_k(m − m')
///   + Σ_{source terms (o, cj, k)} G_pp(m)[ci][o] κ_k(m − m'),
/// κ_k the kernels of incidence a's engine slice p·members + member[a] (the problem's layout: n1, n2,
/// `kernels` per slice), G_pp = −k1² K_pp row-major 3×3 at ((a·orders + m)·slices + p)·9; the terms are
/// the pattern's (output, input, kernel), J outputs in `source`, D outputs in `d` with their axis for output
/// (Laurent: J_i = χ ⊛ E_i). L̄ as LocalMatrices::averaged; `groups` as coupled_components(), from the terms
/// and the non-zero entries of G_pp (a component pair that some term could couple counts as coupled).
struct LocalParts {
  int incidences = 0, orders = 0, slices = 0, members = 1, n1 = 1, n2 = 1, kernels_per_slice = 1;
  std::vector<int> member;  ///< per incidence
  std::vector<conv::Term> source, d;
  std::vector<std::complex<double>> green, averaged;
  std::span<const std::complex<double>> kernels;  ///< the caller's (the problem's): not copied, must outlive the set-up
  std::array<int, 3> groups{0, 0, 0};
};
LocalParts local_parts(const GreenCoefficients& coefficients, const conv::Problem& problem,
                       std::span<const std::complex<double>> kernels, std::span<const MeanTensors> slices);

/// The groups of Cartesian components that no element of any L_p couples: group[c] is the smallest
/// component that component c is connected to (1D gratings without conical incidence: {0, 1, 0}, y
/// apart from x and z; otherwise usually {0, 0, 0}). The device inverts each group's submatrices alone.
std::array<int, 3> coupled_components(const LocalMatrices& local);

/// The singularity test of every factorisation the preconditioners make (L_p, A_c, the sweeps' N_p), the
/// same on the host and the device. Partial pivoting never reports singularity, so a matrix counts as
/// singular when its smallest LU pivot |U_ii| is not above 1e-13 of its largest element |A_ij| (about
/// 450 ulp of complex128), or when an element is not finite: `largest` is the largest |A_ij| (infinite
/// where an element is not finite; NaN fails too), `smallest_pivot` the smallest |U_ii|.
bool regular_factorisation(double largest, double smallest_pivot);

/// regular_factorisation for every L_p (`largest`, `smallest_pivot` per matrix). Throws InvalidArgument
/// naming the first singular L_p (slice).
void expect_regular_local(std::span<const double> largest, std::span<const double> smallest_pivot, int slices);

/// The two-level preconditioner (`coarse`, docs/solver.md §6): on the coarse orders |m1| ≤ Mc1, |m2| ≤ Mc2
/// the exact inverse of A restricted to them (the principal submatrix A_c of A at those orders, all
/// slices and components), on every other order Ā⁻¹; block diagonal in that partition of the orders:
///   P x = Ā⁻¹ x on every order, then the coarse entries replaced by A_c⁻¹ x_c.
/// A_c per incidence, unknown u = (p·3 + i)·n_c + mc (slice p, component i, coarse order mc =
/// (c1 + Mc1)(2Mc2 + 1) + (c2 + Mc2)), n = 3·Nz·n_c, column-major (element (u, u') at u'·n + u, matrix a
/// at a·n²); block (m, m') of slices (q, p):
///   δ_qp (δ_mm' I + D_p(m − m')) + G_qp(m) C_p(m − m'),
/// with kernel_tensors() at the offset and G_qp = −k1² K_qp the z-operator's 3×3 Green blocks of the
/// coarse order m (Ā's assembly with C̄ = I, D̄ = 0 gives I + G).
/// Measured on the lead's prototype (validation/peers 'rectangles', M = 6, GMRES(100), tol 1e-6):
/// iterations 181 (none), 136 (Ā⁻¹ alone), 109 (Mc = 1), 78 (Mc = 2), 59 (Mc = 3).
struct CoarseMatrices {
  int incidences = 0, slices = 0, m1 = 0, m2 = 0;  ///< m1, m2: the coarse harmonics Mc1, Mc2
  std::vector<int> orders;                        ///< per coarse order mc, its index among all orders
  std::vector<std::complex<double>> matrices;
  [[nodiscard]] std::size_t n() const { return std::size_t(3) * slices * orders.size(); }
};

/// Coarse unknowns at most (n of CoarseMatrices): the dense LU costs (8/3) n³ real flops per incidence
/// (6e8 at this n), an application 8n² per right-hand side. Measured (docs/solver.md §7, one core of the
/// dev CPU, validation/peers 'rectangles' and 'pillars' at M = 6 and 10, 8 + 16 slices): at 1536
/// (Mc = 3 at 8 slices, 2 at 16) the LU took 1.5–2 s per point and every case was slower in total than
/// at 600 (Mc = 2 at 8 slices, 1 at 16; 0.2–0.3 s), which cut rectangles' total time 1.6× at both M.
constexpr std::size_t coarse_unknowns_limit = 600;
/// The coarse block's unknowns for coarse harmonics Mc (Mc1 = min(Mc, M1), Mc2 = min(Mc, M2)).
std::size_t coarse_unknowns(int slices, int m1, int m2, int mc);
/// The largest Mc ≥ 1 (Mc1, Mc2 as above, Mc ≤ max(M1, M2)) with coarse_unknowns ≤ coarse_unknowns_limit;
/// 0 when none fits (then the coarse preconditioner is Ā⁻¹ alone).
int coarse_harmonics(int slices, int m1, int m2);
/// Bytes of the coarse preconditioner in Real storage (Ā's factors, A_c's, two scratch vectors).
std::size_t coarse_preconditioner_bytes(std::size_t slices, std::size_t orders, std::size_t incidences,
                                        std::size_t coarse_unknowns, std::size_t real_bytes);

/// Assembles A_c for coarse harmonics Mc (as coarse_unknowns) from the problem's grids (one per
/// member), orders (all incidences, one run per member), convolution problem and kernels (per engine
/// slice p·members + member, problem.hpp).
CoarseMatrices coarse_matrices(std::span<const ZGrid> grids, std::span<const FloquetOrders> orders, const conv::Problem& problem,
                               std::span<const std::complex<double>> kernels, int mc);

/// As expect_regular_local for A_c per incidence.
void expect_regular_coarse(std::span<const double> largest, std::span<const double> smallest_pivot);

/// y ← P x for the whole batch (batched layout of vector_space.hpp; x and y distinct, in memory()).
template <class Real>
class Preconditioner {
 public:
  using Complex = std::complex<Real>;
  virtual ~Preconditioner() = default;
  virtual void apply(const Complex* x, Complex* y, Stream stream) = 0;
  [[nodiscard]] virtual Memory memory() const = 0;
};

/// Host application of P = L⁻¹ L̄ Ā⁻¹: factors every L_p (partial-pivoting LU in complex128, OpenMP
/// over the matrices; throws as expect_regular_local does) and keeps the factors rounded to Real; a
/// matrix whose Cartesian components split into groups that no element couples (φ = 0 on a 1D
/// grating: y | x, z) is factored and applied group by group (docs/solver.md §6).
/// apply: Ā⁻¹ by the averaged sweep, OpenMP over (rhs, order), in complex128; L⁻¹ OpenMP over (slice,
/// rhs) blocks, a forward and a back substitution summed in complex128. rhs_incidence[r] names rhs r's
/// incidence. `local` without matrices (empty vectors, sizes as `averaged`): P = Ā⁻¹ alone (the coarse
/// preconditioner's outer part).
template <class Real>
std::unique_ptr<Preconditioner<Real>> make_host_preconditioner(AveragedSweep averaged, LocalMatrices local,
                                                               std::vector<int> rhs_incidence);

/// The coarse preconditioner on the host: `averaged` (Ā⁻¹ alone, from make_host_preconditioner with an
/// empty `local`) applied, then the coarse entries replaced by A_c⁻¹ x_c: A_c's partial-pivoting LU in
/// complex128 (throws as expect_regular_coarse), factors rounded to Real, a forward and a back
/// substitution per rhs, an incidence's rhs in one pass over its factors (OpenMP over the incidences).
/// `orders`: all orders of the batched layout.
template <class Real>
std::unique_ptr<Preconditioner<Real>> make_host_coarse_preconditioner(std::unique_ptr<Preconditioner<Real>> averaged,
                                                                      CoarseMatrices coarse, std::vector<int> rhs_incidence,
                                                                      int orders);

/// A · P as one operator (the Krylov solver sees A P; x = P u afterwards): apply enqueues P on the
/// problem's stream, then A. `scratch` space for P x is allocated here.
template <class Real>
class RightPreconditioned final : public LinearOperator<Real> {
 public:
  using Complex = std::complex<Real>;
  RightPreconditioned(LinearOperator<Real>& op, Preconditioner<Real>& p, Stream stream)
      : op_(op), p_(p), stream_(stream), scratch_(op.make_space(1)) {}
  [[nodiscard]] const BatchLayout& layout() const override { return op_.layout(); }
  [[nodiscard]] std::unique_ptr<VectorSpace<Real>> make_space(int count) const override {
    return op_.make_space(count);
  }
  void apply(const Complex* x, Complex* y) override {
    p_.apply(x, scratch_->data(0), stream_);
    op_.apply(scratch_->data(0), y);
  }
  /// x ← P u (distinct vectors in the space's memory; enqueued on the stream).
  void recover(const Complex* u, Complex* x) { p_.apply(u, x, stream_); }

 private:
  LinearOperator<Real>& op_;
  Preconditioner<Real>& p_;
  Stream stream_;
  std::unique_ptr<VectorSpace<Real>> scratch_;
};

}  // namespace gratingsim::physics
