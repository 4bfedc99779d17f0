#pragma once
// The exact preconditioner P = A⁻¹ by a sweep over the slices (issue #10; docs/solver.md §6.3): every
// order coupled within a slice, the slices coupled through the z-operator's up- and down-going waves.
//
// Per incidence and order m the Green blocks of A = I + D⊛ + G C⊛ (G = −k1² K, z_operator.hpp) are
// rank 2 in the direct parts and separable in the reflected one (preconditioner.cpp, green_tensors):
//   up (p below q) = Ẽ⁺ Π⁺,  down (p above q) = Ẽ⁻ Π⁻,  reflected = Ẽ⁺ diag(r_s, r_p) Π⁻,
//   Ẽ± = −k1² (i/2kz) [ê, p̂±] (3×2),  Π± = [ê, p̂±]ᵀ (2×3, bilinear: no conjugation).
// With the source y_p = C_p x_p and two amplitudes per order and direction (e, p), the down-going
// a⁻_q = Σ_{p<q} e^{ikz(z_p−z_q)} w_p Π⁻ y_p and the up-going a⁺_q (the sources below q and the
// substrate's reflection of every down-going wave),
//   (A x)_q = L'_q x_q + Ẽ⁺ a⁺_q + Ẽ⁻ a⁻_q,   L'_q = I + D_q⊛ + (c_q self + ẑẑ) C_q⊛ (3·orders square),
//   a⁻_{q+1} = s_{q+1} (a⁻_q + Φ_q x_q),  Φ_q = W_q Π⁻ C_q,  a⁻_0 = 0,
//   a⁺_q = s_{q+1} (a⁺_{q+1} + W_{q+1} Π⁺ C_{q+1} x_{q+1}),  a⁺_{N−1} = e^{2ikz z_{N−1}} r (a⁻_{N−1} + Φ_{N−1} x_{N−1}),
// s_q = e^{ikz(z_{q−1} − z_q)} the z-operator's steps, W_q = w_q per order. Everything below slice q
// answers a down-going wave leaving q (a⁻_q + Φ_q x_q) with a⁺_q = ρ_q (a⁻_q + Φ_q x_q) + g_q (the
// Riccati form of invariant imbedding): ρ_{N−1} = e^{2ikz z_{N−1}} r, g_{N−1} = 0, and from slice j to
// q = j − 1
//   N_j = L'_j + Ẽ⁺ ρ_j Φ_j,  H_j = N_j⁻¹ (Ẽ⁺ ρ_j + Ẽ⁻),  K_j = N_j⁻¹ Ẽ⁺,  Γ_j = ρ_j Φ_j + W_j Π⁺ C_j,
//   ρ_q = S_j (ρ_j − Γ_j H_j) S_j,        g_q = S_j (g_j + Γ_j v_j),  v_j = N_j⁻¹ b_j − K_j g_j,
// S_j = diag(s_j). Applying P = A⁻¹ to b is then one sweep up (v_j and g, from the bottom) and one down:
//   x_q = v_q − H_q a⁻_q,  a⁻_{q+1} = s_{q+1} (a⁻_q + Φ_q x_q).
// Every factor is a step (modulus ≤ 1) or a slice's own response: nothing is divided by e^{ikz Δz}, so
// the sweep is stable for evanescent orders as the z-operator's sweeps are. Cost per incidence and slice
// (H = orders, one group: n = 3H, h = 2H): to build, ρ_jΦ_j h²n (N_j's update is Ẽ⁺(ρΦ), Γ_j = ρΦ + WΠ⁺C),
// its LU n³/3, H_j by the factors n²h, ρ's update h²n: 51 H³ complex multiply-adds (Ẽ⁺ is one 3×2 block per
// order, so Ẽ⁺ρ, Ẽ⁺(ρΦ) and K_j never cost a dense product; where s and p decouple, 14 H³); memory 27 H²
// complex numbers; an application about 27 H² multiply-adds per right-hand side (where s and p decouple,
// each rhs's sweep runs in its own group only: the other group's input is zero). The device (device_sweep_preconditioner.cu)
// keeps N_j⁻¹ and K_j instead: 33 H². Exact in exact arithmetic: a Krylov solve preconditioned with it
// converges in one or two iterations (the rounding of the set-up); worth it where H is small (1D
// gratings, coarse 2D ones), where the iterations it saves are hundreds (docs/solver.md §6.3 has the
// measurements).
#include <complex>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"
#include "core/block_pool.hpp"
#include "physics/preconditioner.hpp"
#include "physics/z_operator.hpp"

