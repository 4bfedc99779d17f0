#pragma once
// The physics library's entry point: plain structs in (structure.hpp, SolverOptions), plain structs
// out (SolveResult). io-free; the application maps its case files onto these.
//
//   physics::Structure s = ...;                       // lattice, media, layers, shapes
//   physics::SolverOptions o;  o.m1 = 10;  o.richardson = true;
//   physics::SolveResult res = physics::solve(s, {{0.633, 30, 0}}, o);
//   double r0 = res.incidences[0].orders[k].R[physics::s_pol];
//
// Conventions (docs/formulation.md): exp(−iωt); amplitudes along the s/p basis of §2 (ê = ẑ×t̂,
// p̂± = (±kz t̂ − kρ ẑ)/k), phase reference z = 0 (the substrate's surface) for reflection and
// transmission alike. Efficiencies are fractions of the incident z-flux.
#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"
#include "core/error.hpp"
#include "physics/krylov.hpp"
#include "physics/normal_field.hpp"
#include "physics/phase_times.hpp"
#include "physics/preconditioner.hpp"
#include "physics/structure.hpp"

namespace gratingsim::physics {

/// An iterative solve stopped above its tolerance (thrown only with OnUnconverged::throw_error).
class NotConverged : public Error {
 public:
  using Error::Error;
};

enum class OnUnconverged {
  throw_error,  ///< throw NotConverged naming the incidence, polarisation, iterations and residual
  mark,         ///< return the result with SolveStats::converged = false and a line in warnings
};

struct SolverOptions {
  int m1 = 5, m2 = 0;                 ///< orders m ∈ [−M1, M1] × [−M2, M2] (M2 = 0 for 1D lattices)
  /// automatic: BiCGStab on 2D lattices whose layers hold no metal, GMRES(gmres_restart) on 1D lattices and
  /// metals (solver.cpp, krylov_method; docs/solver.md §7); or gmres, bicgstab, dense_lu (the small-problem
  /// reference).
  Method method = Method::automatic;
  int gmres_restart = 40;
  /// Right preconditioner of the iterative methods (preconditioner.hpp): automatic uses it for 1D
  /// lattices in complex128 when its matrices need at most a quarter of the memory left (else none,
  /// with a warning); averaged requires it (InvalidArgument when it does not fit); none.
  Preconditioning preconditioner = Preconditioning::automatic;
  double tolerance = 1e-10;           ///< relative residual ‖e_b − A e‖/‖e_b‖ per rhs (≥ 1e-6 in single)
  int max_iterations = 2000;
  /// Solve at Nz and 2Nz slices and report X = (4 X_2N − X_N)/3 for every efficiency and Jones
  /// amplitude (O(Δz⁴) instead of O(Δz²)); Ψ, Δ, Mueller follow from the extrapolated Jones matrix.
  bool richardson = false;
  conv::Backend backend = conv::Backend::cpu_direct;
  /// normal_vector (docs/normal-vector.md: the unknown F, E = M F; fast convergence in harmonics for p,
  /// crossed gratings and metals) or laurent (J = χ ⊛ E, the scalar convolution).
  Formulation formulation = Formulation::normal_vector;
  /// Raster pixels per axis on which 2D normal fields are built (a power of two); 0: the default,
  /// default_normal_field_resolution(M1, M2).
  int normal_field_resolution = 0;
  Precision precision = Precision::double_;
  OnUnconverged on_unconverged = OnUnconverged::throw_error;
  bool keep_fields = false;           ///< return the field harmonics per slice
  double rayleigh_tolerance = 1e-6;   ///< |kz1| < tol·k1 counts as a Rayleigh anomaly
  /// Members solved together as one batched problem, at most (issue #10; problem.hpp: a member is one
  /// structure at one wavelength, with its own kernels and slice grid, every right-hand side its own
  /// Krylov iteration; a geometry batch, solve(pairs), has several structures per wavelength). Only
  /// members with equally many incidences (a sweep's θ × φ list is the same at every wavelength),
  /// equally many slices and the same lattice share a batch; a batch holds as many as
  /// memory_limit_bytes (device: the device's free memory) allows, the preconditioner included.
  /// 0: automatic, as many as fit on device backends where one member's problem has fewer than
  /// device_batch_unknowns unknowns (a small problem's products are launch-bound: one batch launches
  /// once for all members) or takes the sweep preconditioner (member_plan), else one; one on host backends
  /// (host_sweep_members with the sweep): there a batch saves nothing per product
  /// but keeps applying A to every member until the slowest converges (configs/default.yaml's 41 wavelengths, one
  /// thread of the dev machine, validation/scaling/wavelength_batch: cpu-fftw 1.8 s one by one, 6.6 s
  /// in one batch; the same 2516 iterations, at most 72 per rhs, and a basis 41× larger). Results do
  /// not depend on it (validation/physics/test_batched_wavelengths.cpp).
  int max_wavelengths_per_batch = 0;
  /// Host backends refuse problems estimated to need more; device backends are checked against the
  /// device's free memory instead (cudaMemGetInfo, 90 % of it).
  std::size_t memory_limit_bytes = std::size_t(16) << 30;
};

/// One member's unknowns (one wavelength of one structure: 3 components × orders × slices of the
/// finest grid × right-hand sides) from which device backends solve each member on its own when
/// max_wavelengths_per_batch is automatic. A batch applies A to every member until its slowest
/// converges; it pays where one member's products are launch-bound. Measured on an H100 (session 10, gpu-fused, one wavelength
/// against batches of 4–6 per problem, sweep of 5 runs each, app/work_units.hpp's units):
/// configs/default.yaml (3e3 unknowns per wavelength) 361 → 535 points/s (medians); si_lines_metrology
/// (2.4e4, preconditioned, iterations 60–290 across its wavelengths) 96.5 → 73.9 points/s.
inline constexpr double device_batch_unknowns = 1e4;

/// The tenths of a device's free memory (cudaMemGetInfo) a device solve takes as its memory budget; the rest is
/// left to what the estimate does not count (the CUDA context, cuFFT's and cuBLAS's scratch).
inline constexpr std::size_t device_budget_tenths = 9;

/// How one member (`structure` at one wavelength with `incidences` incidences) would be solved with
/// `options`: whether with the sweep preconditioner (asked for, or automatic's choice: on host backends 1D
/// lattices up to sweep_orders_limit orders (up to 321 whose layers hold a metal), on device backends 1D lattices whose layers hold a metal at
/// one of `wavelengths`), and the memory the member takes on its finest grid, that preconditioner included
/// (the estimate the batching rule checks). The sweep's members batch where that pays: on a device its
/// set-up is a chain of latency-bound launches per slice (cuBLAS products, the batched Gauss–Jordan of
/// physics/device_inverse.hpp) whose time hardly grows with the members beside it, so automatic batches
/// them at any size and app/work_units.hpp sizes its units by this memory; on the host its set-up runs its
/// groups (one or two per incidence of a 1D lattice, of unequal cost) on the OpenMP threads, so automatic
/// batches host_sweep_members of them.
struct MemberPlan {
  bool sweep = false;
  std::size_t bytes_per_member = 0;
  /// The memory budget (solve's: device_budget_tenths of a device's free memory) a problem of this member
  /// alone needs to keep its preconditioner: the preconditioner's matrices take at most a quarter of what the
  /// problem leaves, its build peak half.
  std::size_t budget_per_member = 0;
};
MemberPlan member_plan(const Structure& structure, std::size_t incidences, std::span<const double> wavelengths,
                       const SolverOptions& options);

/// The members of `incidences` incidences each that automatic batches on a host backend when they take the
/// sweep: threads / incidences, at least one, so that every thread has a group of the sweep even with one group
/// per incidence (conical incidence), and where an incidence has two of unequal cost (s and p: about 4 and 15
/// orders³ per slice) the threads' dynamic schedule balances them: with one member per two threads the p
/// groups kept their threads busy while the s groups' idled (default.yaml at 8 wavelengths, 2 threads of the
/// dev CPU: 15.2 / 14.1 → 11.6 / 12.7 s, docs/solver.md §1.1).
std::size_t host_sweep_members(std::size_t incidences, int threads);

inline constexpr int s_pol = 0, p_pol = 1;  ///< index of the incident polarisation in [2]-arrays

/// Amplitude ratios (outgoing/incident) in the s/p basis; `s_from_p` is the outgoing s amplitude
/// for a unit p-polarised incident wave.
struct Jones {
  Complex s_from_s, s_from_p, p_from_s, p_from_p;
};

struct DiffractionOrder {
  int m1 = 0, m2 = 0;
  bool reflected = false;    ///< propagates in the superstrate
  bool transmitted = false;  ///< propagates in a lossless substrate
  std::array<double, 3> reflected_direction{};    ///< unit wavevector (kx, ky, kz1)/k1; zero if not
  std::array<double, 3> transmitted_direction{};  ///< (kx, ky, −kz2)/k2; zero if not
  std::array<double, 2> R{}, T{};                 ///< efficiencies for unit s, p incidence
  Jones reflection{}, transmission{};             ///< zero where the order does not propagate
};

/// From the zeroth-order reflection Jones matrix. tan Ψ e^{iΔ} = r_pp/r_ss with the p̂± basis of
/// docs/formulation.md §2 (§11) and exp(−iωt); this is the "Nebraska" convention of ellipsometry: r_pp = −r_ss
/// at normal incidence, so Δ = 180° there and for a bare dielectric below Brewster's angle.
/// Ψ ∈ [0°, 90°], Δ ∈ (−180°, 180°].
/// Mueller matrix M = A (J ⊗ J*) A⁻¹ in the (p, s) basis, J = [[r_pp, r_ps], [r_sp, r_ss]],
/// A = [[1,0,0,1],[1,0,0,−1],[0,1,1,0],[0,i,−i,0]], i.e. Stokes S = (|Ep|²+|Es|², |Ep|²−|Es|²,
/// 2Re(Ep Es*), −2Im(Ep Es*)). Not normalised: M00 = (R_s + R_p)/2 of order 0, and an isotropic
/// sample gives M/M00 = [[1, −N, 0, 0], [−N, 1, 0, 0], [0, 0, C, S], [0, 0, −S, C]] with
/// N = cos 2Ψ, C = sin 2Ψ cos Δ, S = sin 2Ψ sin Δ.
struct Ellipsometry {
  double psi_deg = 0, delta_deg = 0;
  std::array<std::array<double, 4>, 4> mueller{};
};
Ellipsometry ellipsometry(const Jones& reflection);

/// Total field harmonics (the physical field E; in the normal-vector formulation E = M F, not the
/// unknown F) at the slice centres, per incident polarisation, laid out
/// [slice][component x,y,z][order] (orders in the engine's harmonic layout), with the grid and the
/// orders they were solved on: E(x, y, z[q]) = Σ_m e_q(m) e^{i(kx[m] x + ky[m] y)}.
struct Fields {
  std::vector<double> z, thickness;  ///< the slice grid (discretisation.hpp's slice_grid), top down
  std::vector<double> kx, ky;        ///< lateral wavevector of each order (floquet.hpp), harmonic layout
  std::array<std::vector<Complex>, 2> harmonics;
};

struct IncidenceResult {
  Incidence incidence;
  std::vector<DiffractionOrder> orders;  ///< every order that propagates up or down
  std::array<double, 2> total_R{}, total_T{};  ///< total_T is NaN when the substrate absorbs
  /// 1 − ΣR − ΣT (1 − ΣR when the substrate absorbs: then it includes the substrate).
  std::array<double, 2> absorption{};
  /// |1 − ΣR − ΣT| when every material is lossless (a pure discretisation/solver error), else NaN.
  std::array<double, 2> energy_balance_error{};
  bool substrate_lossless = true, lossless = true;
  Ellipsometry zeroth_order;               ///< from the order-0 reflection
  std::vector<int> slice_counts;           ///< Nz of each solve (two with Richardson: Nz, 2Nz)
  std::vector<std::array<SolveStats, 2>> solves;  ///< per solve, per polarisation
  std::vector<bool> preconditioned;        ///< per solve: whether a preconditioner was used (auto: also a switch to the sweep)
  std::vector<Method> methods;             ///< per solve: the method that ran (SolverOptions::method resolved)
  std::optional<Fields> fields;            ///< with keep_fields (finest grid)
};

struct SolveResult {
  std::vector<IncidenceResult> incidences;  ///< in the order given
  std::vector<std::string> warnings;        ///< Rayleigh anomalies, absorbing substrate, unconverged solves
  /// Wall time per phase (phase_times.hpp), summed over the batched problems and the Richardson
  /// grids of this call; `writing` is 0 (the caller's).
  PhaseTimes phases;
};

/// The Krylov method a solve of `structure` at `wavelengths` (the structure's length unit) runs for `requested`:
/// itself, unless Method::automatic: BiCGStab on 2D lattices whose layers hold no metal (Re ε < 0) at any of the
/// wavelengths, GMRES otherwise (docs/solver.md §7; each wavelength batch decides for its own wavelengths).
Method krylov_method(Method requested, const Structure& structure, std::span<const double> wavelengths);

/// Solves every incidence; those sharing a wavelength are batched into one problem (their
/// convolutions share each spectrum), and wavelengths with equally many incidences into one problem
/// too (max_wavelengths_per_batch). A rotated 1D grating (Lattice::rotation_deg = α ≠ 0) is solved in
/// its own frame, at azimuths φ − α, and its results are returned in the lab frame: order directions,
/// Fields::kx, ky and the field components Ex, Ey turned by +α; Jones matrices (each order's own s/p
/// basis), efficiencies, Ψ, Δ and Mueller are the frame's; order (m1, 0) is k_ρ,inc + m1·G with G
/// along (cos α, sin α) (structure.hpp). Throws InvalidArgument for invalid structures or options,
/// and when the estimated memory exceeds memory_limit_bytes (saying how much is needed);
/// NotConverged per on_unconverged.
SolveResult solve(const Structure& structure, std::span<const Incidence> incidences, const SolverOptions& options);

/// One structure with the incidences to solve on it: a pair of a batched solve.
struct StructureIncidences {
  const Structure& structure;
  std::span<const Incidence> incidences;
};

/// Solves several structures at once (issue #11: a fit's finite-difference Jacobian, the structures
/// at the perturbed parameters): every (structure, wavelength) is a member, and members of equally
/// many incidences, equally many slices and the same lattice share batched problems as the
/// wavelengths of one structure do (max_wavelengths_per_batch, memory_limit_bytes); the others are
/// solved in batches of their own. One result per pair, in the order given, equal to solve(structure,
/// incidences, options) of that pair (bit for bit on the host backends,
/// validation/physics/test_batched_geometries.cpp), except `phases`: a batch's time is counted once,
/// in the result of its first member's pair. Throws as solve() does.
std::vector<SolveResult> solve(std::span<const StructureIncidences> pairs, const SolverOptions& options);

}  // namespace gratingsim::physics
