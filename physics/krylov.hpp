#pragma once
// Batched Krylov solvers (docs/solver.md §1–5) for A x = b with n_rhs independent systems that
// share every matrix-vector product (one batched apply serves all right-hand sides); each
// right-hand side has its own scalars, its own convergence test and its own statistics. Vectors
// live in the operator's VectorSpace (host or device). The per-rhs scalars live on the host, except on a device
// space, where GMRES and BiCGStab keep them on the device (KrylovSettings::device_scalars; device.hpp DeviceArnoldi,
// DeviceBiCGStab) and can replay their steps as CUDA graphs (KrylovSettings::cuda_graphs).
#include <complex>
#include <memory>
#include <span>
#include <vector>

#include "physics/vector_space.hpp"

namespace gratingsim::physics {

template <class Real>
class LinearOperator {
 public:
  using Complex = std::complex<Real>;
  virtual ~LinearOperator() = default;
  [[nodiscard]] virtual const BatchLayout& layout() const = 0;
  /// A vector space of `count` vectors in the memory apply() works on.
  [[nodiscard]] virtual std::unique_ptr<VectorSpace<Real>> make_space(int count) const = 0;
  /// y ← A x for the whole batch (x and y distinct, in the space's memory).
  virtual void apply(const Complex* x, Complex* y) = 0;
  /// Whether apply() may be captured in a CUDA graph once and replayed in its place (device operators
  /// only; KrylovSettings::cuda_graphs): it enqueues only kernels on the stream of its spaces, the same
  /// work for the same x and y at every call, allocates nothing, waits for nothing and reads no host
  /// memory. An operator that says nothing is not captured.
  [[nodiscard]] virtual bool capturable() const { return false; }
};

/// automatic is a choice of SolverOptions (solver.hpp), which the solver resolves to gmres or bicgstab before any
/// solve; solve() refuses it.
enum class Method { gmres, bicgstab, dense_lu, automatic };

struct KrylovSettings {
  Method method = Method::gmres;
  int restart = 40;            ///< GMRES(restart)
  double tolerance = 1e-10;    ///< stop at ‖b − A x‖₂ ≤ tolerance·‖b‖₂ (per rhs)
  int max_iterations = 2000;   ///< cap on iterations per rhs (GMRES: Arnoldi steps; BiCGStab: steps of 2 matvecs)
  /// GMRES and BiCGStab on a device space (CUDA builds) keep their per-rhs scalars in device memory and do not
  /// wait for the host inside a step (device.hpp, DeviceArnoldi: GMRES orthogonalises on the device; DeviceBiCGStab:
  /// fused vector kernels, the host waits once per iteration, one behind); false runs the host-driven iteration
  /// every host space uses (the per-rhs scalars on the host; GMRES two synchronisations per Gram–Schmidt pass,
  /// BiCGStab six per iteration) on any space: the reference the device iterations are tested and timed against.
  bool device_scalars = true;
  /// GMRES with device scalars on a capturable() operator: each Arnoldi step j (the product A V_j and the
  /// step's kernels) is captured in a CUDA graph at its first use in the solve and replayed in the later
  /// cycles, one graph launch instead of about ten kernel launches (device.hpp, DeviceArnoldi::graph_step).
  /// The same kernels in the same order: the same results and statistics, bit for bit. Worth it where the
  /// host's launches, not the device, bound a step (small problems); the first cycle pays the captures.
  /// BiCGStab with device scalars on a capturable() operator: its whole iteration (two products and ten
  /// kernels, the same every iteration) is one graph, captured at the first iteration and replayed after
  /// (device.hpp, DeviceBiCGStab::iterate), with the same results bit for bit.
  /// Ignored for other methods, spaces and operators.
  bool cuda_graphs = false;
  /// GMRES with device scalars: the host enqueues Arnoldi step j once it knows whether step j − steps_ahead
  /// (1 or 2) left some rhs in the cycle. 2 keeps the device fed (the host waits for step j − 2 while j − 1
  /// runs) at the price of one masked step after the last rhs leaves, whose product runs on the whole batch;
  /// 1 wastes no product for a host round trip per step, the better trade where a solve takes one or two
  /// steps and a product costs most (the sweep, P = A⁻¹: solver.cpp sets it). The same results either way.
  /// BiCGStab with device scalars likewise: the host waits for iteration k − (steps_ahead − 1) after enqueuing
  /// iteration k to learn whether some rhs claimed (2: one masked iteration after the last claim).
  /// Refused outside 1..2 by both methods, on every space.
  int steps_ahead = 2;
  /// GMRES stops a right-hand side, unconverged and marked stagnated, once this many restart cycles in a
  /// row each ended before `restart` steps (the Arnoldi estimate claimed the tolerance, or a breakdown)
  /// without halving the true residual: the estimate and the true residual have parted, which happens
  /// at the working precision's floor (complex64 near 1e-6 on ill-conditioned operators), where further
  /// cycles only redraw rounding. BiCGStab likewise after this many restarts in a row (its recursion's
  /// claim of the tolerance, or a breakdown) that did not halve the true residual. 0: never (iterate
  /// until max_iterations).
  int stagnation_cycles = 5;
};

/// What one right-hand side's solve did. residual is the true relative residual ‖b − A x‖/‖b‖ of
/// the returned x, recomputed with a separate product (not the recurrence's estimate).
struct SolveStats {
  int iterations = 0;
  int matvecs = 0;     ///< batched products applied while this rhs was active (dense: columns assembled)
  double residual = 0;
  bool converged = false;
  bool stagnated = false;  ///< stopped at the working precision's floor (KrylovSettings::stagnation_cycles)
};

/// The vectors solve(op, space, settings) needs in its space: b, x and the method's own (GMRES restart + 2,
/// BiCGStab 7; the dense reference 1, though it assembles in a space of its own): at least 3, so that the
/// caller may use vector 2 as scratch between solves. automatic: the larger of GMRES's and BiCGStab's.
int solve_space_size(const KrylovSettings& settings);

/// Solves A x = b for every rhs where the vectors are: b in vector 0 and x in vector 1 of `space`, a space of
/// op's layout and memory (op.make_space()) with at least solve_space_size(settings) vectors, the others the
/// method's work space (overwritten). x holds the initial guess on entry and the solution on return; a rhs with
/// b = 0 returns x = 0 (its residual is then the absolute ‖A x‖ = 0). Nothing crosses between host and device
/// but the per-rhs scalars. Never throws for non-convergence: the stats say so (solver.hpp decides).
template <class Real>
std::vector<SolveStats> solve(LinearOperator<Real>& op, VectorSpace<Real>& space, const KrylovSettings& settings);

/// The same for host vectors b and x (layout().size() each): a space of op is made, b and x uploaded and x
/// downloaded at the end.
template <class Real>
std::vector<SolveStats> solve(LinearOperator<Real>& op, std::span<const std::complex<Real>> b,
                              std::span<std::complex<Real>> x, const KrylovSettings& settings);

/// The dense reference: assembles each rhs's matrix column by column (A applied to unit vectors,
/// n = layout().per_rhs() batched products), factors it with Eigen's partial-pivoting LU in
/// complex128 and solves. For small problems only: memory n²·16 bytes per rhs, time O(n³).
template <class Real>
std::vector<SolveStats> solve_dense(LinearOperator<Real>& op, std::span<const std::complex<Real>> b,
                                    std::span<std::complex<Real>> x);

}  // namespace gratingsim::physics
