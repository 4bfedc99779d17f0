#include "physics/solver.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <map>
#include <numbers>
#include <optional>
#include <span>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <variant>

#include <omp.h>

#include "convolution/devices.hpp"
#include "physics/discretisation.hpp"
#include "physics/problem.hpp"
#include "physics/sweep_preconditioner.hpp"
#include "core/config.hpp"

namespace gratingsim::physics {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
/// max_wavelengths_per_batch = 0 on host backends, and on device backends from device_batch_unknowns
/// unknowns per wavelength: one wavelength per problem (solver.hpp says why).
constexpr std::size_t automatic_host_batch = 1;
/// Right-hand sides a device problem holds at most (the device vector space's and GMRES's grids).
constexpr std::size_t device_max_rhs = 65535;
/// The method `requested` resolves to (krylov_method, solver.hpp): automatic is BiCGStab on 2D lattices whose
/// layers hold no metal at the problem's wavelengths, GMRES elsewhere. On a 2D lattice GMRES's orthogonalisation is most of a host solve
/// (docs/solver.md §7) and BiCGStab needs 0.4-0.7 of its iterations there; end to end BiCGStab was 1.1-2.0x
/// faster on the peers pillars, rectangles and Si block and problem cases 2-3 on an H200 (gpu-fused) and
/// 1.08-3.2x on the host, and equal on contact_holes (validation/results/method-2d-h200.txt,
/// host-bicgstab-2d-cpu.txt). Metals keep GMRES: they switch to the sweep after sweep_check_iterations, which
/// GMRES reaches in half BiCGStab's products (metal disks 0.91x with BiCGStab). 1D lattices keep GMRES, which the
/// averaged and sweep preconditioners were tuned with.
Method resolve_method(Method requested, bool one_dimensional, bool metal) {
  if (requested != Method::automatic) return requested;
  return one_dimensional || metal ? Method::gmres : Method::bicgstab;
}

/// Under preconditioner: auto, where a first solve (averaged or none, where automatic did not take the
/// sweep) is checked for a switch to the sweep (solve_group): after the GMRES cycles that fit in 250
/// iterations (at least one), or 250 BiCGStab steps. The shipped cases converge well below √tolerance by
/// then (default.yaml and si_lines_metrology.yaml: at most 208 and 433 iterations in all, H100; the 2D ones
/// at most 121); a thin metal in p takes thousands with averaged (1937 at M = 20, 16 slices,
/// validation/convergence/metal_1d.yaml), and metal disks on a 2D lattice did not converge in 3000.
int sweep_check_iterations(const SolverOptions& options) {
  constexpr int iterations = 250;
  if (options.method != Method::gmres) return iterations;
  return std::max(1, iterations / options.gmres_restart) * options.gmres_restart;
}
/// The most orders the sweep continues (solve_group), and on a device the most automatic gives it at once
/// (memory_plan: metals, and the normal-vector formulation in complex128): its set-up grows as slices ×
/// orders³; on a device its application keeps a slice's vectors in shared memory (about 1400 orders on an
/// H100); on a host twice sweep_orders_limit (M ≤ 160: about 2e9 multiply-adds per slice, conical).
constexpr std::size_t device_sweep_continuation_orders = 641;
constexpr std::size_t host_sweep_continuation_orders = 321;

/// Whether `test` holds for some material of the structure's layers: their backgrounds and the materials of
/// their shapes and steps (not the superstrate or substrate).
template <class Test>
bool any_layer_material(const Structure& s, Test test) {
  const auto shape_test = [&](const Shape& shape) {
    return std::visit(
        [&](const auto& sh) {
          using T = std::decay_t<decltype(sh)>;
          if constexpr (std::is_same_v<T, Raster>)
            return std::any_of(sh.materials.begin(), sh.materials.end(), test);
          else if constexpr (std::is_same_v<T, SlopedPolygon>)
            return test(sh.bottom.material);
          else
            return test(sh.material);
        },
        shape);
  };
  for (const Layer& l : s.layers) {
    if (test(l.background) || std::any_of(l.shapes.begin(), l.shapes.end(), shape_test)) return true;
    for (const std::vector<Shape>& step : l.steps)
      if (std::any_of(step.begin(), step.end(), shape_test)) return true;
  }
  return false;
}

bool lossless_material(const Material& m, double wavelength) { return m.permittivity(wavelength).imag() == 0; }

bool structure_lossless(const Structure& s, double wavelength) {
  return lossless_material(s.substrate, wavelength) &&
         !any_layer_material(s, [&](const Material& m) { return !lossless_material(m, wavelength); });
}

std::string describe(const Incidence& inc) {
  std::ostringstream os;
  os << "λ = " << inc.wavelength << ", θ = " << inc.theta_deg << "°, φ = " << inc.phi_deg << "°";
  return os.str();
}

std::string format_bytes(std::size_t bytes) {
  std::ostringstream os;
  os.precision(3);
  os << double(bytes) / double(std::size_t(1) << 30) << " GiB";
  return os.str();
}

/// Far fields and the solver statistics of one solve of one batch (one or several wavelengths).
struct GroupSolve {
  int slices = 0;
  bool preconditioned = false;
  Method method = Method::gmres;                  // the Krylov method (resolve_method)
  std::vector<FarField> far;                      // per rhs
  std::vector<SolveStats> stats;                  // per rhs
  std::vector<std::array<std::vector<Complex>, 2>> fields;  // per incidence, per polarisation
  std::vector<FloquetOrders> orders;
  std::vector<ZGrid> grids;  // per member
  PhaseTimes phases;  // of this solve (writing: 0)
};

/// The memory a solve may use: memory_limit_bytes on the host; for device backends the device's own
/// capacity, of which 10 % of the free memory is left for the backend's private scratch (cuFFT work
/// areas), which is not estimated.
struct MemoryBudget {
  std::size_t bytes = 0;
  std::string text;  // for messages
};

MemoryBudget memory_budget(const SolverOptions& options) {
  MemoryBudget budget{options.memory_limit_bytes, format_bytes(options.memory_limit_bytes) + " (memory_limit_bytes)"};
#if GRATINGSIM_HAVE_CUDA
  const bool on_device = conv::memory_of(options.backend) == Memory::device;
  if (on_device && conv::backend_available(options.backend)) {
    const DeviceMemoryInfo info = device_memory_info();
    budget.bytes = info.free_bytes / 10 * device_budget_tenths;
    budget.text = format_bytes(budget.bytes) + " of device memory (" + std::to_string(10 * device_budget_tenths) +
                  " % of the " + format_bytes(info.free_bytes) +
                  " free of " + format_bytes(info.total_bytes) + ")";
  } else if (on_device) {
    budget.bytes = std::numeric_limits<std::size_t>::max();  // the backend reports its absence itself
  }
#endif
  return budget;
}

/// What one batched problem of `incidences` incidences of `members` wavelengths on `slices` slices
/// needs, and which preconditioner it asks for.
struct MemoryPlan {
  std::size_t need = 0;                  // estimate_bytes
  Preconditioning kind = Preconditioning::none;
  int coarse_m = 0;
  std::size_t inverses = 0, build = 0;   // the preconditioner's storage in Real, and while building
  [[nodiscard]] bool fits(const MemoryBudget& budget) const { return need <= budget.bytes; }
  /// The preconditioner's matrices take at most a quarter of what the problem leaves, its build peak
  /// half (on the device, while inverting: the inverses and twice `build`, device.hpp).
  [[nodiscard]] bool preconditioner_fits(const MemoryBudget& budget, bool on_device) const {
    return need <= budget.bytes && inverses <= (budget.bytes - need) / 4 &&
           build_peak(on_device) <= (budget.bytes - need) / 4 * 2;
  }
  /// The least budget with which preconditioner_fits holds (up to the rounding of its divisions).
  [[nodiscard]] std::size_t budget_for_preconditioner(bool on_device) const {
    return need + std::max(4 * inverses, 2 * build_peak(on_device));
  }
  [[nodiscard]] std::size_t build_peak(bool on_device) const {
    return on_device ? inverses + 2 * build : build + inverses;
  }
};

/// plan.inverses and plan.build for plan.kind: its matrices and scratch in Real, and while building, on the
/// host, the same matrices in complex128; on the device, while inverting (device.hpp), each part's matrices
/// twice in complex128 (LU factors and inverses): at most twice `build` beside the inverses. The sweep's are
/// in complex128 on the host and the device (sweep_preconditioner.hpp).
void size_preconditioner(MemoryPlan& plan, int slices, std::size_t incidences, const SolverOptions& options) {
  const std::size_t nm = std::size_t(2 * options.m1 + 1) * (2 * options.m2 + 1);
  const auto bytes = [&](std::size_t real) {
    if (plan.kind == Preconditioning::sweep)
      return sweep_preconditioner_bytes(std::size_t(slices), nm, incidences, sizeof(double),
                                        conv::memory_of(options.backend) == Memory::device);
    return plan.kind == Preconditioning::coarse
               ? coarse_preconditioner_bytes(std::size_t(slices), nm, incidences,
                                             plan.coarse_m >= 1
                                                 ? coarse_unknowns(slices, options.m1, options.m2, plan.coarse_m)
                                                 : 0,
                                             real)
               : preconditioner_bytes(std::size_t(slices), nm, incidences, real);
  };
  plan.inverses = plan.build = 0;
  if (plan.kind != Preconditioning::none) {
    plan.inverses = bytes(options.precision == Precision::single ? sizeof(float) : sizeof(double));
    plan.build = bytes(sizeof(double));
  }
}

/// Whether some material of the structure's layers is a metal at this wavelength: Re ε < 0.
bool layers_hold_metal(const Structure& structure, double wavelength) {
  return any_layer_material(structure, [&](const Material& m) { return m.permittivity(wavelength).real() < 0; });
}

/// `metal`: the layers hold a metal at some wavelength of the problem (layers_hold_metal). `device_sweep`: the
/// automatic rule giving device problems the sweep applies (solve_group drops it where the sweep would not fit).
MemoryPlan memory_plan(const Structure& structure, int slices, std::size_t incidences, std::size_t members,
                       const SolverOptions& options, bool metal = false, bool device_sweep = true) {
  const std::size_t real_bytes = options.precision == Precision::single ? sizeof(float) : sizeof(double);
  const std::size_t nm = std::size_t(2 * options.m1 + 1) * (2 * options.m2 + 1);
  const Method method = resolve_method(options.method, structure.lattice.one_dimensional(), metal);
  const int vectors = solve_space_size({.method = method, .restart = options.gmres_restart});
  const bool dense = options.method == Method::dense_lu;
  MemoryPlan plan;
  plan.need = estimate_bytes(std::size_t(slices), nm, incidences, options.m1, options.m2, real_bytes, vectors, dense,
                             options.formulation, members);
  // Which preconditioner (preconditioner.hpp, docs/solver.md §7): auto takes the sweep (A⁻¹) for 1D
  // lattices up to sweep_orders_limit orders on host backends, and up to host_sweep_continuation_orders where
  // their layers hold a metal (averaged can pass the switch's check there and then take hundreds of iterations:
  // configs/wire_grid_polarizer.yaml at M = 100, 60 + 120 slices, 400 nm, 602 iterations in p and 35.9 s against
  // 1.9 s with the sweep, dev CPU, session 33); on device backends for 1D lattices up to
  // device_sweep_continuation_orders whose layers hold a metal (averaged leaves those hundreds of iterations
  // short: the thin metal's sweep of 33 wavelengths 2.6 s against 1.4 s with the sweep at once, H100, session
  // 19) or that averaged would serve (the normal-vector formulation in complex128: since session 22's
  // Gauss–Jordan the device sweeps of the metrology cases beat averaged's, default.yaml 2.1–2.3 against 3.0 s,
  // si_lines_metrology 8.4 against 9.3 s, H100); averaged otherwise for 1D lattices in the normal-vector
  // formulation in complex128, none otherwise (2D lattices: the sweep's and coarse's set-ups outweighed their
  // savings).
  plan.kind = dense ? Preconditioning::none : options.preconditioner;
  plan.coarse_m = coarse_harmonics(slices, options.m1, options.m2);
  const bool on_host = conv::memory_of(options.backend) != Memory::device;
  if (plan.kind == Preconditioning::automatic) {
    const bool one_dimensional = structure.lattice.one_dimensional();
    const bool averaged = one_dimensional && options.formulation == Formulation::normal_vector &&
                          options.precision == Precision::double_;
    plan.kind = one_dimensional && on_host && (nm <= sweep_orders_limit || (metal && nm <= host_sweep_continuation_orders))
                    ? Preconditioning::sweep
                : one_dimensional && !on_host && device_sweep && (metal || averaged) &&
                        nm <= device_sweep_continuation_orders
                    ? Preconditioning::sweep
                : averaged ? Preconditioning::averaged
                           : Preconditioning::none;
  }
  size_preconditioner(plan, slices, incidences, options);
  return plan;
}

/// GMRES's steps_ahead (krylov.hpp) for solves preconditioned by the sweep, P = A⁻¹: a solve takes one or two
/// steps and each product carries the sweep's application, so the device GMRES waits for each step rather than
/// run one masked step past the last (the thin metal's single point 13.9 → 12.4–13.4 ms on an H200, session 28).
constexpr int sweep_steps_ahead = 1;

/// The right-hand sides that `first` left unconverged continue from x with the sweep (P = A⁻¹, §6.3 of
/// docs/solver.md): A P u = b from u₀ = A x (P u₀ = x up to the sweep's rounding, so the solve starts where
/// the first stopped, and its tolerance and residuals stay relative to b, per right-hand side), then x = P u
/// on them; the others keep x bit for bit. b and x are vectors 0 and 1 of `space` (solve()'s), vector 2 its
/// scratch. The time before the sweep is built goes to the timer's Krylov phase, its set-up to the
/// preconditioner's. Waits for the device.
template <class Real>
std::vector<SolveStats> continue_with_sweep(DiscreteProblem<Real>& problem, VectorSpace<Real>& space,
                                            const std::vector<SolveStats>& first, const KrylovSettings& settings,
                                            PhaseTimer& timer) {
  using Complex = std::complex<Real>;
  const BatchLayout& l = problem.layout();
  // The converged right-hand sides' x, kept on the host (the sweep serves metals: small problems).
  const bool keep = std::any_of(first.begin(), first.end(), [](const SolveStats& st) { return st.converged; });
  std::vector<Complex> kept(keep ? l.size() : 0);
  if (keep) space.download(1, kept);
  timer.lap(Phase::krylov);
  problem.apply(space.data(1), space.data(2));  // u₀ = A x
  space.copy(2, 1);
  const std::unique_ptr<Preconditioner<Real>> sweep = problem.make_sweep_preconditioner();
  timer.lap(Phase::preconditioner);
  RightPreconditioned<Real> ap(problem, *sweep, problem.stream());
  KrylovSettings swept = settings;
  swept.steps_ahead = sweep_steps_ahead;
  std::vector<SolveStats> more = physics::solve<Real>(ap, space, swept);
  ap.recover(space.data(1), space.data(2));
  space.copy(2, 1);
  if (keep) {
    std::vector<Complex> x(l.size());
    space.download(1, x);
    for (std::size_t p = 0; p < l.slices; ++p)
      for (std::size_t k = 0; k < l.rhs; ++k)
        if (first[k].converged)
          std::copy_n(kept.begin() + std::ptrdiff_t((p * l.rhs + k) * l.block), l.block,
                      x.begin() + std::ptrdiff_t((p * l.rhs + k) * l.block));
    space.upload(x, 1);
  }
  problem.synchronize();
  return more;
}

std::string describe_wavelengths(std::span<const ProblemMember> batch) {
  const auto [least, most] = std::minmax_element(batch.begin(), batch.end(), [](const auto& x, const auto& y) {
    return x.incidences[0].wavelength < y.incidences[0].wavelength;
  });
  std::ostringstream os;
  os << "λ = " << least->incidences[0].wavelength;
  if (most->incidences[0].wavelength != least->incidences[0].wavelength) os << " … " << most->incidences[0].wavelength;
  return os.str();
}

/// Solves one batch of members (problem.hpp): equally many incidences each, one wavelength per member.
template <class Real>
GroupSolve solve_group(std::span<const ProblemMember> members, const SolverOptions& requested, int slice_factor) {
  PhaseTimer timer;
  SolverOptions options = requested;  // its method chosen below (resolve_method)
  const Structure& structure = members[0].structure;  // the lattice and slice count all members share
  const int slices = slice_grid(structure, slice_factor).slices();
  std::vector<Incidence> group;  // every member's incidences, member-contiguous
  for (const ProblemMember& member : members) group.insert(group.end(), member.incidences.begin(), member.incidences.end());
  const std::size_t per_member = members[0].incidences.size();
  // A warning about the whole batch goes to every distinct warning list of its members.
  const auto warn_all = [&](const std::string& text) {
    for (std::size_t w = 0; w < members.size(); ++w) {
      std::size_t same = 0;
      while (same < w && &members[same].warnings != &members[w].warnings) ++same;
      if (same == w) members[w].warnings.push_back(text);
    }
  };
  timer.lap(Phase::structure);
  const std::size_t nm = std::size_t(2 * options.m1 + 1) * (2 * options.m2 + 1);
  const bool metal = std::any_of(members.begin(), members.end(), [](const ProblemMember& m) {
    return layers_hold_metal(m.structure, m.incidences.front().wavelength);
  });
  options.method = resolve_method(options.method, structure.lattice.one_dimensional(), metal);
  const bool on_device = conv::memory_of(options.backend) == Memory::device;
  const MemoryBudget budget = memory_budget(options);
  MemoryPlan plan = memory_plan(structure, slices, group.size(), members.size(), options, metal);
  if (on_device && options.preconditioner == Preconditioning::automatic && plan.kind == Preconditioning::sweep &&
      !plan.preconditioner_fits(budget, on_device))
    plan = memory_plan(structure, slices, group.size(), members.size(), options, metal, false);  // without the device rule
  const Preconditioning kind = plan.kind;
  const int coarse_m = plan.coarse_m;
  const std::string what = "problem too large: " + std::to_string(slices) + " slices × " + std::to_string(nm) +
                           " orders × " + std::to_string(2 * group.size()) + " right-hand sides needs about " +
                           format_bytes(plan.need);
  GS_EXPECTS(plan.fits(budget), what + "; the limit is " + budget.text +
                                    "; reduce the harmonics, slices or incidences per wavelength" +
                                    (on_device ? ", use complex64, or a host backend" : ", or raise memory_limit_bytes"));
  bool precondition = kind != Preconditioning::none;
  if (precondition) {
    const bool fits = plan.preconditioner_fits(budget, on_device);
    const std::string size_text = "the preconditioner needs " + format_bytes(plan.inverses) + " (" +
                                  std::to_string(slices) + " slices × " + std::to_string(nm) + " orders × " +
                                  std::to_string(group.size()) + " incidences)";
    GS_EXPECTS(fits || options.preconditioner == Preconditioning::automatic,
            size_text + ", more than a quarter of what is left of " + budget.text +
                "; choose preconditioner: auto or none");
    if (!fits) {
      warn_all(size_text + ", more than a quarter of the memory left: solved without it (" +
               describe_wavelengths(members) + ")");
      precondition = false;
    }
  }

  timer.lap(Phase::spectra_plans);  // the memory check (device backends: cudaMemGetInfo, the CUDA context)
  ProblemSettings settings;
  settings.m1 = options.m1;
  settings.m2 = options.m2;
  settings.backend = options.backend;
  settings.rayleigh_tolerance = options.rayleigh_tolerance;
  settings.formulation = options.formulation;
  settings.normal_field_resolution = options.normal_field_resolution;
  settings.timer = &timer;
  DiscreteProblem<Real> problem(members, settings, slice_factor);

  KrylovSettings ks;
  ks.method = options.method;
  ks.restart = options.gmres_restart;
  ks.tolerance = options.tolerance;
  ks.max_iterations = options.max_iterations;
  // BiCGStab captures its iteration once per solve and replays it (krylov.hpp, cuda_graphs) where the operator
  // allows (the unpreconditioned device problem on gpu-fused or gpu-direct: 2D lattices); GMRES's graphs, one per
  // Arnoldi step and captured in the first cycle, stay off (docs/solver.md §2).
  ks.cuda_graphs = ks.method == Method::bicgstab;
  // The system in problem memory throughout (no host copy of b or x): b = e_b in vector 0; vector 1 holds the
  // unknown (F, or e for Laurent; initial guess e_b), or u of the right-preconditioned A P u = b (x = P u)
  // while `holds_u`; the rest is the Krylov methods' work space (vector 2 also scratch between solves).
  const auto system = problem.make_space(solve_space_size(ks));
  VectorSpace<Real>& v = *system;
  problem.load_background(v, 0);
  v.copy(0, 1);
  GroupSolve out;
  out.slices = slices;
  out.method = options.method;
  // With automatic: a nearly singular Ā (preconditioner.hpp) can leave a residual floor above the
  // tolerance, so the preconditioned solve gets half the iteration budget and the right-hand sides it
  // leaves unconverged continue unpreconditioned from where they stopped for the other half. A problem
  // that automatic did not give the sweep (device backends, 2D lattices, hosts beyond sweep_orders_limit)
  // may switch to it (A⁻¹: one or two iterations) where it fits (memory, orders): at
  // sweep_check_iterations of the first solve (averaged, or none), if a right-hand side still has a
  // residual above √tolerance (less than half of the digits asked for: metals, which take thousands of
  // iterations or do not converge), every unconverged one continues with the sweep; otherwise the first
  // solve goes on as without the check. The converged ones only pay one residual check; no solve exceeds
  // max_iterations.
  const bool may_continue = options.preconditioner == Preconditioning::automatic && options.max_iterations >= 2;
  MemoryPlan sweep = plan;
  sweep.kind = Preconditioning::sweep;
  size_preconditioner(sweep, slices, group.size(), options);
  const bool sweep_may_follow = may_continue && kind != Preconditioning::sweep &&
                                options.method != Method::dense_lu &&
                                nm <= (on_device ? device_sweep_continuation_orders : host_sweep_continuation_orders) &&
                                sweep.preconditioner_fits(budget, on_device);
  const int half = may_continue && precondition ? (options.max_iterations + 1) / 2 : options.max_iterations;
  // (where the sweep may follow, the check leaves at least half of the budget for it)
  const int check =
      sweep_may_follow ? std::min((options.max_iterations + 1) / 2, sweep_check_iterations(options)) : half;
  std::unique_ptr<Preconditioner<Real>> p;
  std::unique_ptr<RightPreconditioned<Real>> ap;
  bool holds_u = false;
  if (precondition) {
    // Right preconditioning: A P u = b from u = 0, then x = P u (residuals are those of A x = b).
    p = kind == Preconditioning::coarse  ? problem.make_coarse_preconditioner(coarse_m)
        : kind == Preconditioning::sweep ? problem.make_sweep_preconditioner()
                                         : problem.make_preconditioner();
    timer.lap(Phase::preconditioner);
    ap = std::make_unique<RightPreconditioned<Real>>(problem, *p, problem.stream());
    v.zero(1);  // u = 0
    holds_u = true;
  }
  const auto to_x = [&] {  // vector 1 ← x = P u where it holds u
    if (!holds_u) return;
    ap->recover(v.data(1), v.data(2));
    v.copy(2, 1);
    problem.synchronize();  // before P may be freed
    holds_u = false;
  };
  // The unconverged right-hand sides take what a continuation did (the others returned at once).
  const auto absorb = [&](const std::vector<SolveStats>& more) {
    for (std::size_t r = 0; r < more.size(); ++r) {
      if (out.stats[r].converged) continue;
      out.stats[r].iterations += more[r].iterations;
      out.stats[r].matvecs += more[r].matvecs;
      out.stats[r].residual = more[r].residual;
      out.stats[r].converged = more[r].converged;
      out.stats[r].stagnated = more[r].stagnated;
    }
  };
  // The first solve for `iterations` more, from where it stands (u, or x without a preconditioner).
  const auto run_first = [&](int iterations) {
    KrylovSettings settings = ks;
    settings.max_iterations = iterations;
    if (precondition && kind == Preconditioning::sweep) settings.steps_ahead = sweep_steps_ahead;
    std::vector<SolveStats> more =
        precondition ? physics::solve<Real>(*ap, v, settings) : physics::solve<Real>(problem, v, settings);
    if (out.stats.empty()) out.stats = std::move(more);
    else absorb(more);
  };
  const auto stalled = [&] {
    return std::any_of(out.stats.begin(), out.stats.end(), [](const SolveStats& st) { return !st.converged; });
  };
  run_first(check);
  int spent = check;
  if (sweep_may_follow && stalled()) {
    const bool far = std::any_of(out.stats.begin(), out.stats.end(), [&](const SolveStats& st) {
      return !st.converged && st.residual > std::sqrt(options.tolerance);
    });
    if (far) {
      to_x();
      ap.reset();  // the first preconditioner's memory is free before the sweep's
      p.reset();
      KrylovSettings rest = ks;
      rest.max_iterations = options.max_iterations - check;
      absorb(continue_with_sweep<Real>(problem, v, out.stats, rest, timer));
      out.preconditioned = true;
      spent = options.max_iterations;
    } else if (check < half) {
      run_first(half - check);
      spent = half;
    }
  }
  if (spent < options.max_iterations && precondition && may_continue && stalled()) {
    KrylovSettings rest = ks;
    rest.max_iterations = options.max_iterations - spent;
    to_x();
    absorb(physics::solve<Real>(problem, v, rest));
  }
  to_x();
  problem.synchronize();
  timer.lap(Phase::krylov);
  out.preconditioned = out.preconditioned || precondition;
  for (std::size_t r = 0; r < out.stats.size(); ++r) {
    const SolveStats& st = out.stats[r];
    if (st.converged) continue;
    std::ostringstream os;
    os << (options.method == Method::dense_lu ? "dense LU" : options.method == Method::gmres ? "GMRES" : "BiCGStab")
       << " did not reach the tolerance " << options.tolerance << " for " << describe(group[r / 2])
       << (r % 2 == 0 ? ", s" : ", p") << " polarisation, " << slices << " slices: relative residual "
       << st.residual << " after " << st.iterations << " iterations";
    if (st.stagnated)
      os << "; it stopped falling (restart cycles ended on the Arnoldi estimate's claim without halving the true "
            "residual: the working precision's floor; choose precision: double or a looser tolerance)";
    if (options.on_unconverged == OnUnconverged::throw_error)
      throw NotConverged(os.str(), std::source_location::current());
    members[r / 2 / per_member].warnings.push_back(os.str() + " (result marked unconverged)");
  }
  out.far = problem.far_field(v, 1);
  out.orders = problem.orders();
  out.grids = problem.grids();
  if (options.keep_fields) {
    const std::vector<std::complex<Real>> e = problem.physical_field(v, 1);  // E = M F
    const BatchLayout& l = problem.layout();
    out.fields.resize(group.size());
    for (std::size_t a = 0; a < group.size(); ++a)
      for (int pol = 0; pol < 2; ++pol) {
        auto& f = out.fields[a][pol];
        f.resize(l.per_rhs());
        for (std::size_t p = 0; p < l.slices; ++p)
          for (std::size_t j = 0; j < l.block; ++j)
            f[p * l.block + j] = Complex(e[(p * l.rhs + 2 * a + pol) * l.block + j]);
      }
  }
  timer.lap(Phase::far_field);
  out.phases = timer.times();
  return out;
}

GroupSolve solve_group_any(std::span<const ProblemMember> members, const SolverOptions& o, int factor) {
  return o.precision == Precision::single ? solve_group<float>(members, o, factor) : solve_group<double>(members, o, factor);
}

/// The share of the device budget within which Richardson's two solves run side by side (overlap_richardson).
constexpr std::size_t richardson_overlap_share = 8;

/// Whether Richardson's two solves of a batch (`members` members of `structure`'s shape, `per_member`
/// incidences each; `metal` as memory_plan takes it) run side by side: on device backends (on the host each
/// solve's OpenMP threads fill the cores already), where both problems and their preconditioners' build peaks
/// (memory_plan) take at most 1/richardson_overlap_share of the device's budget together. Two independent
/// solves fill the device together where either alone leaves most SMs idle: the sweep's serial slice
/// recursion, small launch-bound Krylov steps (a point of a fit, a short sweep), all small problems. The
/// share keeps the overlap within what the application plans for: up to 8 workers may share a device
/// (app/run.cpp's workers_per_device_small), each with its own pair of solves side by side.
bool overlap_richardson(const Structure& structure, bool metal, std::size_t per_member, std::size_t members,
                        const SolverOptions& options) {
  if (conv::memory_of(options.backend) != Memory::device || !conv::backend_available(options.backend)) return false;
  const int coarse = slice_grid(structure).slices();
  std::size_t peak = 0;
  for (const int slices : {coarse, 2 * coarse}) {
    const MemoryPlan plan = memory_plan(structure, slices, per_member * members, members, options, metal);
    peak += plan.need + plan.build_peak(true);
  }
  return peak <= memory_budget(options).bytes / richardson_overlap_share;
}

IncidenceResult assemble(const Incidence& inc, const FloquetOrders& f, const FarField& s_far, const FarField& p_far,
                         bool lossless) {
  IncidenceResult res;
  res.incidence = inc;
  res.substrate_lossless = f.substrate_lossless;
  res.lossless = lossless;
  const double kz0 = f.orders[f.zeroth()].kz1.real();
  const FarField* far[2] = {&s_far, &p_far};
  res.total_R = {0, 0};
  res.total_T = {0, 0};
  for (std::size_t m = 0; m < f.orders.size(); ++m) {
    const Order& o = f.orders[m];
    DiffractionOrder d;
    d.m1 = o.m1;
    d.m2 = o.m2;
    d.reflected = o.propagates_up();
    d.transmitted = f.propagates_down(o);
    if (!d.reflected && !d.transmitted) continue;
    if (d.reflected) {
      d.reflected_direction = {o.kx / f.k1, o.ky / f.k1, o.kz1.real() / f.k1};
      d.reflection = {far[0]->up_s[m], far[1]->up_s[m], far[0]->up_p[m], far[1]->up_p[m]};
      for (int pol = 0; pol < 2; ++pol)
        d.R[pol] = o.kz1.real() / kz0 * (std::norm(far[pol]->up_s[m]) + std::norm(far[pol]->up_p[m]));
    }
    if (d.transmitted) {
      const double k2 = f.k2.real();
      d.transmitted_direction = {o.kx / k2, o.ky / k2, -o.kz2.real() / k2};
      d.transmission = {far[0]->down_s[m], far[1]->down_s[m], far[0]->down_p[m], far[1]->down_p[m]};
      for (int pol = 0; pol < 2; ++pol)
        d.T[pol] = o.kz2.real() / kz0 * (std::norm(far[pol]->down_s[m]) + std::norm(far[pol]->down_p[m]));
    }
    for (int pol = 0; pol < 2; ++pol) {
      res.total_R[pol] += d.R[pol];
      res.total_T[pol] += d.T[pol];
    }
    if (m == f.zeroth()) res.zeroth_order = ellipsometry(d.reflection);
    res.orders.push_back(d);
  }
  for (int pol = 0; pol < 2; ++pol) {
    if (!f.substrate_lossless) res.total_T[pol] = nan;
    res.absorption[pol] = 1 - res.total_R[pol] - (f.substrate_lossless ? res.total_T[pol] : 0.0);
    res.energy_balance_error[pol] = lossless ? std::abs(res.absorption[pol]) : nan;
  }
  return res;
}

/// Richardson over Nz and 2Nz: X = (4 X_2N − X_N)/3 on every efficiency and every Jones amplitude
/// (linear, so a balance ΣR + ΣT = 1 that holds at both grids still holds); Ψ, Δ and the Mueller
/// matrix are recomputed from the extrapolated order-0 Jones matrix.
IncidenceResult extrapolate(const IncidenceResult& coarse, IncidenceResult fine) {
  const auto mix = [](auto c, auto f) { return (4.0 * f - c) / 3.0; };
  const auto mix_jones = [&](const Jones& c, const Jones& f) {
    return Jones{mix(c.s_from_s, f.s_from_s), mix(c.s_from_p, f.s_from_p), mix(c.p_from_s, f.p_from_s),
                 mix(c.p_from_p, f.p_from_p)};
  };
  for (std::size_t k = 0; k < fine.orders.size(); ++k) {
    DiffractionOrder& f = fine.orders[k];
    const DiffractionOrder& c = coarse.orders[k];
    for (int pol = 0; pol < 2; ++pol) {
      f.R[pol] = mix(c.R[pol], f.R[pol]);
      f.T[pol] = mix(c.T[pol], f.T[pol]);
    }
    f.reflection = mix_jones(c.reflection, f.reflection);
    f.transmission = mix_jones(c.transmission, f.transmission);
    if (f.m1 == 0 && f.m2 == 0) fine.zeroth_order = ellipsometry(f.reflection);
  }
  for (int pol = 0; pol < 2; ++pol) {
    fine.total_R[pol] = mix(coarse.total_R[pol], fine.total_R[pol]);
    fine.total_T[pol] = mix(coarse.total_T[pol], fine.total_T[pol]);
    fine.absorption[pol] = mix(coarse.absorption[pol], fine.absorption[pol]);
    fine.energy_balance_error[pol] = fine.lossless ? std::abs(fine.absorption[pol]) : nan;
  }
  return fine;
}

/// A 1D grating rotated by α (Lattice::rotation_deg) is the unrotated grating with the whole problem
/// turned by −α about z: incidence azimuth φ − α, every other quantity alike. So it is solved in the
/// grating's frame (in_frame) and its vectors are turned back by +α (to_lab): the order directions (kx, ky, kz)/k, the
/// lateral wavevectors of the field harmonics and the field components (Ex, Ey). Everything given in
/// an order's own s/p basis (t̂ = k_ρ/k_ρ, or (cos φ, sin φ) at k_ρ = 0, ê = ẑ × t̂: the basis turns with
/// the problem) is unchanged: Jones matrices, efficiencies, Ψ, Δ, Mueller; Ez and kz too.
void in_frame(const Structure& structure, std::span<const Incidence> incidences, Structure& frame,
              std::vector<Incidence>& turned) {
  const double alpha = structure.lattice.rotation_deg;
  GS_EXPECTS(std::isfinite(alpha), "solve: the lattice rotation must be finite, got " + std::to_string(alpha));
  GS_EXPECTS(structure.lattice.one_dimensional(),
             "solve: only a 1D grating may be rotated (Lattice::rotation_deg); a 2D lattice's shapes are placed "
             "in x, y directly");
  frame = structure;
  frame.lattice.rotation_deg = 0;
  turned.assign(incidences.begin(), incidences.end());
  for (Incidence& incidence : turned) incidence.phi_deg -= alpha;
}

/// The frame's result turned back into the lab frame of `incidences` (the grating rotated by α).
void to_lab(SolveResult& result, double alpha, std::span<const Incidence> incidences) {
  const double radians = alpha * std::numbers::pi / 180, c = std::cos(radians), s = std::sin(radians);
  const auto turn_back = [&](auto& x, auto& y) {  // (x, y) ← R(α)(x, y), counter-clockwise about +z
    const auto rotated_x = c * x - s * y;
    y = s * x + c * y;
    x = rotated_x;
  };
  for (std::size_t i = 0; i < incidences.size(); ++i) {
    IncidenceResult& r = result.incidences[i];
    r.incidence = incidences[i];
    for (DiffractionOrder& order : r.orders) {
      if (order.reflected) turn_back(order.reflected_direction[0], order.reflected_direction[1]);
      if (order.transmitted) turn_back(order.transmitted_direction[0], order.transmitted_direction[1]);
    }
    if (!r.fields) continue;
    Fields& f = *r.fields;
    const std::size_t harmonics = f.kx.size();
    for (std::size_t m = 0; m < harmonics; ++m) turn_back(f.kx[m], f.ky[m]);
    for (auto& h : f.harmonics)  // [slice][component x, y, z][order]
      for (std::size_t q = 0; q < f.z.size(); ++q)
        for (std::size_t m = 0; m < harmonics; ++m)
          turn_back(h[(q * 3 + 0) * harmonics + m], h[(q * 3 + 1) * harmonics + m]);
  }
  std::ostringstream frame_note;
  frame_note << " (in the frame of the grating rotated by " << alpha << "°: there φ is the lab φ − " << alpha
             << "°)";
  for (std::string& warning : result.warnings) warning += frame_note.str();
}

}  // namespace

