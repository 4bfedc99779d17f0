#include "physics/krylov.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/config.hpp"
#if GRATINGSIM_HAVE_CUDA
#include "physics/device.hpp"
#endif

namespace gratingsim::physics {
namespace {

using Scalar = std::complex<double>;

/// Per-rhs relative residuals ‖b − A x‖/‖b‖ with one product; leaves b − A x in vector `r` and, when
/// `absolute` is not empty, ‖b − A x‖ in it.
template <class Real>
void true_residual(LinearOperator<Real>& op, VectorSpace<Real>& v, int b, int x, int r,
                   std::span<const double> b_norm, std::span<double> out, std::span<double> absolute = {}) {
  const std::size_t nr = v.layout().rhs;
  op.apply(v.data(x), v.data(r));
  v.scale(std::vector<Scalar>(nr, -1.0), r);
  v.axpy(std::vector<Scalar>(nr, 1.0), b, r);
  v.norm(r, out);
  if (!absolute.empty()) std::copy(out.begin(), out.begin() + std::ptrdiff_t(nr), absolute.begin());
  for (std::size_t i = 0; i < nr; ++i) out[i] = b_norm[i] > 0 ? out[i] / b_norm[i] : out[i];
}

/// Per rhs: whether its initial guess, vector x, is zero (its norm is: one reduction).
template <class Real>
std::vector<char> zero_guesses(VectorSpace<Real>& v, int x) {
  std::vector<double> norm(v.layout().rhs);
  v.norm(x, norm);
  std::vector<char> zero(norm.size());
  for (std::size_t r = 0; r < norm.size(); ++r) zero[r] = norm[r] == 0;
  return zero;
}

bool all_of_flags(std::span<const char> flags) {
  return std::all_of(flags.begin(), flags.end(), [](char f) { return f != 0; });
}

/// The first residual where every rhs's initial guess is zero: r = b, ‖r‖/‖b‖ = 1 (0 where b = 0), ‖r‖ = ‖b‖,
/// without the product A·0 (true_residual would give the same bits: b − A·0 = b exactly). One product per solve
/// saved (of five for the sweep-preconditioned thin metal's two iterations, each a preconditioner application
/// too). A rhs whose guess is zero does not count that product whether it ran (for the others) or not, so its
/// statistics are those of its solve alone.
template <class Real>
void zero_start_residual(VectorSpace<Real>& v, int b, int r, std::span<const double> b_norm, std::span<double> out,
                         std::span<double> absolute) {
  v.copy(b, r);
  for (std::size_t i = 0; i < b_norm.size(); ++i) {
    out[i] = b_norm[i] > 0 ? 1.0 : 0.0;
    absolute[i] = b_norm[i];
  }
}

/// A right-hand side with b = 0 has the one solution x = 0 (A invertible): set it before the first
/// residual, since the stopping tests accept ‖b‖ = 0 at once and would otherwise return the
/// initial guess as converged. Touches x only when some b vanishes (bit for bit as before otherwise).
template <class Real>
void zero_where_b_vanishes(VectorSpace<Real>& v, int x, std::span<const double> b_norm) {
  if (std::none_of(b_norm.begin(), b_norm.end(), [](double n) { return n == 0; })) return;
  std::vector<Scalar> keep(b_norm.size());
  for (std::size_t r = 0; r < b_norm.size(); ++r) keep[r] = b_norm[r] == 0 ? 0.0 : 1.0;
  v.scale(keep, x);
}

/// ‖b_r‖ per rhs of the system in vectors b and x of the space (x the initial guess); x = 0 where b = 0
/// (zero_where_b_vanishes).
template <class Real>
std::vector<double> load_system(VectorSpace<Real>& v, int b, int x) {
  std::vector<double> b_norm(v.layout().rhs);
  v.norm(b, b_norm);
  zero_where_b_vanishes(v, x, b_norm);
  return b_norm;
}

/// Complex Givens rotation [[c, s], [−conj(s), c]] (c real) that zeroes b in (a, b).
struct Givens {
  double c = 1;
  Scalar s = 0;
  static Givens make(Scalar a, Scalar b) {
    if (b == Scalar(0)) return {1.0, 0.0};
    if (a == Scalar(0)) return {0.0, 1.0};
    const double rho = std::hypot(std::abs(a), std::abs(b));
    return {std::abs(a) / rho, (a / std::abs(a)) * std::conj(b) / rho};
  }
  void apply(Scalar& a, Scalar& b) const {
    const Scalar t = c * a + s * b;
    b = -std::conj(s) * a + c * b;
    a = t;
  }
};

/// Per rhs, the stagnation count of KrylovSettings::stagnation_cycles, shared by GMRES (its restart
/// cycles) and BiCGStab (its restarts): the true residual at the previous restart and how many restarts
/// in a row that count did not halve it.
struct Stagnation {
  std::vector<double> last;
  std::vector<int> run;
  explicit Stagnation(std::size_t nr) : last(nr, std::numeric_limits<double>::infinity()), run(nr, 0) {}
  /// Records rhs r's true residual at a restart (`counts`: one the method's own estimate ended); whether
  /// `limit` counting restarts in a row have now failed to halve it (never where limit ≤ 0).
  bool stalled_out(std::size_t r, double residual, bool counts, int limit) {
    run[r] = counts && residual > 0.5 * last[r] ? run[r] + 1 : 0;
    last[r] = residual;
    return limit > 0 && run[r] >= limit;
  }
};

/// What GMRES's previous restart test saw: the stagnation count, and each rhs's iterations then (a
/// cycle counts when it ended short of `restart` steps: the Arnoldi estimate's claim or a breakdown).
struct RestartHistory {
  Stagnation stagnation;
  std::vector<int> iterations;
  explicit RestartHistory(std::size_t nr) : stagnation(nr), iterations(nr, 0) {}
};

/// GMRES's restart test: records each active rhs's true residual (one more product, not counted for the rhs
/// flagged in `zero_start`: their first residual needs none); a rhs is done when
/// it converged (or b = 0), used its iterations, its residual is not finite, or it stagnated
/// (KrylovSettings::stagnation_cycles). Whether some rhs goes on.
bool gmres_restart_test(std::span<const double> residual, std::span<const double> b_norm, const KrylovSettings& s,
                        std::vector<SolveStats>& stats, std::vector<char>& done, RestartHistory& history,
                        std::span<const char> zero_start = {}) {
  bool any = false;
  for (std::size_t r = 0; r < stats.size(); ++r) {
    if (done[r]) continue;
    if (zero_start.empty() || !zero_start[r]) stats[r].matvecs++;
    stats[r].residual = residual[r];
    const int steps = stats[r].iterations - history.iterations[r];
    history.iterations[r] = stats[r].iterations;
    const bool stalled_out =
        history.stagnation.stalled_out(r, residual[r], steps > 0 && steps < s.restart, s.stagnation_cycles);
    if (residual[r] <= s.tolerance || b_norm[r] == 0) {
      stats[r].converged = true;
      done[r] = 1;
    } else if (stats[r].iterations >= s.max_iterations || !std::isfinite(residual[r])) {
      done[r] = 1;
    } else if (stalled_out) {
      stats[r].stagnated = true;
      done[r] = 1;
    }
    any = any || !done[r];
  }
  return any;
}

/// The cycles of GMRES(m) with the per-rhs scalars on the host (any space): vectors B, X, R, V0.. as gmres().
template <class Real>
void gmres_host_cycles(LinearOperator<Real>& op, VectorSpace<Real>& v, const KrylovSettings& s,
                       std::span<const double> b_norm, std::vector<SolveStats>& stats, std::span<const char> zero_start) {
  const int m = s.restart;
  const std::size_t nr = v.layout().rhs;
  constexpr int B = 0, X = 1, R = 2, V0 = 3;  // V_j = V0 + j, j = 0..m
  std::vector<double> residual(nr), beta(nr);
  std::vector<char> done(nr, 0);
  std::vector<Scalar> coef(nr), projections(std::size_t(m + 1) * nr), corrections(projections.size());  // [i·nr + r]
  // Per rhs: Hessenberg (m+1)×m column-major, rotations, rhs g, Krylov dimension reached.
  std::vector<std::vector<Scalar>> h(nr, std::vector<Scalar>(std::size_t(m + 1) * m));
  std::vector<std::vector<Givens>> rot(nr, std::vector<Givens>(m));
  std::vector<std::vector<Scalar>> g(nr, std::vector<Scalar>(m + 1));
  std::vector<int> k(nr);
  std::vector<char> in_cycle(nr);
  std::vector<double> hn(nr);
  RestartHistory history(nr);

  for (bool first = true;; first = false) {
    if (!first || !all_of_flags(zero_start))
      true_residual(op, v, B, X, R, b_norm, residual, beta);
    else
      zero_start_residual(v, B, R, b_norm, residual, beta);
    if (!gmres_restart_test(residual, b_norm, s, stats, done, history, first ? zero_start : std::span<const char>{})) break;
    // V0 = r/‖r‖ for active rhs.
    for (std::size_t r = 0; r < nr; ++r) {
      in_cycle[r] = !done[r];
      coef[r] = in_cycle[r] ? 1.0 / beta[r] : 0.0;
      std::fill(g[r].begin(), g[r].end(), Scalar(0));
      g[r][0] = beta[r];
      k[r] = 0;
    }
    v.copy(R, V0);
    v.scale(coef, V0);
    for (int j = 0; j < m; ++j) {
      op.apply(v.data(V0 + j), v.data(V0 + j + 1));
      // Classical Gram–Schmidt twice (CGS2: Giraud, Langou, Rozložník 2005, as orthogonal as modified
      // Gram–Schmidt in practice): each pass is h = Vᴴw, w −= V h, instead of j + 1 dependent dot/axpy pairs
      // (on a GPU, j + 1 synchronisations per step; here three). The basis is read three times: the pass-1 dots;
      // the pass-1 update with the pass-2 dots (combine_dots); the pass-2 update with ‖w‖ (combine_norm).
      const int basis = j + 1, w = V0 + j + 1;
      // h (pass 0: the column, 1: += the correction) for rhs in the cycle, and the update's coefficients −h.
      const auto take = [&](std::vector<Scalar>& sums, int pass) {
        for (int i = 0; i < basis; ++i)
          for (std::size_t r = 0; r < nr; ++r) {
            Scalar& c = sums[std::size_t(i) * nr + r];
            if (!in_cycle[r]) c = 0;
            Scalar& hij = h[r][std::size_t(j) * (m + 1) + i];
            hij = pass == 0 ? c : hij + c;
            c = -c;
          }
      };
      v.dots(V0, basis, w, projections);
      take(projections, 0);
      v.combine_dots(projections, V0, basis, w, corrections);
      take(corrections, 1);
      v.combine_norm(corrections, V0, basis, w, hn);
      bool any_in_cycle = false;
      for (std::size_t r = 0; r < nr; ++r) {
        coef[r] = in_cycle[r] && hn[r] > 0 ? 1.0 / hn[r] : 0.0;
        if (!in_cycle[r]) continue;
        Scalar* col = &h[r][std::size_t(j) * (m + 1)];
        col[j + 1] = hn[r];
        for (int i = 0; i < j; ++i) rot[r][i].apply(col[i], col[i + 1]);
        rot[r][j] = Givens::make(col[j], col[j + 1]);
        rot[r][j].apply(col[j], col[j + 1]);
        rot[r][j].apply(g[r][j], g[r][j + 1]);
        k[r] = j + 1;
        stats[r].iterations++;
        stats[r].matvecs++;
        const double estimate = std::abs(g[r][j + 1]) / b_norm[r];
        if (estimate <= s.tolerance || hn[r] == 0 || stats[r].iterations >= s.max_iterations) in_cycle[r] = 0;
        any_in_cycle = any_in_cycle || in_cycle[r];
      }
      v.scale(coef, V0 + j + 1);
      if (!any_in_cycle) break;
    }
    // x += V y with H y = g (upper triangular, k[r] × k[r]).
    const int k_max = *std::max_element(k.begin(), k.end());
    std::vector<std::vector<Scalar>> y(nr);
    for (std::size_t r = 0; r < nr; ++r) {
      y[r].assign(k[r], 0.0);
      for (int i = k[r] - 1; i >= 0; --i) {
        Scalar sum = g[r][i];
        for (int l = i + 1; l < k[r]; ++l) sum -= h[r][std::size_t(l) * (m + 1) + i] * y[r][l];
        y[r][i] = sum / h[r][std::size_t(i) * (m + 1) + i];
      }
    }
    for (int i = 0; i < k_max; ++i)
      for (std::size_t r = 0; r < nr; ++r) projections[std::size_t(i) * nr + r] = i < k[r] ? y[r][i] : 0.0;
    if (k_max > 0) v.combine(projections, V0, k_max, X);
  }
}

#if GRATINGSIM_HAVE_CUDA
/// The cycles of GMRES(m) on a device space with the per-rhs scalars on the device (device.hpp,
/// DeviceArnoldi): the same iteration as gmres_host_cycles to rounding. The host synchronises once per cycle
/// (the true residual's norm) and, inside a cycle, waits only for the step two behind the one it enqueues,
/// to learn whether some rhs is still in the cycle; the step enqueued meanwhile keeps the device busy (after
/// the last rhs leaves, at most one more step runs, masked: it changes no rhs's result or statistics).
/// With s.cuda_graphs on a capturable operator, each step (product and Arnoldi kernels) is one CUDA graph,
/// captured at its first use and replayed in the later cycles (DeviceArnoldi::graph_step); the host's loop
/// and its early exit are the same either way.
template <class Real>
void gmres_device_cycles(LinearOperator<Real>& op, VectorSpace<Real>& v, const KrylovSettings& s,
                         std::span<const double> b_norm, std::vector<SolveStats>& stats, std::span<const char> zero_start) {
  const int m = s.restart;
  const std::size_t nr = v.layout().rhs;
  constexpr int B = 0, X = 1, R = 2, V0 = 3;  // V_j = V0 + j, j = 0..m
  const std::unique_ptr<DeviceArnoldi<Real>> arnoldi = make_device_arnoldi<Real>(v, V0, X, m, s.tolerance, b_norm);
  const bool graphs = s.cuda_graphs && op.capturable();
  std::vector<double> residual(nr), beta(nr);
  std::vector<char> done(nr, 0);
  std::vector<int> budget(nr);
  RestartHistory history(nr);
  bool cycled = false;
  while (true) {
    if (cycled || !all_of_flags(zero_start))
      true_residual(op, v, B, X, R, b_norm, residual, beta);  // synchronises: the last cycle's dimensions are in
    else
      zero_start_residual(v, B, R, b_norm, residual, beta);
    if (cycled) {
      const std::span<const int> k = arnoldi->dimensions();
      for (std::size_t r = 0; r < nr; ++r) {
        stats[r].iterations += k[r];
        stats[r].matvecs += k[r];
      }
    }
    if (!gmres_restart_test(residual, b_norm, s, stats, done, history, cycled ? std::span<const char>{} : zero_start)) break;
    for (std::size_t r = 0; r < nr; ++r) budget[r] = done[r] ? 0 : s.max_iterations - stats[r].iterations;
    arnoldi->start_cycle(R, beta, budget);
    int steps = 0;
    for (int j = 0; j < m; ++j) {
      if (j >= s.steps_ahead && arnoldi->no_rhs_in_cycle_after(j - s.steps_ahead)) break;
      const auto product = [&] { op.apply(v.data(V0 + j), v.data(V0 + j + 1)); };
      if (graphs) {
        arnoldi->graph_step(j, product);
      } else {
        product();
        arnoldi->step(j);
      }
      steps = j + 1;
    }
    arnoldi->finish_cycle(steps);
    cycled = true;
  }
}
#endif

template <class Real>
std::vector<SolveStats> gmres(LinearOperator<Real>& op, VectorSpace<Real>& v, const KrylovSettings& s) {
  const int m = s.restart;
  GS_EXPECTS(m >= 1, "GMRES restart must be ≥ 1, got " + std::to_string(m));
  GS_EXPECTS(s.steps_ahead == 1 || s.steps_ahead == 2,
             "GMRES: steps_ahead must be 1 or 2, got " + std::to_string(s.steps_ahead));
  const std::size_t nr = v.layout().rhs;
  constexpr int B = 0, X = 1;  // then R and the basis (the cycles' functions): m + 4 vectors
  const std::vector<char> zero_start = zero_guesses<Real>(v, X);
  const std::vector<double> b_norm = load_system<Real>(v, B, X);
  std::vector<SolveStats> stats(nr);
#if GRATINGSIM_HAVE_CUDA
  if (s.device_scalars && v.memory() == Memory::device)
    gmres_device_cycles(op, v, s, b_norm, stats, zero_start);
  else
#endif
    gmres_host_cycles(op, v, s, b_norm, stats, zero_start);
  return stats;
}

/// BiCGStab's vectors in its space.
namespace bicgstab_vectors {
constexpr int B = 0, X = 1, R = 2, RHAT = 3, P = 4, V = 5, S = 6, T = 7, TRUE_R = 8;
}

/// BiCGStab's confirmation of rhs r's claim by its true residual (its iterations set, the product counted here):
/// converged, out of iterations, stagnated, or to restart (the result).
bool bicgstab_confirm(std::size_t r, double true_norm, double b_norm, const KrylovSettings& set, Stagnation& stagnation,
                      SolveStats& st) {
  st.matvecs++;
  st.residual = true_norm;
  const bool converged = true_norm <= set.tolerance || b_norm == 0;
  const bool stalled_out = stagnation.stalled_out(r, true_norm, true, set.stagnation_cycles);
  st.converged = converged;
  st.stagnated = !converged && stalled_out;
  return !converged && !st.stagnated && st.iterations < set.max_iterations && std::isfinite(true_norm);
}

// BiCGStab (van der Vorst 1992), one set of scalars per rhs, on the host (any space). When a rhs's recursive
// residual claims convergence, the true residual is computed; if it is still above the tolerance (the recursion
// drifts in finite precision) that rhs restarts from its true residual, unless that was the stagnation_cycles-th
// claim in a row that did not halve the true residual (the precision's floor, as for GMRES's cycles): then it
// stops, unconverged and marked stagnated.
template <class Real>
void bicgstab_host_iterations(LinearOperator<Real>& op, VectorSpace<Real>& v, const KrylovSettings& set,
                              std::span<const double> b_norm, std::vector<SolveStats>& stats) {
  using namespace bicgstab_vectors;
  const std::size_t nr = v.layout().rhs;
  std::vector<double> norm(nr), true_norm(nr);
  std::vector<char> active(nr, 0), claim(nr, 0);
  Stagnation stagnation(nr);  // counted at every confirmed claim
  std::vector<Scalar> rho(nr), alpha(nr), omega(nr), rho_new(nr), tmp(nr), tt(nr), coef(nr);
  std::vector<Scalar> keep(nr), add(nr), coef2(nr), st(2 * nr);
  const std::vector<Scalar> zeros(nr, 0.0), ones(nr, 1.0);
  const auto masked = [&](const std::vector<char>& mask, Scalar on, Scalar off) {
    for (std::size_t r = 0; r < nr; ++r) coef[r] = mask[r] ? on : off;
    return std::span<const Scalar>(coef);
  };
  // (Re)start the rhs in `mask` from the residual in TRUE_R: r = r̂ = TRUE_R, p = v = 0, ρ = α = ω = 1.
  const auto restart = [&](const std::vector<char>& mask) {
    for (int vec : {R, RHAT}) {
      v.scale(masked(mask, 0.0, 1.0), vec);
      v.axpy(masked(mask, 1.0, 0.0), TRUE_R, vec);
    }
    v.scale(masked(mask, 0.0, 1.0), P);
    v.scale(masked(mask, 0.0, 1.0), V);
    for (std::size_t r = 0; r < nr; ++r)
      if (mask[r]) rho[r] = alpha[r] = omega[r] = 1.0;
  };
  // Confirms the claims with the true residual: converged, out of iterations, or restarted.
  const auto confirm = [&] {
    true_residual(op, v, B, X, TRUE_R, b_norm, true_norm);
    std::vector<char> again(nr, 0);
    for (std::size_t r = 0; r < nr; ++r) {
      if (!claim[r]) continue;
      again[r] = bicgstab_confirm(r, true_norm[r], b_norm[r], set, stagnation, stats[r]);
      active[r] = again[r];
    }
    restart(again);
  };

  std::fill(claim.begin(), claim.end(), 1);
  confirm();  // the initial residual; every rhs not already converged starts here
  while (std::any_of(active.begin(), active.end(), [](char a) { return a != 0; })) {
    std::fill(claim.begin(), claim.end(), 0);
    v.dot(RHAT, R, rho_new);
    for (std::size_t r = 0; r < nr; ++r)
      if (active[r] && (rho_new[r] == Scalar(0) || omega[r] == Scalar(0))) claim[r] = 1;  // breakdown
    std::vector<char> step(nr);
    for (std::size_t r = 0; r < nr; ++r) step[r] = active[r] && !claim[r];
    // Each update is one pass of linear_update (a host space: 20 vectors moved per iteration, against 40 as
    // separate copies, scales and axpys); a rhs not stepping keeps its p, x and r (coefficients 1, 0, 0).
    // p = β p − β ω v + r, β = (ρ_new/ρ)(α/ω)
    for (std::size_t r = 0; r < nr; ++r) {
      const Scalar beta = (rho_new[r] / rho[r]) * (alpha[r] / omega[r]);
      keep[r] = step[r] ? beta : 1.0;
      add[r] = step[r] ? 1.0 : 0.0;
      coef2[r] = step[r] ? -beta * omega[r] : 0.0;
    }
    v.linear_update(keep, P, add, R, coef2, V, {});
    op.apply(v.data(P), v.data(V));
    v.dot(RHAT, V, tmp);
    for (std::size_t r = 0; r < nr; ++r) {
      if (!step[r]) continue;
      stats[r].matvecs++;
      stats[r].iterations++;
      if (tmp[r] == Scalar(0)) {
        step[r] = 0;
        claim[r] = 1;
        continue;
      }
      alpha[r] = rho_new[r] / tmp[r];
      rho[r] = rho_new[r];
    }
    // s = r − α v (every rhs: s = r where not stepping) and ‖s‖; a rhs whose ‖s‖ is small takes x += α p and
    // stops here.
    for (std::size_t r = 0; r < nr; ++r) coef[r] = step[r] ? -alpha[r] : 0.0;
    v.linear_update(zeros, S, ones, R, coef, V, norm);
    std::vector<char> half(nr, 0);
    for (std::size_t r = 0; r < nr; ++r) half[r] = step[r] && norm[r] <= set.tolerance * b_norm[r];
    if (std::any_of(half.begin(), half.end(), [](char h) { return h != 0; })) {
      for (std::size_t r = 0; r < nr; ++r) coef[r] = half[r] ? alpha[r] : 0.0;
      v.axpy(coef, P, X);
    }
    for (std::size_t r = 0; r < nr; ++r)
      if (half[r]) {
        step[r] = 0;
        claim[r] = 1;
      }
    op.apply(v.data(S), v.data(T));
    // t·s and ‖t‖² in one pass over s and t (dots over the basis {S, T}: conj(s)·t and conj(t)·t).
    static_assert(T == S + 1);
    v.dots(S, 2, T, st);
    for (std::size_t r = 0; r < nr; ++r) {
      tmp[r] = std::conj(st[r]);  // conj(t)·s
      tt[r] = st[nr + r];
    }
    for (std::size_t r = 0; r < nr; ++r) {
      if (!step[r]) continue;
      stats[r].matvecs++;
      omega[r] = tt[r] == Scalar(0) ? Scalar(0) : tmp[r] / tt[r];
    }
    // x += α p + ω s;  r = s − ω t, and ‖r‖
    for (std::size_t r = 0; r < nr; ++r) {
      add[r] = step[r] ? alpha[r] : 0.0;
      coef2[r] = step[r] ? omega[r] : 0.0;
    }
    v.linear_update(ones, X, add, P, coef2, S, {});
    for (std::size_t r = 0; r < nr; ++r) {
      keep[r] = step[r] ? 0.0 : 1.0;
      add[r] = step[r] ? 1.0 : 0.0;
      coef2[r] = step[r] ? -omega[r] : 0.0;
    }
    v.linear_update(keep, R, add, S, coef2, T, norm);
    for (std::size_t r = 0; r < nr; ++r)
      if (step[r] && (norm[r] <= set.tolerance * b_norm[r] || stats[r].iterations >= set.max_iterations ||
                      !std::isfinite(norm[r])))
        claim[r] = 1;
    if (std::any_of(claim.begin(), claim.end(), [](char c) { return c != 0; })) confirm();
  }
}

#if GRATINGSIM_HAVE_CUDA
/// BiCGStab on a device space with the per-rhs scalars on the device (device.hpp, DeviceBiCGStab): each rhs takes
/// the host iteration's steps, to rounding, with the same confirmations. The host enqueues iterations and waits for
/// the one steps_ahead − 1 behind the last enqueued to learn whether some rhs claimed; it then confirms every claim
/// as bicgstab_host_iterations() does (one true residual, which synchronises) and settles them. A claimed rhs sits
/// out the iterations enqueued meanwhile; after the last claim, steps_ahead − 1 iterations run masked (their
/// products on the whole batch). With s.cuda_graphs on a capturable operator, an iteration (its two products and
/// its kernels) is one CUDA graph, captured at the first and replayed after.
template <class Real>
void bicgstab_device_iterations(LinearOperator<Real>& op, VectorSpace<Real>& v, const KrylovSettings& set,
                                std::span<const double> b_norm, std::vector<SolveStats>& stats) {
  using namespace bicgstab_vectors;
  const std::size_t nr = v.layout().rhs;
  const std::unique_ptr<DeviceBiCGStab<Real>> device =
      make_device_bicgstab<Real>(v, {X, R, RHAT, P, V, S, T, TRUE_R}, set.tolerance, set.max_iterations, b_norm);
  const bool graph = set.cuda_graphs && op.capturable();
  const auto product = [&](int x, int y) { op.apply(v.data(x), v.data(y)); };
  std::vector<double> true_norm(nr);
  std::vector<int> confirmations(nr, 0);
  std::vector<char> again(nr), active(nr, 0);
  Stagnation stagnation(nr);
  // Confirms every claimed rhs (all of them at the start) and settles them; whether some rhs goes on.
  const auto confirm = [&] {
    device->fetch_state();
    true_residual(op, v, B, X, TRUE_R, b_norm, true_norm);  // synchronises: the state has arrived
    bool any = false;
    for (std::size_t r = 0; r < nr; ++r) {
      const typename DeviceBiCGStab<Real>::RhsState st = device->state(int(r));
      again[r] = 0;
      if (st.claimed) {
        stats[r].iterations = st.iterations;
        stats[r].matvecs = st.products + confirmations[r]++;
        again[r] = bicgstab_confirm(r, true_norm[r], b_norm[r], set, stagnation, stats[r]);
        active[r] = again[r];
      }
      any = any || active[r];
    }
    device->settle(again);
    return any;
  };
  const long behind = set.steps_ahead - 1;
  bool going = confirm();
  long settled = device->iterations_enqueued();  // iterations before this one are covered by the last confirmation
  while (going) {
    device->iterate(product, graph);
    const long look = device->iterations_enqueued() - 1 - behind;
    if (look >= settled && device->claims_after(look)) {
      going = confirm();
      settled = device->iterations_enqueued();
    }
  }
}
#endif

template <class Real>
std::vector<SolveStats> bicgstab(LinearOperator<Real>& op, VectorSpace<Real>& v, const KrylovSettings& set) {
  using namespace bicgstab_vectors;
  GS_EXPECTS(set.steps_ahead == 1 || set.steps_ahead == 2,
             "BiCGStab: steps_ahead must be 1 or 2, got " + std::to_string(set.steps_ahead));
  const std::vector<double> b_norm = load_system<Real>(v, B, X);
  // The host iteration's restart scales r, r̂, p and v by 0 where it sets them, and its update of s takes 0·s: they
  // must hold numbers (the space's work vectors hold whatever an earlier solve left).
  for (const int i : {R, RHAT, P, V, S}) v.zero(i);
  std::vector<SolveStats> stats(v.layout().rhs);
#if GRATINGSIM_HAVE_CUDA
  if (set.device_scalars && v.memory() == Memory::device)
    bicgstab_device_iterations(op, v, set, b_norm, stats);
  else
#endif
    bicgstab_host_iterations(op, v, set, b_norm, stats);
  return stats;
}

}  // namespace

template <class Real>
std::vector<SolveStats> solve_dense(LinearOperator<Real>& op, std::span<const std::complex<Real>> b,
                                    std::span<std::complex<Real>> x) {
  using Complex = std::complex<Real>;
  const BatchLayout& l = op.layout();
  const std::size_t n = l.per_rhs(), nr = l.rhs;
  auto space = op.make_space(3);
  VectorSpace<Real>& v = *space;
  std::vector<Eigen::MatrixXcd> a(nr, Eigen::MatrixXcd(n, n));
  std::vector<Complex> unit(l.size()), column(l.size());
  // Per-rhs index j = p·block + i lives at (p·rhs + r)·block + i in the batch.
  const auto batch_index = [&](std::size_t j, std::size_t r) { return ((j / l.block) * nr + r) * l.block + j % l.block; };
  for (std::size_t j = 0; j < n; ++j) {
    std::fill(unit.begin(), unit.end(), Complex(0));
    for (std::size_t r = 0; r < nr; ++r) unit[batch_index(j, r)] = 1;
    v.upload(unit, 0);
    op.apply(v.data(0), v.data(1));
    v.download(1, column);
    for (std::size_t r = 0; r < nr; ++r)
      for (std::size_t i = 0; i < n; ++i) a[r](Eigen::Index(i), Eigen::Index(j)) = Scalar(column[batch_index(i, r)]);
  }
  std::vector<SolveStats> stats(nr);
  for (std::size_t r = 0; r < nr; ++r) {
    Eigen::VectorXcd rhs(n);
    for (std::size_t i = 0; i < n; ++i) rhs(Eigen::Index(i)) = Scalar(b[batch_index(i, r)]);
    const Eigen::VectorXcd sol = a[r].partialPivLu().solve(rhs);
    for (std::size_t i = 0; i < n; ++i) x[batch_index(i, r)] = Complex(sol(Eigen::Index(i)));
    stats[r].matvecs = int(n);
  }
  std::vector<double> b_norm(nr), residual(nr);
  v.upload(b, 0);
  v.upload(x, 1);
  v.norm(0, b_norm);
  true_residual(op, v, 0, 1, 2, b_norm, residual);
  for (std::size_t r = 0; r < nr; ++r) {
    stats[r].matvecs++;
    stats[r].residual = residual[r];
  }
  return stats;
}

int solve_space_size(const KrylovSettings& settings) {
  switch (settings.method) {
    case Method::gmres: return settings.restart + 4;
    case Method::bicgstab: return 9;
    case Method::dense_lu: return 3;
    case Method::automatic: return std::max(settings.restart + 4, 9);
  }
  return 3;
}

template <class Real>
std::vector<SolveStats> solve(LinearOperator<Real>& op, VectorSpace<Real>& space, const KrylovSettings& settings) {
  GS_EXPECTS(settings.tolerance > 0 && settings.max_iterations >= 1, "solve: tolerance must be > 0 and max_iterations ≥ 1");
  GS_EXPECTS(settings.method != Method::automatic, "solve: the method must be chosen (gmres, bicgstab or dense_lu)");
  GS_EXPECTS(space.count() >= solve_space_size(settings) && space.layout().size() == op.layout().size() &&
                 space.layout().rhs == op.layout().rhs,
             "solve: the space holds " + std::to_string(space.count()) + " vectors of its layout; the method needs " +
                 std::to_string(solve_space_size(settings)) + " of the operator's");
  switch (settings.method) {
    case Method::gmres: return gmres(op, space, settings);
    case Method::bicgstab: return bicgstab(op, space, settings);
    case Method::dense_lu: {
      std::vector<std::complex<Real>> b(op.layout().size()), x(b.size());
      space.download(0, b);
      space.download(1, x);
      std::vector<SolveStats> stats = solve_dense<Real>(op, b, x);
      space.upload(x, 1);
      for (SolveStats& s : stats) s.converged = s.residual <= settings.tolerance;
      return stats;
    }
    case Method::automatic: break;
  }
  return {};
}

template <class Real>
std::vector<SolveStats> solve(LinearOperator<Real>& op, std::span<const std::complex<Real>> b,
                              std::span<std::complex<Real>> x, const KrylovSettings& settings) {
  GS_EXPECTS(b.size() == op.layout().size() && x.size() == op.layout().size(), "solve: vector sizes do not match the operator");
  const auto space = op.make_space(solve_space_size(settings));
  space->upload(b, 0);
  space->upload(x, 1);
  std::vector<SolveStats> stats = solve(op, *space, settings);
  space->download(1, x);
  return stats;
}

#define GRATINGSIM_INSTANTIATE(Real)                                                                              \
  template std::vector<SolveStats> solve<Real>(LinearOperator<Real>&, VectorSpace<Real>&, const KrylovSettings&); \
  template std::vector<SolveStats> solve<Real>(LinearOperator<Real>&, std::span<const std::complex<Real>>,       \
                                                std::span<std::complex<Real>>, const KrylovSettings&);            \
  template std::vector<SolveStats> solve_dense<Real>(LinearOperator<Real>&, std::span<const std::complex<Real>>, \
                                                      std::span<std::complex<Real>>);
GRATINGSIM_INSTANTIATE(float)
GRATINGSIM_INSTANTIATE(double)
#undef GRATINGSIM_INSTANTIATE

}  // namespace gratingsim::physics
