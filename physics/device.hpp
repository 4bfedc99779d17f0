#pragma once
// The device (CUDA) path of the solver: Krylov vectors and the z-operator in GPU memory, used by
// DiscreteProblem when the convolution backend's memory() is device. Declared only in CUDA builds;
// no CUDA header here (the definitions live in the .cu files).
//
// Every operation enqueues on the stream it was given and returns without waiting, except those that
// bring data to the host: VectorSpace::dot(), dots(), norm() and download() wait for the stream (the per-rhs
// scalars and the downloaded vector are complete when they return), upload() waits for its copy, and
// DeviceArnoldi::no_rhs_in_cycle_after() waits for one Arnoldi step's event, DeviceBiCGStab::claims_after() for one
// iteration's, and their constructors for their own initial copies.
//
// Nothing here enqueues on the legacy default stream (cudaMemcpy, cudaMemset, a launch without a stream): the
// problem's stream is non-blocking and does not follow it, so such a copy may land after the kernels that read it
// (validation/docs/test_streams.cpp refuses them in the library). Set-up that uses the calling thread's default
// stream (cudaStreamPerThread: allocations, DeviceBuffer's copies, the z-operator's tables) waits for it before
// returning.
#include "core/config.hpp"

#if GRATINGSIM_HAVE_CUDA
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "convolution/convolution.hpp"
#include "physics/preconditioner.hpp"
#include "physics/sweep_preconditioner.hpp"
#include "physics/vector_space.hpp"
#include "physics/z_operator.hpp"

namespace gratingsim::physics {

/// A non-blocking CUDA stream owned for the lifetime of a problem (cudaStreamNonBlocking: it does not
/// synchronise with the legacy default stream), taken from the streams earlier ones left on the current device
/// (made only where there is none). Its destructor waits for it, then leaves it to the next.
class DeviceStream {
 public:
  DeviceStream();
  ~DeviceStream();
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  [[nodiscard]] Stream get() const { return stream_; }
  /// Waits for all work enqueued on the stream.
  void synchronize() const;

