#pragma once
// The discrete problem (docs/formulation.md §5–8) of one or several members for every right-hand
// side r = 2·incidence + polarisation (0 = s, 1 = p) of its incidences (issue #10, wavelengths batched;
// issue #11, geometries batched). A member w is one structure at one wavelength with its incidences:
// the incidences come as `members` runs of equally many incidences, run w all of one wavelength, so
// that r = 2·(w·A + a) + pol for A incidences per member. Members may differ in wavelength and in
// geometry (a fit's perturbed structures) but not in the problem's shape: equally many slices, the same
// lattice. Each member has its own slice grid (discretise(its structure, slice_factor): thicknesses
// differ between geometries, members of one structure share it) and its own kernels (through ε(λ)
// and the geometry), so the convolution engine sees each member as its own stack of slices:
// engine slice s = p·members + w holds slice p's kernels of member w, with the A·2
// right-hand sides of that member as its per_slice groups. With that order the engine's layout
// (s, rhs of the member, block) is, element for element, the Krylov layout (p, r, block) below, and
// the convolution needs no notion of members. Everything else is per incidence already: orders,
// Green coefficients (with the incidence's k1 and its member's grid), background field, far field
// (phase reference z = 0 of each member, as alone). Every rhs's Krylov
// iteration is its own (per-rhs scalars): members with different convergence finish at different
// iterations (validation/physics/test_batched_wavelengths.cpp states how exactly results agree).
// Per formulation:
//   normal-vector (docs/normal-vector.md §2, the default): A F = e_b, A F = F + D − K·(k1² J), J = C ⊛ F,
//     D = (γ n nᵀ) ⊛ F; the unknown is F and the physical field is E = M F = F + D (physical_field());
//     one convolution plan of the pattern of normal_field.hpp, per_slice = n_rhs (of a member) groups of Q = 3;
//   laurent: A e = e_b with A = I − K·(k1² χ ⊛ ·), the scalar plan with per_slice = 3·n_rhs (of a member).
// Either way the unknown's layout is (slice, rhs, component·Nm + m), exactly the engine's input
// layout; then the z-operator.
#include <complex>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"
#include "physics/device.hpp"
#include "physics/discretisation.hpp"
#include "physics/floquet.hpp"
#include "physics/krylov.hpp"
#include "physics/normal_field.hpp"
#include "physics/phase_times.hpp"
#include "physics/preconditioner.hpp"
#include "physics/sweep_preconditioner.hpp"
#include "physics/z_operator.hpp"
#include "core/config.hpp"
#include "core/zeroed_allocator.hpp"

namespace gratingsim::physics {

struct ProblemSettings {
  int m1 = 0, m2 = 0;  ///< harmonics: orders m ∈ [−M1, M1] × [−M2, M2]
  conv::Backend backend = conv::Backend::cpu_direct;
  double rayleigh_tolerance = 1e-6;
  Formulation formulation = Formulation::normal_vector;
  int normal_field_resolution = 0;  ///< raster pixels per axis of 2D normal fields; 0: the default
  /// When given, the constructor laps it at the end of each set-up phase (structure, spectra+plans,
  /// z-operator, uploads).
  PhaseTimer* timer = nullptr;
};

/// Far-field amplitudes of one right-hand side, per order (the engine's harmonic layout), phase
/// reference z = 0 (docs/formulation.md §8.1):
///   reflected:   field a e^{ikz1 (z − 0)} above the structure, a = up_s ê + up_p p̂+  (zero for
///                orders evanescent in the superstrate);
///   transmitted: field t e^{−ikz2 z} below, t = down_s ê + down_p p̂2−, p̂2− = (−kz2 t̂ − kρ ẑ)/k2.
struct FarField {
  std::vector<Complex> up_s, up_p, down_s, down_p;
};

/// One member of a batched problem: a structure with the incidences of one wavelength solved on it;
/// its warnings (Rayleigh anomalies) are appended to `warnings`.
struct ProblemMember {
  const Structure& structure;
  std::span<const Incidence> incidences;
  std::vector<std::string>& warnings;
};

template <class Real>
class DiscreteProblem final : public LinearOperator<Real> {
 public:
  using Complex = std::complex<Real>;