Ellipsometry ellipsometry(const Jones& r) {
  constexpr double deg = 180 / std::numbers::pi;
  Ellipsometry e;
  e.psi_deg = std::atan2(std::abs(r.p_from_p), std::abs(r.s_from_s)) * deg;
  e.delta_deg = (r.p_from_p == Complex(0) || r.s_from_s == Complex(0)) ? 0.0 : std::arg(r.p_from_p / r.s_from_s) * deg;
  // Δ ∈ (−180°, 180°]: arg gives −180° for a ratio on the negative real axis with Im = −0, and where
  // r_pp = −r_ss (normal incidence on an isotropic sample) rounding puts Δ on either side of ±180°
  // from one point to the next. Every value within rounding of ±180° is 180°.
  if (std::abs(e.delta_deg) >= 180 * (1 - 64 * std::numeric_limits<double>::epsilon())) e.delta_deg = 180;
  const Complex j[2][2] = {{r.p_from_p, r.p_from_s}, {r.s_from_p, r.s_from_s}};
  Complex kron[4][4];
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 2; ++k)
      for (int jj = 0; jj < 2; ++jj)
        for (int l = 0; l < 2; ++l) kron[2 * i + k][2 * jj + l] = j[i][jj] * std::conj(j[k][l]);
  const Complex I{0, 1};
  const Complex a[4][4] = {{1, 0, 0, 1}, {1, 0, 0, -1}, {0, 1, 1, 0}, {0, I, -I, 0}};
  const Complex a_inv[4][4] = {{0.5, 0.5, 0, 0}, {0, 0, 0.5, -0.5 * I}, {0, 0, 0.5, 0.5 * I}, {0.5, -0.5, 0, 0}};
  for (int row = 0; row < 4; ++row)
    for (int col = 0; col < 4; ++col) {
      Complex sum = 0;
      for (int p = 0; p < 4; ++p)
        for (int q = 0; q < 4; ++q) sum += a[row][p] * kron[p][q] * a_inv[q][col];
      e.mueller[row][col] = sum.real();
    }
  return e;
}