 private:
  Stream stream_ = nullptr;
  int device_ = 0;  ///< the stream's
};

/// Whether `stream` is being captured into a CUDA graph (cudaStreamIsCapturing): work enqueued on it now
/// is recorded in the graph, not run, and events recorded on it carry no timestamp.
bool stream_capturing(Stream stream);

/// Free and total memory of the current device (cudaMemGetInfo).
struct DeviceMemoryInfo {
  std::size_t free_bytes = 0, total_bytes = 0;
};
DeviceMemoryInfo device_memory_info();

/// `count` batched vectors in device memory, all operations on `stream`. Per-rhs reductions run in
/// complex128: each thread block sums its part of one rhs in double, the partial sums are copied to
/// pinned host memory and added there in a fixed order (deterministic). All device and pinned
/// memory is allocated here; the operations allocate nothing.
template <class Real>
std::unique_ptr<VectorSpace<Real>> make_device_vector_space(const BatchLayout& layout, int count, Stream stream);

/// The Arnoldi cycles of GMRES(m) (docs/solver.md §2) with every per-rhs scalar in device memory, for a
/// device space: the Hessenberg columns, Givens rotations, g, the in-cycle flags, the Krylov dimension
/// reached, the 1/‖w‖ scale and the solution coefficients live on the device; small kernels (one thread
/// per rhs) do the Hessenberg/Givens update and the convergence test, and the vector kernels read their
/// coefficients from device memory, masked by the device flags. krylov.cpp drives it: restart (true
/// residual, on the host), start_cycle(), then per step op.apply(V_j, V_{j+1}) and step(j) (or both as
/// one CUDA graph, graph_step(j)), then finish_cycle(). Nothing here waits for the stream except no_rhs_in_cycle_after() (an event of a
/// step enqueued earlier); the host learns the Krylov dimensions at the restart's synchronisation.
///
/// One step reads the basis three times (the pass-1 dots; the pass-1 update fused with the pass-2 dots;
/// the pass-2 update fused with ‖w‖), where the host-driven step reads it four times and waits for the
/// stream three times.
template <class Real>
class DeviceArnoldi {
 public:
  virtual ~DeviceArnoldi() = default;
  /// Enqueues a cycle's start from the residual in vector R of the space: V_0 = R/β per rhs in the cycle,
  /// g = β e_1. budget[r] = Arnoldi steps rhs r may still take (0: r is not in this cycle). Reads the
  /// host spans before returning.
  virtual void start_cycle(int R, std::span<const double> beta, std::span<const int> budget) = 0;
  /// Enqueues Arnoldi step j (0 ≤ j < restart) on w = V_{j+1} = A V_j (already enqueued): CGS2 against
  /// V_0..V_j, the Hessenberg column j, its Givens rotation, the residual estimate |g_{j+1}|/‖b‖, the
  /// in-cycle flags (a rhs leaves at the tolerance, on a happy breakdown or when its budget is spent)
  /// and V_{j+1} = w/‖w‖. Rhs out of the cycle are masked (their vectors are zeroed, as on the host).
  virtual void step(int j) = 0;
  /// What `product` (which enqueues w = V_{j+1} = A V_j on the space's stream: a capturable() operator's
  /// apply) and step(j) enqueue, as one CUDA graph: captured at the first call for this j in the life of
  /// this object (product runs then, in capture mode) and replayed by the later calls (product is not
  /// called again). The same kernels in the same order as product() then step(j): the same results bit
  /// for bit. no_rhs_in_cycle_after(j) works the same after either.
  ///
  /// Why one graph per step, replayed under the host's loop, and not a graph of a whole cycle: step j's
  /// kernels depend on j (j + 1 basis vectors: grids, shared memory, the flag slot j), so a cycle is
  /// `restart` different steps anyway; kept per j, the host's early exit stays as it is (it waits for step
  /// j − steps_ahead before enqueuing step j, krylov.hpp; with 2, at most one masked step runs after the last
  /// rhs leaves), where a
  /// whole-cycle graph would run all `restart` steps, each with a full operator product, after convergence,
  /// or need chunks with the same host check between them. The host's cost per step drops to one graph
  /// launch, one event record and one event wait, below a step's device time, so the device stays fed.
  /// The graphs hold the basis, the operator's buffers and this object's scalars by address: they live
  /// as long as this object (one solve), which must not outlive the operator.
  virtual void graph_step(int j, const std::function<void()>& product) = 0;
  /// Whether no rhs was left in the cycle after step j (enqueued earlier): waits for that step's event
  /// only (cudaEventSynchronize), so later steps already enqueued keep the device busy.
  virtual bool no_rhs_in_cycle_after(int j) = 0;
  /// Enqueues x += V y, H y = g (back substitution on the device over each rhs's Krylov dimension),
  /// for the `steps` steps enqueued in this cycle, and the copy of the dimensions to the host.
  virtual void finish_cycle(int steps) = 0;
  /// The Krylov dimension (Arnoldi steps taken in the cycle) of each rhs in the last finished cycle;
  /// valid once the stream has been synchronised after finish_cycle() (the next true residual does).
  [[nodiscard]] virtual std::span<const int> dimensions() const = 0;
};

/// A DeviceArnoldi on `space` (a device space, memory() == device): basis V_i = vector first_basis + i,
/// i = 0..restart (contiguous in the space), solution in vector x, relative tolerance on |g_{j+1}|/‖b‖
/// with b_norm[r] = ‖b_r‖ (> 0 for every rhs that enters a cycle). Allocates all its device and pinned
/// memory here.
template <class Real>
std::unique_ptr<DeviceArnoldi<Real>> make_device_arnoldi(VectorSpace<Real>& space, int first_basis, int x,
                                                         int restart, double tolerance,
                                                         std::span<const double> b_norm);

/// BiCGStab's iterations (krylov.cpp, van der Vorst 1992; docs/solver.md §2) with every per-rhs scalar in device
/// memory, for a device space: ρ, α, ω, β, the step flags and each rhs's iteration and product counts live on the
/// device; small kernels (a warp per rhs) add the reductions' partial sums and take the scalar steps, and five
/// vector kernels read their coefficients from device memory, masked by the step flags. One iteration moves 18
/// batched vectors (p = r + β(p − ω v): 4; r̂·v: 2; s = r − α v with ‖s‖: 3; t·s and ‖t‖: 2; x += α p + ω s and
/// r = s − ω t with r̂·r and ‖r‖: 7) where the host-driven one moves about 40 and waits for the stream six times.
///
/// Each rhs is stepping, claimed or done. A stepping rhs claims where the host iteration would stop to confirm:
/// its recursive ‖r‖ (or ‖s‖) at the tolerance, its iteration cap, a non-finite ‖r‖ or a breakdown (r̂·r, r̂·v or
/// ω zero); it then sits out the iterations (nothing of it read or written) until the host confirms it with the
/// true residual (krylov.cpp) and settles it: restarted from the true residual, or done. Each rhs so takes the
/// host iteration's steps in its order, to rounding (the reductions add in another order). krylov.cpp drives
/// it: settle() (all rhs start claimed), then iterate() and, one or two iterations behind, claims_after(); on
/// a claim, fetch_state(), the true residual (which synchronises), settle().
///
/// Nothing here waits for the stream except claims_after() (an event of an iteration enqueued earlier).
template <class Real>
class DeviceBiCGStab {
 public:
  /// The space's vectors the iteration uses (indices into it, all distinct).
  struct Vectors {
    int x, r, r_hat, p, v, s, t, true_r;
  };
  virtual ~DeviceBiCGStab() = default;
  /// Enqueues one iteration: p, `product(P, V)` (v = A p on the space's stream), α, s, `product(S, T)`, ω, x, r,
  /// and the claims and next β. With `graph` (a capturable() operator's product), the iteration is captured as
  /// one CUDA graph at its first call in the life of this object (product runs then, in capture mode) and
  /// replayed by the later calls: the same kernels in the same order, the same results bit for bit. The graph
  /// holds the vectors and this object's scalars by address: this object must not outlive the operator.
  virtual void iterate(const std::function<void(int x, int y)>& product, bool graph) = 0;
  /// Whether some rhs claimed since the last settle(), as of iteration `iteration` (counted from 0 over the
  /// object's life; enqueued earlier): waits for that iteration's event only (cudaEventSynchronize).
  virtual bool claims_after(long iteration) = 0;
  /// Iterations enqueued so far.
  [[nodiscard]] virtual long iterations_enqueued() const = 0;
  /// Enqueues the copy of each rhs's state to the host: valid once the stream has been synchronised.
  virtual void fetch_state() = 0;
  /// Rhs r as of the last fetch_state(): whether it is claimed, its iterations and its products (those of the
  /// iterations; the true residuals' are the host's).
  struct RhsState {
    bool claimed = false;
    int iterations = 0, products = 0;
  };
  [[nodiscard]] virtual RhsState state(int r) const = 0;
  /// After the host confirmed the claimed rhs (the stream synchronised since fetch_state()): enqueues the
  /// restart of each claimed rhs with again[r] from the residual in vector true_r (r = r̂ = true_r, p = v = 0,
  /// ρ = α = ω = 1, then its first β) and marks the other claimed rhs done; stepping and done rhs are untouched.
  /// Reads `again` before returning.
  virtual void settle(std::span<const char> again) = 0;
};

/// A DeviceBiCGStab on `space` (a device space, memory() == device) with the given vectors, the relative
/// tolerance on the recursive residuals, the iteration cap per rhs and b_norm[r] = ‖b_r‖. Every rhs starts
/// claimed. Allocates all its device and pinned memory here.
template <class Real>
std::unique_ptr<DeviceBiCGStab<Real>> make_device_bicgstab(VectorSpace<Real>& space,
                                                           const typename DeviceBiCGStab<Real>::Vectors& vectors,
                                                           double tolerance, int max_iterations,
                                                           std::span<const double> b_norm);

/// The z-operator of z_operator.hpp on the device: one thread per (rhs, order) runs the upward and
/// downward sweeps over the slices in complex128 arithmetic exactly as the host version; the
/// coefficients (k1 per incidence: a batch of wavelengths, problem.hpp) are uploaded once here,
/// transposed to [incidence][slice][order] so that the threads
/// of a warp (consecutive orders) read consecutive addresses; the per-slice tables (step, weight,
/// self, depth) are computed on the device from kz and coefficients.grids (each member's), by the host's expressions
/// (whether or not `coefficients` holds them: green_coefficients(..., SliceTables::none) suffices).
/// d_axes as for make_host_z_operator.
template <class Real>
std::unique_ptr<ZOperator<Real>> make_device_z_operator(const GreenCoefficients& coefficients,
                                                        std::vector<int> rhs_incidence, unsigned d_axes = 0);

/// The averaged preconditioner of preconditioner.hpp on the device: Ā's sweep uploaded as the host built
/// it (complex128) and applied by one thread per (rhs, order); the host-assembled L_p uploaded (or
/// assembled on the device, below) and inverted on the device in complex128, each group of components that no element couples alone
/// (coupled_components; cuBLAS batched LU, the host's singularity test: throws as expect_regular_local
/// does), the inverses kept rounded to Real. The set-up runs on the calling
/// thread's default stream (cudaStreamPerThread) and waits for it, not for other streams, before
/// returning. Device memory while building: beside the inverses, L_p twice in complex128. The rhs must
/// be grouped by incidence, one or two per incidence (physics' s, p pairs).
template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_preconditioner(const AveragedSweep& averaged,
                                                                 const LocalMatrices& local,
                                                                 std::vector<int> rhs_incidence);
/// The same with L_p assembled on the device from its parts (preconditioner.hpp's LocalParts: the kernels
/// and G_pp, O(1) per element), each group of `local.groups` into its own batch: nothing dense crosses the
/// bus. What DiscreteProblem uses.
template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_preconditioner(const AveragedSweep& averaged, const LocalParts& local,
                                                                 std::vector<int> rhs_incidence);

/// The coarse preconditioner (preconditioner.hpp) on the device: `averaged` (Ā⁻¹ alone, from
/// make_device_preconditioner with an empty `local`), then one launch replacing the coarse entries by
/// A_c⁻¹ x_c, on the same stream. A_c is inverted by cuBLAS in complex128 (throws as
/// expect_regular_coarse), the inverses kept rounded to Real (n² per incidence). Waits for the calling
/// thread's default stream before returning. `orders`: all orders of the batched layout.
template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_coarse_preconditioner(std::unique_ptr<Preconditioner<Real>> averaged,
                                                                        const CoarseMatrices& coarse,
                                                                        std::vector<int> rhs_incidence, int orders);

/// The sweep preconditioner (sweep_preconditioner.hpp) on the device: the host-built inputs uploaded, the
/// recursion run on the device in complex128 (cuBLAS, batched over the groups of equal shape; throws as
/// sweep_matrices does), the matrices kept in complex128 (also for Real = float), and one launch per application on the given
/// stream: a block per right-hand side and group sweeps its slices up and down. The set-up runs on the
/// calling thread's default stream and waits for it before returning.
template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_sweep_preconditioner(const SweepInputs& sweep,
                                                                       std::vector<int> rhs_incidence);

}  // namespace gratingsim::physics
#endif