  /// The incidences come in runs of one wavelength, each as long as the first run (one run: one
  /// wavelength; InvalidArgument otherwise). Orders, shape functions, Green coefficients, the
  /// convolution plan and the right-hand sides are built here (plan once); warnings (Rayleigh
  /// anomalies) are appended to `warnings`. When the backend's memory() is device, the Krylov vectors,
  /// the convolution output and the z-operator live on the device and every product is enqueued on
  /// one stream owned by the problem (apply() returns without waiting; the vector space's dot(),
  /// norm() and download() wait for it).
  DiscreteProblem(const Structure& structure, std::span<const Incidence> incidences, const ProblemSettings& settings,
                  int slice_factor, std::vector<std::string>& warnings);
  /// The members in the order given, equally many incidences each, all of one wavelength per member;
  /// their structures must have the same lattice and equally many slices at slice_factor
  /// (InvalidArgument otherwise).
  DiscreteProblem(std::span<const ProblemMember> members, const ProblemSettings& settings, int slice_factor);
  /// Waits for the problem's stream before its buffers go: they are freed in stream order of the
  /// freeing thread's default stream only (core/device_buffer.hpp).
  ~DiscreteProblem() override;
  DiscreteProblem(const DiscreteProblem&) = delete;
  DiscreteProblem& operator=(const DiscreteProblem&) = delete;

  [[nodiscard]] const BatchLayout& layout() const override { return layout_; }
  [[nodiscard]] std::unique_ptr<VectorSpace<Real>> make_space(int count) const override;
  void apply(const Complex* x, Complex* y) override;
  /// Capturable in a CUDA graph (krylov.hpp) where the convolution is: apply() is then its kernels and the
  /// device z-operator's one kernel (device_z_operator.cu), all on stream().
  [[nodiscard]] bool capturable() const override { return memory() == Memory::device && convolution_->capturable(); }
  /// The two stages of apply(), separately (for timing): c ← the convolution of x into the problem's
  /// own buffer (Laurent: χ ⊛ x; normal-vector: J and D), then y ← x + D − K (k1² J). Same memory and
  /// stream rules as apply().
  void apply_convolution(const Complex* x);
  void apply_z_operator(const Complex* x, Complex* y);
  /// Where the vectors live, and the stream products are enqueued on (nullptr for host problems).
  [[nodiscard]] Memory memory() const { return convolution_->memory(); }
  [[nodiscard]] Stream stream() const { return stream_; }
  /// Waits for every product enqueued so far (nothing to wait for on the host).
  void synchronize() const;
  [[nodiscard]] const conv::Convolution<Real>& convolution() const { return *convolution_; }

  /// Vector i of v (a space of this problem: make_space()) ← e_b at the slice centres, the right-hand side (and
  /// the solver's initial guess). It is non-zero at order 0 only: 3 numbers per slice and rhs cross to a device.
  void load_background(VectorSpace<Real>& v, int i) const;
  [[nodiscard]] const std::vector<FloquetOrders>& orders() const { return orders_; }
  /// Member w's slices (members of one structure share them).
  [[nodiscard]] const Discretisation& discretisation(int member = 0) const {
    return discretisations_[std::size_t(discretisation_of_[std::size_t(member)])];
  }
  /// Every member's slice grid, in member order.
  [[nodiscard]] std::vector<ZGrid> grids() const;
  /// Every engine slice's kernels (s = p·members + w, the convolution problem's layout).
  [[nodiscard]] std::span<const std::complex<double>> kernels() const { return kernels_; }
  /// Members batched in this problem (runs of incidences of one wavelength, each on its structure).
  [[nodiscard]] int members() const { return members_; }
  [[nodiscard]] int rhs() const { return int(layout_.rhs); }

  [[nodiscard]] Formulation formulation() const { return formulation_; }

  /// The averaged preconditioner (preconditioner.hpp) of this problem, in memory(): builds the
  /// mean tensors of every slice's kernels, Ā's sweep per (incidence, order) and L_p per
  /// (incidence, slice) on the host, and factors L_p there (host problems) or inverts it on the
  /// device (device problems). Memory preconditioner_bytes(...) in Real, plus twice L_p's part in
  /// complex128 on the host while building (and on the device, device.hpp).
  [[nodiscard]] std::unique_ptr<Preconditioner<Real>> make_preconditioner() const;
  /// The coarse preconditioner (preconditioner.hpp, CoarseMatrices) for coarse harmonics mc (0: Ā⁻¹
  /// alone), in memory(): Ā's sweep and A_c built on the host; A_c factored there (host problems) or
  /// inverted on the device (device problems, device.hpp).
  [[nodiscard]] std::unique_ptr<Preconditioner<Real>> make_coarse_preconditioner(int mc) const;
  /// The sweep preconditioner (sweep_preconditioner.hpp, P = A⁻¹), in memory(): its inputs built on the
  /// host, the recursion (about 69·orders³ multiply-adds per slice and incidence on the host, 114 on the device,
  /// complex128) run there (host problems) or on the
  /// device, where it is applied (device problems).
  [[nodiscard]] std::unique_ptr<Preconditioner<Real>> make_sweep_preconditioner() const;
  /// The sweep's inputs of this problem (host, complex128), as make_sweep_preconditioner builds them (`dense`
  /// false: without the dense parts, which the device set-up assembles from the rows; physics::sweep_inputs).
  [[nodiscard]] SweepInputs sweep_inputs(bool dense = true) const;