namespace {

/// The batched solve of unrotated gratings (solve() below turns rotated ones into their frame first).
std::vector<SolveResult> solve_unrotated(std::span<const StructureIncidences> pairs, const SolverOptions& options) {
  std::vector<SolveResult> results(pairs.size());
  // Members: one structure's incidences of one wavelength, in the order given.
  struct Member {
    std::size_t pair;
    double wavelength;
    std::vector<std::size_t> incidences;  // indices into the pair's incidences
  };
  std::vector<Member> members;
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    GS_EXPECTS(!pairs[k].incidences.empty(), "solve: no incidence given");
    results[k].incidences.resize(pairs[k].incidences.size());
    std::map<double, std::vector<std::size_t>> by_wavelength;
    for (std::size_t i = 0; i < pairs[k].incidences.size(); ++i) by_wavelength[pairs[k].incidences[i].wavelength].push_back(i);
    for (auto& [wavelength, indices] : by_wavelength) members.push_back({k, wavelength, std::move(indices)});
  }
  // Wavelengths ascending, and per wavelength the pairs in the order given (a geometry batch's
  // members of one wavelength side by side).
  std::stable_sort(members.begin(), members.end(),
                   [](const Member& x, const Member& y) { return x.wavelength < y.wavelength; });
  // Members that may share a problem (problem.hpp): equally many incidences (a sweep's θ × φ list is
  // the same at every wavelength), slices (the finest grid's count is the factor times this one's) and
  // the same lattice.
  using Shape = std::tuple<std::size_t, int, double, double>;  // incidences, slices, period_x, period_y
  std::map<Shape, std::vector<const Member*>> by_shape;
  // Whether a layer of some member's structure is a metal at its wavelength (memory_plan's `metal`).
  const auto hold_metal = [&](std::span<const Member* const> some) {
    return std::any_of(some.begin(), some.end(),
                       [&](const Member* m) { return layers_hold_metal(pairs[m->pair].structure, m->wavelength); });
  };
  for (const Member& m : members) {
    const Structure& s = pairs[m.pair].structure;
    by_shape[{m.incidences.size(), slice_grid(s).slices(), s.lattice.period_x, s.lattice.period_y}].push_back(&m);
  }
  // Batches: as many members of one shape as fit the memory budget at the finest grid and
  // max_wavelengths_per_batch allow; a batch fits when one member alone would not drop the
  // preconditioner that the batch drops, nor be served by the backend where the batch is refused
  // (nor hold more right-hand sides than a device problem can).
  const bool host_backend = conv::memory_of(options.backend) == Memory::host;
  const int factor = options.richardson ? 2 : 1;
  std::vector<std::vector<const Member*>> batches;
  for (const auto& [shape, shared] : by_shape) {
    const auto [count, coarse_slices, period_x, period_y] = shape;
    const Structure& structure = pairs[shared.front()->pair].structure;  // its lattice and slice count
    const int finest = factor * coarse_slices;
    const bool metal = hold_metal(shared);
    // One member's unknowns on the finest grid.
    const double unknowns = 3.0 * double(2 * options.m1 + 1) * double(2 * options.m2 + 1) * finest * 2.0 * double(count);
    const MemoryPlan one = memory_plan(structure, finest, count, 1, options, metal);
    // The sweep's members batch at any size on a device, to fill the threads on the host (solver.hpp,
    // member_plan).
    const bool sweep = one.kind == Preconditioning::sweep;
    const bool launch_bound = unknowns < device_batch_unknowns || sweep;
    const std::size_t cap = options.max_wavelengths_per_batch > 0 ? std::size_t(options.max_wavelengths_per_batch)
                            : host_backend && sweep   ? host_sweep_members(count, omp_get_max_threads())
                            : host_backend || shared.size() == 1 || !launch_bound ? automatic_host_batch
                                                                                  : shared.size();
    std::size_t most = std::min(cap, shared.size());
    if (most > 1) {
      const MemoryBudget budget = memory_budget(options);
      const bool on_device = !host_backend;
      // The backend's own limits (grid sizes, int strides) on the engine's finest_slices × w slices.
      const conv::BackendTraits& traits = conv::traits(options.backend);
      const auto serves = [&](std::size_t w) {
        return traits
            .can_implement(conv::resolve(convolution_problem(options.formulation, structure.lattice, options.m1,
                                                             options.m2, finest, count, int(w),
                                                             sloped_walls(structure))),
                           options.precision)
            .ok;
      };
      const bool serves_one = serves(1);
      const auto fits = [&](std::size_t w) {
        const MemoryPlan plan = memory_plan(structure, finest, count * w, w, options, metal);
        return plan.fits(budget) && (!serves_one || serves(w)) && (!on_device || 2 * count * w <= device_max_rhs) &&
               (plan.kind == Preconditioning::none || !one.preconditioner_fits(budget, on_device) ||
                plan.preconditioner_fits(budget, on_device));
      };
      while (most > 1 && !fits(most)) --most;  // arithmetic only: at most one try per member
    }
    // Equal batches of at most `most` members, in the members' order.
    const std::size_t n_batches = (shared.size() + most - 1) / most;
    for (std::size_t b = 0; b < n_batches; ++b)
      batches.emplace_back(shared.begin() + std::ptrdiff_t(shared.size() * b / n_batches),
                           shared.begin() + std::ptrdiff_t(shared.size() * (b + 1) / n_batches));
  }
  std::sort(batches.begin(), batches.end(), [](const auto& x, const auto& y) { return x.front() < y.front(); });
  for (const auto& batch : batches) {
    std::vector<std::vector<Incidence>> incidences;  // per member
    for (const Member* m : batch) {
      incidences.emplace_back();
      for (std::size_t i : m->incidences) incidences.back().push_back(pairs[m->pair].incidences[i]);
    }
    std::vector<std::vector<std::string>> fine_warnings(pairs.size());  // the same anomalies again: reported once
    const auto problem_members = [&](bool fine) {
      std::vector<ProblemMember> out;
      for (std::size_t w = 0; w < batch.size(); ++w)
        out.push_back({pairs[batch[w]->pair].structure, incidences[w],
                       fine ? fine_warnings[batch[w]->pair] : results[batch[w]->pair].warnings});
      return out;
    };
    std::vector<GroupSolve> runs;
    const bool metal = hold_metal(batch);
    if (options.richardson &&
        overlap_richardson(pairs[batch.front()->pair].structure, metal, incidences[0].size(), batch.size(), options)) {
      // The fine solve on a second host thread (its own per-thread stream, the caller's device), the coarse
      // one here. Their wall time is shared among both runs' phases in proportion to them, so that the
      // batch's phases still sum to at most its wall time (phase_times.hpp).
      const auto start = std::chrono::steady_clock::now();
      const std::optional<int> device = conv::current_cuda_device_index();  // per thread: the helper takes it
      std::future<GroupSolve> fine = std::async(std::launch::async, [&] {
        if (device) conv::use_cuda_device(*device);
        return solve_group_any(problem_members(true), options, 2);
      });
      runs.push_back(solve_group_any(problem_members(false), options, 1));  // on a throw, ~future waits for fine
      runs.push_back(fine.get());
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double summed = runs[0].phases.total() + runs[1].phases.total();
      if (summed > wall)
        for (GroupSolve& run : runs)
          for (double& seconds : run.phases.seconds) seconds *= wall / summed;
    } else {
      runs.push_back(solve_group_any(problem_members(false), options, 1));
      if (options.richardson) runs.push_back(solve_group_any(problem_members(true), options, 2));
    }
    if (options.richardson) {
      for (std::size_t k = 0; k < pairs.size(); ++k)
        for (const std::string& w : fine_warnings[k])
          if (w.find("Rayleigh") == std::string::npos) results[k].warnings.push_back(w);
    }
    const GroupSolve& last = runs.back();
    PhaseTimer assembly;  // efficiencies, Richardson and ellipsometry: part of the far field
    const std::size_t per_member = incidences[0].size();
    for (std::size_t w = 0; w < batch.size(); ++w) {
      const Member& member = *batch[w];
      SolveResult& result = results[member.pair];
      const bool lossless = structure_lossless(pairs[member.pair].structure, member.wavelength);
      if (!last.orders[w * per_member].substrate_lossless) {
        std::ostringstream os;
        os << "substrate absorbs at λ = " << member.wavelength
           << ": transmitted efficiencies are not defined; absorption includes the substrate";
        result.warnings.push_back(os.str());
      }
      for (std::size_t j = 0; j < per_member; ++j) {
        const std::size_t a = w * per_member + j;  // the batch's incidence
        const Incidence& incidence = incidences[w][j];
        IncidenceResult res =
            assemble(incidence, runs[0].orders[a], runs[0].far[2 * a], runs[0].far[2 * a + 1], lossless);
        if (runs.size() == 2)
          res = extrapolate(res, assemble(incidence, last.orders[a], last.far[2 * a], last.far[2 * a + 1], lossless));
        for (const GroupSolve& run : runs) {
          res.slice_counts.push_back(run.slices);
          res.solves.push_back({run.stats[2 * a], run.stats[2 * a + 1]});
          res.preconditioned.push_back(run.preconditioned);
          res.methods.push_back(run.method);
        }
        if (options.keep_fields) {
          Fields f{last.grids[w].z, last.grids[w].thickness, {}, {}, last.fields[a]};
          for (const Order& o : last.orders[a].orders) f.kx.push_back(o.kx), f.ky.push_back(o.ky);
          res.fields = std::move(f);
        }
        result.incidences[member.incidences[j]] = std::move(res);
      }
    }
    assembly.lap(Phase::far_field);
    // A batch's time is counted once, in its first member's pair.
    SolveResult& first = results[batch.front()->pair];
    for (const GroupSolve& run : runs) first.phases += run.phases;
    first.phases += assembly.times();
  }
  return results;
}

}  // namespace