namespace gratingsim::physics {

/// The sweep's matrices on the host. Without conical incidence on a 1D grating (every t̂ along x: ê along y,
/// p̂± in the xz plane) and with kernels that do not mix y with x, z, the e amplitudes and E_y form a sweep
/// of their own and the p amplitudes with E_x, E_z another (s and p polarisation decouple): an incidence
/// then has two groups, n = orders and 2·orders, h = orders each, for about a third of the work; otherwise
/// one group, n = 3·orders, h = 2·orders. Per group G and slice p, column-major, complex128, unknown
/// (c, m) at c·orders + m over the group's components c (indices into x, y, z, in order), amplitude
/// (k, m) at k·orders + m over its polarisations (0 = e, 1 = p):
///   the LU factors of N_p (n × n; unit lower L and upper U in one matrix, as LAPACK's getrf) at
///   G.matrices + p·n², its row permutation (N_p = P⁻¹ L U, P moving row i to row permutation[i]) at
///   permutation_at[G] + p·n; gain_a H_p (n × h), up Γ_p and down Φ_p (h × n) at G.gains + p·n·h;
///   step s_p per order at (a·slices + p)·orders + m (0 at p = 0); Ẽ⁺ (n × h) at G.edges.
/// K_p = N_p⁻¹ Ẽ⁺ is not kept: the application forms v_p = N_p⁻¹ (b_p − Ẽ⁺ g) by the factors, and Ẽ⁺
/// is one 3×2 block per order (a column (k, m) is non-zero only in rows (c, m)), so Ẽ⁺ g costs n·np.
struct SweepGroup {
  int incidence = 0;
  std::vector<int> components, polarisations;
  std::size_t matrices = 0, gains = 0;  ///< offsets into local (lu) and into down, source_up (gain_a, up)
  std::size_t edges = 0, rho = 0;       ///< offsets into SweepInputs' e_plus, e_minus and rho
  std::size_t rows = 0, amplitude_rows = 0;  ///< offsets into SweepInputs' self_rows and down_rows, up_rows
  [[nodiscard]] std::size_t n(int orders) const { return components.size() * std::size_t(orders); }
  [[nodiscard]] std::size_t h(int orders) const { return polarisations.size() * std::size_t(orders); }
};
/// The dense per-slice arrays (N_p's factors, H_p, Γ_p, Φ_p and the z-local inputs): sized once, not initialised by
/// the allocation; the set-up writes every element, each slice's by the thread that fills it (sweep_inputs sets a
/// slice's blocks whole; sweep_matrices zeros what Woodbury's form leaves unused). Their blocks are kept from one
/// batch to the next of the same shape (core/block_pool.hpp), so a sweep's wavelengths do not fault pages in again.
using DenseArray = std::vector<std::complex<double>, RecycledAllocator<std::complex<double>>>;
/// A uniform run of one group in Woodbury's form on the host (run_bottoms; docs/solver.md §6.3): slices
/// [top, bottom], whose L', Φ and Ψ = W Π⁺ C are the same. At `at` in SweepMatrices::run_data, column-major:
/// L''s LU factors (n × n, as lu; its permutation at permutation_at in run_permutation), B = L'⁻¹Ẽ⁺ and
/// E = L'⁻¹Ẽ⁻ (n × h each), D_m = ΦB, I − F_m = I − ΦE, G_B = ΨB and G_E = ΨE (h × h each). A slice p of the
/// run keeps in its own lu slot the LU factors of Y_p = I + ρ_p D_m (h × h) followed by ρ_p (h × h) (n² ≥ 2h²
/// where h < n), Y_p's permutation in its permutation slot, Φ in down and Ψ (not Γ_p) in up; its gain_a is
/// unused. N_p⁻¹ = L'⁻¹ − B Y_p⁻¹ρ_p Φ L'⁻¹ and H_p a = E a + B Y_p⁻¹ρ_p (I − F_m) a: the application uses
/// these forms.
struct SweepRun {
  int group = 0, top = 0, bottom = 0;
  std::size_t at = 0, permutation_at = 0;
};
struct SweepMatrices {
  int incidences = 0, orders = 0, slices = 0;
  std::vector<SweepGroup> groups;  ///< incidence by incidence
  DenseArray lu, gain_a, up, down;
  std::vector<std::complex<double>> step, e_plus;
  std::vector<int> permutation;
  std::vector<std::size_t> permutation_at;  ///< per group
  std::vector<SweepRun> runs;
  std::vector<int> run_of;  ///< per (group k, slice p) at k·slices + p: its run in `runs`, −1 in the direct form
  DenseArray run_data;
  std::vector<int> run_permutation;
};

/// The host takes Woodbury's form for runs of at least this many slices (where h < n): the run's own matrices
/// (n² + 2nh + 4h², 37·orders² for a conical group) then add at most 4.6·orders² per slice to the 27 the
/// direct form stores, so the host's memory estimate (33 per slice) stays an upper bound.
constexpr int host_woodbury_least_run = 8;

/// The automatic choice (docs/solver.md §7) takes the sweep on host backends for 1D lattices up to this many orders
/// (M ≤ 80): its set-up, about 14·orders³ complex multiply-adds per slice there (s and p decouple
/// without conical incidence; 19 before session 34, 37 before session 16 kept N_p's factors instead of its inverse), took
/// 4.1 s with the 37 for all of validation/peers' metal_1d at M = 80 (16 + 32 slices, one core of the
/// dev CPU), whose solves did not converge in 3000 iterations without it. Layers holding a metal take it up to twice
/// as many orders (physics/solver.cpp, memory_plan).
constexpr std::size_t sweep_orders_limit = 161;

/// Bytes of the sweep preconditioner: its matrices per incidence and slice (on a device 41·orders² complex
/// numbers for conical groups: N⁻¹, K, H, Γ, Φ and the transfers T, U; on the host 33, the device's count
/// before session 25 kept so that host choices do not move, where the host stores 27), on a device the
/// run form's scratch per incidence (99·orders² for a conical group: L'⁻¹, B, E, C_m, D_m, I − F_m, I − G_B, −G_E,
/// two powers of the one-slice map and the doubling's temporaries; device_sweep_preconditioner.cu) and its scratch (a
/// vector's worth per right-hand side and, on a device, the application's workspace, 7·orders per slice; two
/// right-hand sides per incidence), complex numbers of `real_bytes` parts (the host and the device keep
/// complex128: real_bytes = 8).
std::size_t sweep_preconditioner_bytes(std::size_t slices, std::size_t orders, std::size_t incidences,
                                       std::size_t real_bytes, bool on_device);
/// Where incidence a's groups stand among `groups` (which come incidence by incidence): [first[a],
/// first[a + 1]), `incidences` + 1 entries.
std::vector<int> first_groups(std::span<const SweepGroup> groups, int incidences);

/// What the sweep's recursion reads, the z-local parts, built for every (group, slice) at once: per group
/// and slice L'_p (n × n, at G.matrices + p·n²), Φ_p (down) and W Π⁺ C_p (source_up; h × n, at G.gains +
/// p·n·h); per group Ẽ⁺, Ẽ⁻ (n × h, at G.edges) and ρ_{N−1} (h × h, at G.rho); the steps as in
/// SweepMatrices. Column-major, complex128.
///
/// The three dense parts are sums over the pattern's terms of a row coefficient times a kernel value
/// κ_t(m − m'), and are assembled from these (on the host by sweep_inputs, on the device by the device
/// set-up, where the dense parts of M = 120 orders were 80 MB per 8 slices to build and upload):
///   L'_p((i, m), (j, m')) = δ + Σ_{D terms (c_i ← c_j)} κ_t + Σ_{J terms (o ← c_j), o in the group} self(i, m)[o] κ_t
///   Φ_p((k, m), (j, m'))  = Σ_{J terms (o ← c_j), o in the group} down(k, m)[o] κ_t,   W Π⁺ C_p likewise with up,
/// c_i the group's i-th component, self(i, m)[o] = (c_p self + ẑẑ)_{c_i o}(m), down(k, m)[o] = w_p (Π⁻)_{k o}(m)
/// and up(k, m)[o] = w_p (Π⁺)_{k o}(m): self_rows (n × 3, row (i, m) at G.rows + p·n·3 + (i·orders + m)·3),
/// down_rows and up_rows (h × 3 at G.amplitude_rows + p·h·3). κ_t(m − m') of incidence a's engine slice
/// p·members + member[a]: kernels[(p·members + member[a])·kernel_count·kernel_size + t.kernel·kernel_size +
/// (d1 + n1 − 1)(2n2 − 1) + d2 + n2 − 1], (d1, d2) the difference of the orders' indices (m = i1·n2 + i2).
struct SweepInputs {
  int incidences = 0, orders = 0, slices = 0;
  std::vector<SweepGroup> groups;
  DenseArray local, down, source_up;
  std::vector<std::complex<double>> e_plus, e_minus, rho, step;
  std::vector<std::complex<double>> self_rows, down_rows, up_rows;
  std::vector<conv::Term> source_terms, d_terms;  ///< J outputs; D terms with their axis as output
  std::span<const std::complex<double>> kernels;  ///< the problem's: not copied, must outlive the set-up
  int n1 = 1, n2 = 1, kernel_count = 1, members = 1;
  std::size_t kernel_size = 1;
  std::vector<int> member;  ///< per incidence
};

/// The inputs for the Green coefficients of the problem (all its incidences, one or several members),
/// its convolution problem and every engine slice's kernels (engine slice p·members + member,
/// problem.hpp). OpenMP over (group, slice). `dense` false: the row coefficients only (local, down and
/// source_up left empty), for the device set-up, which assembles them itself.
SweepInputs sweep_inputs(const GreenCoefficients& coefficients, const conv::Problem& problem,
                         std::span<const std::complex<double>> kernels, bool dense = true);

/// Uniform runs, where the recursion takes Woodbury's form on the host and the run form on the device (docs/solver.md §6.3): per slice p of group `group`,
/// the bottom (largest) slice of the run of consecutive slices whose L'_p, Φ_p and W Π⁺ C_p are the same bit for
/// bit, which holds where their row coefficients (self_rows, down_rows, up_rows) and their engine slices'
/// kernels are (a layer whose content does not vary with z, cut into slices of equal thickness); p itself where
/// slice p + 1's differ. The steps may differ within a run.
std::vector<int> run_bottoms(const SweepInputs& inputs, std::size_t group);
/// Per slice of group `group`: its run's bottom slice (run_bottoms) where the run has at least `least_run` slices,
/// −1 elsewhere. Within such runs the host takes Woodbury's form where h < n (an h × h factorisation per slice
/// instead of the n × n one, at the price of the run's own L' and a few products: the p group of a 1D grating
/// without conical incidence, n = 2h; conical groups, n = 3h/2), from host_woodbury_least_run slices; the device
/// takes its run form (device_sweep_preconditioner.cu: the run's slices by doubling, a few levels instead of a slice
/// after another) for every group, from device_least_run slices.
std::vector<int> long_run_bottoms(const SweepInputs& inputs, std::size_t group, int least_run);
/// The device's least run for its run form.
constexpr int device_least_run = 4;

/// The sweep's recursion on the host, from the bottom slice up, OpenMP over the groups; in Woodbury's form
/// (SweepRun) within uniform runs of at least host_woodbury_least_run slices for groups with h < n, unless
/// `woodbury` is false (tests compare the two), and in the direct form where a run's L' is singular. Throws
/// InvalidArgument naming the incidence and slice where N_p is singular (smallest LU pivot, of N_p or in
/// Woodbury's form of Y_p, not above 1e-13 of its largest element, or not finite).
SweepMatrices sweep_matrices(SweepInputs inputs, bool woodbury = true);
/// The text of that refusal (the device set-up's too).
std::string singular_slice_text(int incidence, int slice, double pivot, double largest);

/// Host application: OpenMP over the right-hand sides, in complex128 (x and y rounded from and to Real).
/// rhs_incidence[r] names rhs r's incidence.
template <class Real>
std::unique_ptr<Preconditioner<Real>> make_host_sweep_preconditioner(SweepMatrices sweep, std::vector<int> rhs_incidence);

}  // namespace gratingsim::physics