  /// Far-field amplitudes for every rhs from the solution x (the unknown: F, or e for Laurent) at
  /// the slice centres, vector i of `space` (a space of this problem), with the source s = k1² J: the
  /// z-operator's far_field_sums of the convolution output (convolve_into_work). A device problem convolves
  /// and sums on the device and downloads 4 numbers per (rhs, order).
  [[nodiscard]] std::vector<FarField> far_field(VectorSpace<Real>& space, int i);

  /// The physical field E = M F = F + D at the slice centres from the solution, vector i of `space` (host,
  /// batched layout); Laurent's unknown is E itself.
  [[nodiscard]] std::vector<Complex> physical_field(VectorSpace<Real>& space, int i);

 private:
  /// work_ ← the convolution of the solution x (in memory(); sources_per_block_ components per block),
  /// for far_field and physical_field.
  void convolve_into_work(const Complex* solution);
  /// Vectors of the convolution output's layout, in memory().
  [[nodiscard]] std::unique_ptr<VectorSpace<Real>> make_output_space(int count) const;

  Formulation formulation_;
  int sources_per_block_ = 3;  // components of the convolution output per (slice, rhs): 3 + popcount(d_axes_)
  unsigned d_axes_ = 0;        // the components of D among them (normal_field.hpp's d_axes)
  int members_ = 1;
  std::vector<Discretisation> discretisations_;  // one per distinct structure (by address) of the members
  std::vector<int> discretisation_of_;           // [member]
  std::vector<FloquetOrders> orders_;
  BatchLayout layout_;
#if GRATINGSIM_HAVE_CUDA
  std::unique_ptr<DeviceStream> device_stream_;  // declared before everything that enqueues on it
#endif
  Stream stream_ = nullptr;
  std::vector<std::complex<double>, ZeroedAllocator<std::complex<double>>> kernels_;  // pages first touched in parallel
  std::unique_ptr<conv::Convolution<Real>> convolution_;
  std::unique_ptr<ZOperator<Real>> z_operator_;
  std::unique_ptr<VectorSpace<Real>> work_;  // the convolution's output (sources_per_block_ components)
  std::vector<Complex> background_;  // e_b at order 0, [slice][rhs][component]; zero at every other order
};

/// The convolution problem DiscreteProblem plans for `members` wavelengths of `incidences` incidences
/// each (each a right-hand side per polarisation s, p) on `slices` slices of `lattice`, harmonics M1, M2
/// (N = 2M + 1 per axis; L left 0, the minimal): slices·members engine slices (s = p·members + w), each
/// with the normal-vector pattern of normal_field.hpp with one group of F_x, F_y, F_z per right-hand
/// side of its member, or Laurent's scalar problem with 3 components per right-hand side.
/// What an automatic backend choice must time and check: a backend that serves the scalar shape may
/// refuse the pattern at this size and precision. sloped_walls: some member has sloped walls
/// (discretisation.hpp's sloped_walls()), so the 1D normal-vector pattern is the tilted one.
conv::Problem convolution_problem(Formulation formulation, const Lattice& lattice, int m1, int m2, int slices,
                                  std::size_t incidences, int members = 1, bool sloped_walls = false);

/// Bytes the solve of `incidences` incidences of `members` wavelengths (one problem) needs (Krylov vectors, convolution output,
/// Green coefficients, kernels and their FFT spectra; a backend's private scratch is not counted;
/// the dense reference adds n²·16 per rhs). krylov_vectors: the solve's space, b and x among them
/// (krylov.hpp, solve_space_size: GMRES restart + 4, BiCGStab 9, dense 3); nothing of the problem's size
/// lives on the host besides (the solver keeps b and x in that space).
/// The normal-vector formulation is counted as its largest pattern, the 2D tilted one (6 output components per
/// block, 12 kernels per slice), an upper bound for the others (2D 5 and 7, 1D tilted 5 and 7, 1D 4 and 3).
/// Computed in floating point: a size beyond std::size_t saturates at its maximum, never wraps.
std::size_t estimate_bytes(std::size_t slices, std::size_t orders, std::size_t incidences, int m1, int m2,
                           std::size_t real_bytes, int krylov_vectors, bool dense, Formulation formulation,
                           std::size_t members = 1);

}  // namespace gratingsim::physics