std::vector<SolveResult> solve(std::span<const StructureIncidences> pairs, const SolverOptions& options) {
  GS_EXPECTS(!pairs.empty(), "solve: no structure given");
  GS_EXPECTS(options.m1 >= 0 && options.m2 >= 0, "solve: harmonic counts M1, M2 must be ≥ 0");
  GS_EXPECTS(options.max_wavelengths_per_batch >= 0, "solve: max_wavelengths_per_batch must be ≥ 0 (0: automatic)");
  GS_EXPECTS(options.tolerance > 0, "solve: tolerance must be positive");
  GS_EXPECTS(options.max_iterations >= 1 && options.gmres_restart >= 1, "solve: iteration cap and restart must be ≥ 1");
  GS_EXPECTS(options.precision == Precision::double_ || options.tolerance >= 1e-6,
          "solve: tolerance " + std::to_string(options.tolerance) +
              " is below what complex64 arithmetic can reach; use ≥ 1e-6 in single precision");
  // Rotated gratings in their own frame (in_frame), turned back after the solve.
  std::vector<Structure> frames(pairs.size());
  std::vector<std::vector<Incidence>> turned(pairs.size());
  std::vector<StructureIncidences> framed;
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    if (pairs[k].structure.lattice.rotation_deg == 0) {
      framed.push_back(pairs[k]);
    } else {
      in_frame(pairs[k].structure, pairs[k].incidences, frames[k], turned[k]);
      framed.push_back({frames[k], turned[k]});
    }
  }
  std::vector<SolveResult> results = solve_unrotated(framed, options);
  for (std::size_t k = 0; k < pairs.size(); ++k)
    if (pairs[k].structure.lattice.rotation_deg != 0)
      to_lab(results[k], pairs[k].structure.lattice.rotation_deg, pairs[k].incidences);
  return results;
}

MemberPlan member_plan(const Structure& structure, std::size_t incidences, std::span<const double> wavelengths,
                       const SolverOptions& options) {
  const bool metal = std::any_of(wavelengths.begin(), wavelengths.end(),
                                 [&](double wavelength) { return layers_hold_metal(structure, wavelength); });
  const int finest = slice_grid(structure).slices() * (options.richardson ? 2 : 1);
  const MemoryPlan one = memory_plan(structure, finest, incidences, 1, options, metal);
  const bool on_device = conv::memory_of(options.backend) == Memory::device;
  return {one.kind == Preconditioning::sweep, one.need + one.inverses, one.budget_for_preconditioner(on_device)};
}

std::size_t host_sweep_members(std::size_t incidences, int threads) {
  return std::max<std::size_t>(std::size_t(std::max(threads, 1)) / std::max<std::size_t>(incidences, 1), 1);
}

Method krylov_method(Method requested, const Structure& structure, std::span<const double> wavelengths) {
  const bool metal = std::any_of(wavelengths.begin(), wavelengths.end(),
                                 [&](double wavelength) { return layers_hold_metal(structure, wavelength); });
  return resolve_method(requested, structure.lattice.one_dimensional(), metal);
}

SolveResult solve(const Structure& structure, std::span<const Incidence> incidences, const SolverOptions& options) {
  const StructureIncidences pair{structure, incidences};
  return std::move(solve({&pair, 1}, options).front());
}

}  // namespace gratingsim::physics
