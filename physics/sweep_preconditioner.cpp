#include "physics/sweep_preconditioner.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "physics/green_tensors.hpp"

namespace gratingsim::physics {

using detail::GreenTensors;
using detail::Tensor;

std::size_t sweep_preconditioner_bytes(std::size_t slices, std::size_t orders, std::size_t incidences,
                                       std::size_t real_bytes, bool on_device) {
  const double o = double(orders), per_slice = on_device ? 41.0 : 33.0,
               matrices = double(incidences) * (double(slices) * (per_slice * o * o + o) + (on_device ? 99.0 * o * o : 0.0)),
               workspace = on_device ? 7.0 * o * double(slices) : 0.0,
               scratch = 2.0 * double(incidences) * (3.0 * o * (double(slices) + 1.0) + 4.0 * o + workspace);  // two rhs each
  const double complex_numbers = matrices + scratch;
  return std::size_t(std::min(complex_numbers * 2.0 * double(real_bytes), 1.8e19));
}

std::vector<int> first_groups(std::span<const SweepGroup> groups, int incidences) {
  std::vector<int> first(std::size_t(incidences) + 1, 0);
  for (const SweepGroup& group : groups) ++first[std::size_t(group.incidence) + 1];
  for (std::size_t a = 0; a < std::size_t(incidences); ++a) first[a + 1] += first[a];
  return first;
}

namespace {

using Matrix = Eigen::MatrixXcd;
using C = std::complex<double>;


}  // namespace

namespace {

/// Whether no kernel term maps y onto x or z or back (1D normal-vector patterns and Laurent's χ I).
bool kernels_split_y(const conv::Problem& problem) {
  if (problem.n2 != 1) return false;  // a 2D lattice
  if (problem.scalar()) return true;
  const unsigned axes = d_axes(problem);
  for (const conv::Term& t : problem.pattern) {
    const int out = t.output < 3 ? t.output : d_axis(axes, t.output);
    if ((out == 1) != (t.input == 1)) return false;
  }
  return true;
}

/// The groups of incidence a (SweepMatrices): two where s and p decouple, else one.
std::vector<SweepGroup> incidence_groups(const GreenCoefficients& g, int a, bool kernels_split) {
  bool along_x = kernels_split;
  for (int m = 0; m < g.orders && along_x; ++m) along_x = g.ty[std::size_t(a) * g.orders + m] == 0.0;
  if (along_x) return {SweepGroup{a, {1}, {0}}, SweepGroup{a, {0, 2}, {1}}};
  return {SweepGroup{a, {0, 1, 2}, {0, 1}}};
}

}  // namespace

SweepInputs sweep_inputs(const GreenCoefficients& g, const conv::Problem& problem,
                         std::span<const std::complex<double>> kernels, bool dense) {
  const int nz = g.slices, nm = g.orders, na = g.incidences;
  GS_EXPECTS(std::size_t(nm) == problem.field_size() && kernels.size() == problem.kernels_total() &&
                 problem.slices == nz * g.members && !g.self.empty(),
             "sweep_inputs: sizes of the problem, kernels and Green coefficients disagree");
  SweepInputs out;
  out.incidences = na;
  out.orders = nm;
  out.slices = nz;
  const bool split = kernels_split_y(problem);
  std::size_t matrices = 0, gains = 0, edges = 0, rho = 0, rows = 0, amplitude_rows = 0;
  for (int a = 0; a < na; ++a)
    for (SweepGroup& group : incidence_groups(g, a, split)) {
      const std::size_t n = group.n(nm), h = group.h(nm);
      group.matrices = matrices;
      group.gains = gains;
      group.edges = edges;
      group.rho = rho;
      group.rows = rows;
      group.amplitude_rows = amplitude_rows;
      matrices += n * n * nz;
      gains += n * h * nz;
      edges += n * h;
      rho += h * h;
      rows += n * 3 * nz;
      amplitude_rows += h * 3 * nz;
      out.groups.push_back(std::move(group));
    }
  if (dense) {
    out.local.resize(matrices);
    out.down.resize(gains);
    out.source_up.resize(gains);
  }
  out.self_rows.resize(rows);
  out.down_rows.resize(amplitude_rows);
  out.up_rows.resize(amplitude_rows);
  out.e_plus.resize(edges);
  out.e_minus.resize(edges);
  out.rho.resize(rho);
  out.step.resize(std::size_t(na) * nz * nm);
  for (int a = 0; a < na; ++a)
    for (int p = 0; p < nz; ++p)
      for (int m = 0; m < nm; ++m)
        out.step[(std::size_t(a) * nz + p) * nm + m] = g.step[(std::size_t(a) * nm + m) * nz + p];
  const detail::SliceTerms terms = detail::slice_terms(problem);
  out.source_terms = terms.source;
  out.d_terms = terms.d;
  out.kernels = kernels;
  out.n1 = problem.n1;
  out.n2 = problem.n2;
  out.kernel_count = problem.kernels;
  out.kernel_size = problem.kernel_size();
  out.members = g.members;
  for (int a = 0; a < na; ++a) out.member.push_back(member_of(g, a));
  const std::size_t per_slice = std::size_t(problem.kernels) * problem.kernel_size();
  const int ng = int(out.groups.size());
  // The Green tensors per (incidence, order), the same for every slice (once here, not per (group, slice)).
  std::vector<GreenTensors> tensors;
  tensors.reserve(std::size_t(na) * nm);
  for (std::size_t io = 0; io < std::size_t(na) * nm; ++io) tensors.push_back(detail::green_tensors(g, io));
  // OpenMP over (group, slice): every pair writes its own rows and matrices. Without the dense parts (the device
  // set-up's inputs) a pair is a few rows, O(n): serial, since the team cost more than the work where it was
  // started (the thin metal's set-ups on the H200's host: 4–5 ms each, with the two Richardson solves' teams and
  // the lanes' issuing threads sharing the cores, against about 1 ms serial; session 27).
  // The dense parts are assembled in Eigen's own aligned storage, one per thread, and copied out: Eigen's vectorised
  // loops below peel by the destination's alignment, which in the arrays of SweepInputs depends on the batch, and a
  // result must not (a peeled element is a scalar complex product, the rest packet ones, not always bitwise equal).
#pragma omp parallel if (dense)
  {
    Matrix assembled_local, assembled_down, assembled_up, coefficients;
#pragma omp for schedule(dynamic)
    for (int kp = 0; kp < ng * nz; ++kp) {
      const int k = kp / nz, p = kp % nz;
      const SweepGroup& group = out.groups[std::size_t(k)];
      const int a = group.incidence;
      const Eigen::Index n = Eigen::Index(group.n(nm)), h = Eigen::Index(group.h(nm));
      const int nc = int(group.components.size()), np = int(group.polarisations.size());
      const GreenTensors* t = &tensors[std::size_t(a) * nm];
      const auto coefficient_index = [&](int m, int q) { return (std::size_t(a) * nm + m) * nz + q; };
      // The amplitude vectors of polarisation pol: ê (pol 0) or p̂± (pol 1), component c.
      const auto vector = [&](int m, int pol, int sign, int c) {
        return pol == 0 ? t[m].e[c] : sign > 0 ? t[m].plus[c] : t[m].minus[c];
      };
      if (p == 0) {  // the group's own: Ẽ± (column (k, m): scale times the vector at rows (c, m)) and ρ_{N−1}
        Eigen::Map<Matrix> e_plus(&out.e_plus[group.edges], n, h), e_minus(&out.e_minus[group.edges], n, h);
        Eigen::Map<Matrix> rho(&out.rho[group.rho], h, h);
        e_plus.setZero();
        e_minus.setZero();
        rho.setZero();
        for (int m = 0; m < nm; ++m) {
          for (int ci = 0; ci < nc; ++ci)
            for (int ki = 0; ki < np; ++ki) {
              const int c = group.components[ci], pol = group.polarisations[ki];
              e_plus(ci * nm + m, ki * nm + m) = t[m].scale * vector(m, pol, +1, c);
              e_minus(ci * nm + m, ki * nm + m) = t[m].scale * vector(m, pol, -1, c);
            }
          const std::size_t io = std::size_t(a) * nm + m, i = coefficient_index(m, nz - 1);
          for (int ki = 0; ki < np; ++ki)
            rho(ki * nm + m, ki * nm + m) =
                g.depth[i] * g.depth[i] * (group.polarisations[ki] == 0 ? g.rs[io] : g.rp[io]);
        }
      }
      // The row coefficients (SweepInputs): self(i, m)[o], down(k, m)[o] and up(k, m)[o].
      C* self_rows = &out.self_rows[group.rows + std::size_t(p) * std::size_t(n) * 3];
      C* down_rows = &out.down_rows[group.amplitude_rows + std::size_t(p) * std::size_t(h) * 3];
      C* up_rows = &out.up_rows[group.amplitude_rows + std::size_t(p) * std::size_t(h) * 3];
      for (int m = 0; m < nm; ++m) {
        const std::size_t i = coefficient_index(m, p);
        const Tensor gs = detail::self_green(t[m], g, i);
        const C w = g.weight[i];
        for (int o = 0; o < 3; ++o) {
          for (int ri = 0; ri < nc; ++ri)
            self_rows[std::size_t(ri * nm + m) * 3 + o] = gs[group.components[ri] * 3 + o];
          for (int ki = 0; ki < np; ++ki) {
            down_rows[std::size_t(ki * nm + m) * 3 + o] = w * vector(m, group.polarisations[ki], -1, o);
            up_rows[std::size_t(ki * nm + m) * 3 + o] = w * vector(m, group.polarisations[ki], +1, o);
          }
        }
      }
      if (!dense) continue;
      // L', Φ and W Π⁺ C over the group's components only, column by column: element (row (ri, m), column
      // (cj, m')) gains, per source term (o, cj, κ) with o in the group, coefficient(row)[o]·κ(m − m'), and per
      // D term (ri, cj, κ) κ(m − m').
      std::array<int, 3> local{-1, -1, -1};  // a component's index in the group, −1 outside it
      for (int ci = 0; ci < nc; ++ci) local[std::size_t(group.components[std::size_t(ci)])] = ci;
      Matrix& lprime = assembled_local;
      Matrix& phi = assembled_down;
      Matrix& psi = assembled_up;
      lprime.setIdentity(n, n);
      phi.setZero(h, n);
      psi.setZero(h, n);
      const detail::SliceKernels kappa(
          problem, kernels.data() + (std::size_t(p) * g.members + out.member[std::size_t(a)]) * per_slice);
      // A source term (o, cj, κ) adds diag(row coefficients of output o) · T_κ to each block (ri, cj) of L' and
      // (ki, cj) of Φ and W Π⁺ C: the coefficients gathered contiguous per term, then each column of T_κ run by run.
      coefficients.resize(nm, nc + 2 * np);  // self (ri), then down (ki), then up (ki), of output o
      for (const conv::Term& term : terms.source) {
        const int cj = local[std::size_t(term.input)];
        if (cj < 0 || local[std::size_t(term.output)] < 0) continue;
        for (int m = 0; m < nm; ++m) {
          for (int ri = 0; ri < nc; ++ri) coefficients(m, ri) = self_rows[std::size_t(ri * nm + m) * 3 + term.output];
          for (int ki = 0; ki < np; ++ki) {
            coefficients(m, nc + ki) = down_rows[std::size_t(ki * nm + m) * 3 + term.output];
            coefficients(m, nc + np + ki) = up_rows[std::size_t(ki * nm + m) * 3 + term.output];
          }
        }
        for (int mp = 0; mp < nm; ++mp) {
          const Eigen::Index column = Eigen::Index(cj) * nm + mp;
          kappa.for_column_runs(term.kernel, mp, [&](int m0, const C* run, int length) {
            const Eigen::Map<const Eigen::VectorXcd> k(run, length);
            for (int ri = 0; ri < nc; ++ri)
              lprime.col(column).segment(ri * nm + m0, length) +=
                  coefficients.col(ri).segment(m0, length).cwiseProduct(k);
            for (int ki = 0; ki < np; ++ki) {
              phi.col(column).segment(ki * nm + m0, length) +=
                  coefficients.col(nc + ki).segment(m0, length).cwiseProduct(k);
              psi.col(column).segment(ki * nm + m0, length) +=
                  coefficients.col(nc + np + ki).segment(m0, length).cwiseProduct(k);
            }
          });
        }
      }
      for (const conv::Term& term : terms.d) {  // term.output: D's axis
        const int ri = local[std::size_t(term.output)], cj = local[std::size_t(term.input)];
        if (ri < 0 || cj < 0) continue;
        for (int mp = 0; mp < nm; ++mp)
          kappa.for_column_runs(term.kernel, mp, [&](int m0, const C* run, int length) {
            lprime.col(cj * nm + mp).segment(ri * nm + m0, length) += Eigen::Map<const Eigen::VectorXcd>(run, length);
          });
      }
      const std::size_t at = group.gains + std::size_t(p) * std::size_t(n * h);
      Eigen::Map<Matrix>(&out.local[group.matrices + std::size_t(p) * std::size_t(n * n)], n, n) = lprime;
      Eigen::Map<Matrix>(&out.down[at], h, n) = phi;
      Eigen::Map<Matrix>(&out.source_up[at], h, n) = psi;
    }
  }
  return out;
}

std::vector<int> run_bottoms(const SweepInputs& in, std::size_t group) {
  const SweepGroup& g = in.groups.at(group);
  const std::size_t n = g.n(in.orders), h = g.h(in.orders), member = std::size_t(in.member.at(std::size_t(g.incidence))),
                    kernel_block = std::size_t(in.kernel_count) * in.kernel_size;
  const auto same = [](const std::complex<double>* a, const std::complex<double>* b, std::size_t count) {
    return std::memcmp(a, b, count * sizeof(std::complex<double>)) == 0;
  };
  const auto same_as_next = [&](std::size_t p) {
    return same(&in.self_rows[g.rows + p * n * 3], &in.self_rows[g.rows + (p + 1) * n * 3], n * 3) &&
           same(&in.down_rows[g.amplitude_rows + p * h * 3], &in.down_rows[g.amplitude_rows + (p + 1) * h * 3], h * 3) &&
           same(&in.up_rows[g.amplitude_rows + p * h * 3], &in.up_rows[g.amplitude_rows + (p + 1) * h * 3], h * 3) &&
           same(in.kernels.data() + (p * std::size_t(in.members) + member) * kernel_block,
                in.kernels.data() + ((p + 1) * std::size_t(in.members) + member) * kernel_block, kernel_block);
  };
  std::vector<int> bottom(std::size_t(in.slices));
  for (int p = in.slices - 1; p >= 0; --p)
    bottom[std::size_t(p)] = p + 1 < in.slices && same_as_next(std::size_t(p)) ? bottom[std::size_t(p) + 1] : p;
  return bottom;
}

std::vector<int> long_run_bottoms(const SweepInputs& in, std::size_t group, int least_run) {
  std::vector<int> out(std::size_t(in.slices), -1);
  const std::vector<int> bottom = run_bottoms(in, group);
  for (int top = 0; top < in.slices; top = bottom[std::size_t(top)] + 1)
    if (bottom[std::size_t(top)] - top + 1 >= least_run)
      std::fill(out.begin() + top, out.begin() + bottom[std::size_t(top)] + 1, bottom[std::size_t(top)]);
  return out;
}

std::string singular_slice_text(int incidence, int slice, double pivot, double largest) {
  return "the sweep preconditioner's slice matrix of incidence " + std::to_string(incidence) + ", slice " +
         std::to_string(slice) + " is singular (smallest pivot " + std::to_string(pivot) + " against " +
         std::to_string(largest) + "): a resonance of the slices below it?";
}

namespace {

/// Where a SweepRun's matrices stand in run_data, from the run's `at` (the layout of sweep_preconditioner.hpp):
/// L''s factors, B, E, D_m, I − F_m, G_B, G_E.
struct RunLayout {
  std::size_t n, h;
  [[nodiscard]] std::size_t b() const { return n * n; }
  [[nodiscard]] std::size_t e() const { return n * n + n * h; }
  [[nodiscard]] std::size_t d_m() const { return n * n + 2 * n * h; }
  [[nodiscard]] std::size_t i_minus_f() const { return d_m() + h * h; }
  [[nodiscard]] std::size_t g_b() const { return d_m() + 2 * h * h; }
  [[nodiscard]] std::size_t g_e() const { return d_m() + 3 * h * h; }
  [[nodiscard]] std::size_t size() const { return d_m() + 4 * h * h; }
};

/// max |a_ij| (regular_factorisation's `largest`) as √max |a_ij|²: std::abs of a complex number is hypot, which took
/// a third of the host set-up's 8 % in libm (session 33, perf on configs/default.yaml); |a|² overflows only beyond
/// 1e154, where the matrix is not usable anyway (infinite: refused as not finite).
template <class Derived>
double largest_magnitude(const Eigen::MatrixBase<Derived>& a) {
  return std::sqrt(a.cwiseAbs2().maxCoeff());
}

/// LU factors with partial pivoting in place, as Eigen's PartialPivLU makes them (by its own routine,
/// internal::partial_lu_inplace: the same factors bit for bit), without the ‖M‖₁ that PartialPivLU's constructor
/// also takes for rcond(), which nothing here reads: n² complex magnitudes (hypot), 4 % of configs/default.yaml's
/// run on the dev CPU (session 35, perf).
class InPlaceLu {
 public:
  explicit InPlaceLu(Eigen::Ref<Matrix> m) : lu_(m), transpositions_(m.rows()) {
    Eigen::Transpositions<Eigen::Dynamic, Eigen::Dynamic, int>::StorageIndex swaps = 0;
    Eigen::internal::partial_lu_inplace(lu_, transpositions_, swaps);
    permutation_ = transpositions_;
  }
  /// P, M = P⁻¹ L U.
  [[nodiscard]] const Eigen::PermutationMatrix<Eigen::Dynamic, Eigen::Dynamic, int>& permutation() const {
    return permutation_;
  }
  /// x = M⁻¹ b, as PartialPivLU::solve: x = P b, then L and U in place.
  template <class Rhs>
  void solve(const Rhs& b, Matrix& x) const {
    x = permutation_ * b;
    lu_.triangularView<Eigen::UnitLower>().solveInPlace(x);
    lu_.triangularView<Eigen::Upper>().solveInPlace(x);
  }

 private:
  Eigen::Ref<Matrix> lu_;
  Eigen::Transpositions<Eigen::Dynamic, Eigen::Dynamic, int> transpositions_;
  Eigen::PermutationMatrix<Eigen::Dynamic, Eigen::Dynamic, int> permutation_;
};

/// out = M⁻¹ in by M's LU factors (size × size, unit lower L and upper U in one matrix, as getrf) and row
/// permutation (M = P⁻¹ L U, P moving row i to row permutation[i]).
template <class In, class Out>
void solve_by_factors(const std::complex<double>* factors, const int* permutation, Eigen::Index size, const In& in,
                      Out&& out) {
  const Eigen::Map<const Eigen::MatrixXcd> lu(factors, size, size);
  for (Eigen::Index i = 0; i < size; ++i) out(permutation[i]) = in(i);
  lu.triangularView<Eigen::UnitLower>().solveInPlace(out);
  lu.triangularView<Eigen::Upper>().solveInPlace(out);
}

/// Ẽ⁺'s non-zeros: Ẽ⁺ (n × h) has column (k, m) non-zero only in rows (c, m) (SweepMatrices); column c·np + k of
/// the result (nm × nc·np) holds Ẽ⁺((c, m), (k, m)) over m. Gathered once per group.
Matrix edge_diagonals(const Eigen::Map<const Matrix>& e_plus, int nm, int nc, int np) {
  Matrix diagonals(nm, nc * np);
  for (int c = 0; c < nc; ++c)
    for (int k = 0; k < np; ++k)
      for (int m = 0; m < nm; ++m) diagonals(m, c * np + k) = e_plus(c * nm + m, k * nm + m);
  return diagonals;
}

/// out += sign · Ẽ⁺ x, x h × cols, without a dense product, from Ẽ⁺'s diagonals (edge_diagonals): block c of a
/// column of Ẽ⁺ x is Σ_k diag_m Ẽ⁺((c, m), (k, m)) · block k of that column of x, column by column, contiguous in m
/// (row by row, as first written, Eigen gathered every element across the columns: half of sweep_matrices' own
/// time, session 35). A single column (the application's vectors) takes the elements in turn. Either way each
/// element sums its k terms in increasing k; nothing is allocated.
template <class Out, class In>
void add_edge_product(const Matrix& diagonals, int nm, int nc, int np, const In& x, Out&& out, double sign) {
  if (x.cols() == 1) {
    for (int c = 0; c < nc; ++c)
      for (int m = 0; m < nm; ++m)
        for (int k = 0; k < np; ++k) out(c * nm + m, 0) += (sign * diagonals(m, c * np + k)) * x(k * nm + m, 0);
    return;
  }
  for (Eigen::Index j = 0; j < x.cols(); ++j)
    for (int c = 0; c < nc; ++c)
      for (int k = 0; k < np; ++k)
        out.col(j).segment(Eigen::Index(c) * nm, nm) +=
            (sign * diagonals.col(c * np + k)).cwiseProduct(x.col(j).segment(Eigen::Index(k) * nm, nm));
}

}  // namespace

SweepMatrices sweep_matrices(SweepInputs in, bool woodbury) {
  const int nz = in.slices, nm = in.orders, ng = int(in.groups.size());
  // Woodbury's runs (SweepRun), decided per group from its own inputs before anything is moved out of `in`.
  std::vector<SweepRun> runs;
  std::vector<int> run_of(std::size_t(ng) * nz, -1);
  std::size_t run_data_size = 0, run_permutation_size = 0;
  for (int k = 0; k < ng && woodbury; ++k) {
    const std::size_t n = in.groups[std::size_t(k)].n(nm), h = in.groups[std::size_t(k)].h(nm);
    // Woodbury's form pays on the host where h < n (an h × h factorisation per slice instead of the n × n one).
    const std::vector<int> bottom = h < n ? long_run_bottoms(in, std::size_t(k), host_woodbury_least_run)
                                          : std::vector<int>(std::size_t(nz), -1);
    for (int p = 0; p < nz; ++p) {
      if (bottom[std::size_t(p)] < 0) continue;
      if (p == 0 || bottom[std::size_t(p) - 1] != bottom[std::size_t(p)]) {  // the run's top slice
        runs.push_back({k, p, bottom[std::size_t(p)], run_data_size, run_permutation_size});
        run_data_size += RunLayout{n, h}.size();
        run_permutation_size += n;
      }
      run_of[std::size_t(k) * nz + std::size_t(p)] = int(runs.size()) - 1;
    }
  }
  SweepMatrices out{in.incidences, nm, nz, in.groups, std::move(in.local), {}, {}, std::move(in.down),
                    std::move(in.step), {}, {}, {}, std::move(runs), std::move(run_of), {}, {}};
  out.run_data.resize(run_data_size);
  out.run_permutation.resize(run_permutation_size);
  out.gain_a.resize(out.down.size());
  out.up.resize(out.down.size());
  for (const SweepGroup& group : out.groups) {
    out.permutation_at.push_back(out.permutation.size());
    out.permutation.resize(out.permutation.size() + group.n(nm) * std::size_t(nz));
  }
  out.e_plus = std::move(in.e_plus);
  std::string failure;  // the first singular N_p, by group (written under a critical section)
  int failed_group = ng;
  // OpenMP over the groups; each sweeps its slices bottom-up (ρ_q needs ρ_{q+1}) and writes its own
  // matrices, runs and run_of entries, so the result does not depend on the thread count. The largest
  // groups first: where s and p decouple a p group (n = 2·orders) costs 3.4 times an s group (n = orders), and
  // in the groups' own order (s, p, s, p) two threads finished two wavelengths after 23.3 orders³ per slice
  // instead of 19.
  std::vector<int> largest_first(static_cast<std::size_t>(ng));
  std::iota(largest_first.begin(), largest_first.end(), 0);
  std::stable_sort(largest_first.begin(), largest_first.end(), [&](int i, int j) {
    return out.groups[std::size_t(i)].n(nm) > out.groups[std::size_t(j)].n(nm);
  });
#pragma omp parallel for schedule(dynamic)
  for (int turn = 0; turn < ng; ++turn) {
    const int k = largest_first[std::size_t(turn)];
    const SweepGroup& group = out.groups[std::size_t(k)];
    const int a = group.incidence, nc = int(group.components.size()), np = int(group.polarisations.size());
    const Eigen::Index n = Eigen::Index(group.n(nm)), h = Eigen::Index(group.h(nm));
    const Eigen::Map<const Matrix> e_plus(&out.e_plus[group.edges], n, h), e_minus(&in.e_minus[group.edges], n, h);
    const Matrix e_plus_diagonals = edge_diagonals(e_plus, nm, nc, np);
    Matrix rho = Eigen::Map<const Matrix>(&in.rho[group.rho], h, h), e_rho(n, h), factors(n, n), gain(n, h);
    Matrix rho_d(h, h), y_factors(h, h), q(h, h), t(h, h);  // Woodbury's form
    const auto fail = [&](int p, double pivot, double largest) {
#pragma omp critical(sweep_failure)
      if (k < failed_group) {
        failed_group = k;
        failure = singular_slice_text(a, p, pivot, largest);
      }
    };
    const auto scale_by_steps = [&](int p) {  // ρ ← S_p ρ S_p
      for (Eigen::Index i = 0; i < h; ++i) {
        const C s = out.step[(std::size_t(a) * nz + p) * nm + std::size_t(i % nm)];
        rho.row(i) *= s;
        rho.col(i) *= s;
      }
    };
    for (int p = nz - 1; p >= 0; --p) {
      const std::size_t at = group.gains + std::size_t(p) * std::size_t(n * h),
                        mat = group.matrices + std::size_t(p) * std::size_t(n * n);
      const Eigen::Map<const Matrix> phi(&out.down[at], h, n), psi(&in.source_up[at], h, n);
      int* permutation = &out.permutation[out.permutation_at[std::size_t(k)] + std::size_t(p * n)];
      int& run_index = out.run_of[std::size_t(k) * nz + std::size_t(p)];
      if (run_index >= 0) {
        SweepRun& run = out.runs[std::size_t(run_index)];
        C* data = &out.run_data[run.at];
        const RunLayout layout{std::size_t(n), std::size_t(h)};
        Eigen::Map<Matrix> b_matrix(data + layout.b(), n, h), e_matrix(data + layout.e(), n, h),
            d_m(data + layout.d_m(), h, h), i_minus_f(data + layout.i_minus_f(), h, h), g_b(data + layout.g_b(), h, h),
            g_e(data + layout.g_e(), h, h);
        if (p == run.bottom) {  // the run's own: L''s factors, B, E, D_m, I − F_m, G_B, G_E
          const Eigen::Map<const Matrix> lprime(&out.lu[mat], n, n);
          const double largest = largest_magnitude(lprime);
          factors = lprime;  // aligned storage, as below
          const InPlaceLu lu(factors);
          if (!regular_factorisation(largest, factors.diagonal().cwiseAbs().minCoeff())) {
            // L' singular (a resonance of the slice alone) where N may not be: the direct form for the run, whose
            // data is then unused (zeros, so that every element of SweepMatrices is defined).
            for (int r = run.top; r <= run.bottom; ++r) out.run_of[std::size_t(k) * nz + std::size_t(r)] = -1;
            std::fill_n(data, layout.size(), C{});
          } else {
            // Each computed in Eigen's own aligned storage and copied out (as below).
            Eigen::Map<Matrix>(data, n, n) = factors;
            std::copy_n(lu.permutation().indices().data(), n, &out.run_permutation[run.permutation_at]);
            lu.solve(e_plus, gain);
            lu.solve(e_minus, e_rho);
            b_matrix = gain;
            e_matrix = e_rho;
            t.noalias() = phi * gain;
            d_m = t;
            t.noalias() = psi * gain;
            g_b = t;
            t.noalias() = psi * e_rho;
            g_e = t;
            t.noalias() = -(phi * e_rho);
            t += Matrix::Identity(h, h);
            i_minus_f = t;
          }
        }
        if (run_index >= 0) {
          // Y = I + ρD_m, factorised in aligned storage; its factors, then ρ, in the slice's lu slot; Ψ in up.
          rho_d.noalias() = rho * d_m;
          y_factors = rho_d;
          y_factors += Matrix::Identity(h, h);
          const double largest = largest_magnitude(y_factors);
          const InPlaceLu lu(y_factors);
          const double pivot = y_factors.diagonal().cwiseAbs().minCoeff();
          if (!regular_factorisation(largest, pivot)) {
            fail(p, pivot, largest);
            break;
          }
          Eigen::Map<Matrix>(&out.lu[mat], h, h) = y_factors;
          Eigen::Map<Matrix>(&out.lu[mat] + h * h, h, h) = rho;
          // The slot's rest and gain_a are unused in this form: zeros (the arrays are not initialised, DenseArray).
          std::fill(&out.lu[mat] + 2 * h * h, &out.lu[mat] + n * n, C{});
          std::fill_n(&out.gain_a[at], n * h, C{});
          std::copy_n(lu.permutation().indices().data(), h, permutation);
          Eigen::Map<Matrix>(&out.up[at], h, n) = psi;
          if (p > 0) {  // ρ_{p−1} = S_p [(ρ − (G_B + ρD_m) Y⁻¹ρ)(I − F_m) − G_E] S_p
            lu.solve(rho, q);
            rho_d += g_b;
            rho.noalias() -= rho_d * q;
            t.noalias() = rho * i_minus_f;
            rho = t - g_e;
            scale_by_steps(p);
          }
          continue;
        }
      }
      // The direct form. N = L' + Ẽ⁺(ρΦ), in place of L'; factorised there. ρΦ (h × n, kept in up for Γ below)
      // costs h²n and Ẽ⁺ its product n²·np (one 3×2 block per order), where (Ẽ⁺ρ)Φ cost n²h more: per slice
      // 18 orders³ of a conical group's 69, 5 of the 19 where s and p decouple (sweep_preconditioner.hpp).
      Eigen::Map<Matrix> big_n(&out.lu[mat], n, n), gain_a(&out.gain_a[at], n, h), up(&out.up[at], h, n);
      up.noalias() = rho * phi;
      // N formed, factorised (and solved below) in Eigen's own aligned storage, then copied out: Eigen's vectorised
      // loops peel by the destination's alignment, which in the vectors of SweepMatrices depends on the
      // batch, and a result must not (the app's results are bitwise the same in any batch or process).
      factors = big_n;
      add_edge_product(e_plus_diagonals, nm, nc, np, up, factors, 1.0);
      const double largest = largest_magnitude(factors);
      const InPlaceLu lu(factors);
      big_n = factors;
      const double pivot = factors.diagonal().cwiseAbs().minCoeff();
      if (!regular_factorisation(largest, pivot)) {
        fail(p, pivot, largest);
        break;
      }
      std::copy_n(lu.permutation().indices().data(), n, permutation);
      // H = N⁻¹(Ẽ⁺ρ + Ẽ⁻); Γ = ρΦ + W Π⁺ C.
      e_rho = e_minus;
      add_edge_product(e_plus_diagonals, nm, nc, np, rho, e_rho, 1.0);
      lu.solve(e_rho, gain);
      gain_a = gain;
      up += psi;
      if (p > 0) {  // ρ_{p−1} = S_p (ρ_p − Γ_p H_p) S_p
        rho.noalias() -= up * gain_a;
        scale_by_steps(p);
      }
    }
  }
  GS_EXPECTS(failure.empty(), failure);
  return out;
}

namespace {

template <class Real>
class HostSweepPreconditioner final : public Preconditioner<Real> {
 public:
  using Complex = std::complex<Real>;
  HostSweepPreconditioner(SweepMatrices sweep, std::vector<int> rhs_incidence)
      : s_(std::move(sweep)), rhs_incidence_(std::move(rhs_incidence)), first_group_(first_groups(s_.groups, s_.incidences)) {
    // Per rhs: b, g, the down-going amplitude and v_p of every slice for the largest group, complex128.
    // Each rhs's scratch starts on a 64-byte boundary (per_rhs_ a multiple of 4 complex128, the vector
    // Eigen-aligned), so that Eigen's loops on it peel alike whichever rhs of whichever batch it is: a
    // result is the same bit for bit in any batch.
    for (const SweepGroup& group : s_.groups)
      per_rhs_ = std::max(per_rhs_, group.n(s_.orders) * (std::size_t(s_.slices) + 1) + 4 * group.h(s_.orders));
    per_rhs_ = (per_rhs_ + 3) / 4 * 4;
    scratch_.resize(per_rhs_ * rhs_incidence_.size());
    for (const SweepGroup& group : s_.groups) {
      const Eigen::Map<const Matrix> e_plus(&s_.e_plus[group.edges], Eigen::Index(group.n(s_.orders)),
                                            Eigen::Index(group.h(s_.orders)));
      e_plus_diagonals_.push_back(
          edge_diagonals(e_plus, s_.orders, int(group.components.size()), int(group.polarisations.size())));
    }
  }

  // x, y in the batched layout (slice p, rhs r, component·orders + m); per rhs and group of its incidence
  // one sweep up and one down (sweep_preconditioner.hpp), v_p kept in complex128 between them in the
  // rhs's scratch.
  void apply(const Complex* x, Complex* y, Stream) override {
    const int nz = s_.slices, nm = s_.orders, nr = int(rhs_incidence_.size());
    const std::size_t block_size = 3 * std::size_t(nm);
    const auto element = [&](int p, int r, int c, int m) {
      return (std::size_t(p) * nr + r) * block_size + std::size_t(c) * nm + std::size_t(m);
    };
#pragma omp parallel for schedule(static)
    for (int r = 0; r < nr; ++r) {
      const int a = rhs_incidence_[std::size_t(r)];
      std::complex<double>* scratch = &scratch_[std::size_t(r) * per_rhs_];
      for (int k = first_group_[std::size_t(a)]; k < first_group_[std::size_t(a) + 1]; ++k) {
        const SweepGroup& group = s_.groups[std::size_t(k)];
        const Eigen::Index n = Eigen::Index(group.n(nm)), h = Eigen::Index(group.h(nm));
        const int nc = int(group.components.size());
        // Where s and p decouple, a Krylov vector of an s (p) incidence is exactly zero in the p (s) group's
        // components, and P maps zero to zero: the group's sweeps are skipped (most of an s rhs's work: the p
        // group's matrices are 10 orders² per slice, the s group's 4).
        bool zero = true;
        for (int p = 0; p < nz && zero; ++p)
          for (int ci = 0; ci < nc && zero; ++ci)
            for (int m = 0; m < nm && zero; ++m) zero = x[element(p, r, group.components[std::size_t(ci)], m)] == Complex{};
        if (zero) {
          for (int p = 0; p < nz; ++p)
            for (int ci = 0; ci < nc; ++ci)
              std::fill_n(&y[element(p, r, group.components[std::size_t(ci)], 0)], nm, Complex{});
          continue;
        }
        Eigen::Map<Eigen::VectorXcd> b(scratch, n), g(scratch + n, h), amplitude(scratch + n + h, h),
            c(scratch + n + 2 * h, h), d(scratch + n + 3 * h, h);
        const auto v = [&](int p) { return Eigen::Map<Eigen::VectorXcd>(scratch + n + 4 * h + p * n, n); };
        // Woodbury's form (SweepRun): the run's L', B, E, I − F_m and the slice's Y_p, ρ_p.
        const auto run_of = [&](int p) { return s_.run_of[std::size_t(k) * s_.slices + std::size_t(p)]; };
        const RunLayout layout{std::size_t(n), std::size_t(h)};
        // c ← Y_p⁻¹ ρ_p c (d scratch).
        const auto y_inverse_rho = [&](int p) {
          const C* slot = &s_.lu[group.matrices + std::size_t(p) * std::size_t(n * n)];
          d.noalias() = Eigen::Map<const Matrix>(slot + h * h, h, h) * c;
          solve_by_factors(slot, &s_.permutation[s_.permutation_at[std::size_t(k)] + std::size_t(p * n)], h, d, c);
        };
        g.setZero();
        amplitude.setZero();
        for (int p = nz - 1; p >= 0; --p) {
          for (int ci = 0; ci < nc; ++ci)
            for (int m = 0; m < nm; ++m)
              b(ci * nm + m) = std::complex<double>(x[element(p, r, group.components[std::size_t(ci)], m)]);
          // v_p = N_p⁻¹ (b_p − Ẽ⁺ g) by the factors: P, then L (unit lower), then U.
          add_edge_product(e_plus_diagonals_[std::size_t(k)], nm, nc, int(group.polarisations.size()), g, b, -1.0);
          const std::size_t at = group.gains + std::size_t(p) * std::size_t(n * h),
                            mat = group.matrices + std::size_t(p) * std::size_t(n * n);
          const Eigen::Map<const Matrix> up(&s_.up[at], h, n);
          auto vp = v(p);
          if (const int r = run_of(p); r >= 0) {  // v_p = y − B Y⁻¹ρ Φ y, y = L'⁻¹(b − Ẽ⁺g)
            const SweepRun& run = s_.runs[std::size_t(r)];
            const C* data = &s_.run_data[run.at];
            solve_by_factors(data, &s_.run_permutation[run.permutation_at], n, b, vp);
            c.noalias() = Eigen::Map<const Matrix>(&s_.down[at], h, n) * vp;
            y_inverse_rho(p);
            vp.noalias() -= Eigen::Map<const Matrix>(data + layout.b(), n, h) * c;
            if (p > 0) {  // Γ_p v_p = ρ_p (Φ v_p) + Ψ v_p
              c.noalias() = Eigen::Map<const Matrix>(&s_.down[at], h, n) * vp;
              g.noalias() += Eigen::Map<const Matrix>(&s_.lu[mat] + h * h, h, h) * c;
            }
          } else {
            solve_by_factors(&s_.lu[mat], &s_.permutation[s_.permutation_at[std::size_t(k)] + std::size_t(p * n)], n, b, vp);
          }
          if (p > 0) {
            g.noalias() += up * vp;
            for (Eigen::Index i = 0; i < h; ++i) g(i) *= s_.step[(std::size_t(a) * nz + p) * nm + std::size_t(i % nm)];
          }
        }
        for (int p = 0; p < nz; ++p) {
          const std::size_t at = group.gains + std::size_t(p) * std::size_t(n * h);
          const Eigen::Map<const Matrix> gain_a(&s_.gain_a[at], n, h), down(&s_.down[at], h, n);
          auto xp = v(p);
          if (const int r = run_of(p); r >= 0) {  // H_p a = E a + B Y⁻¹ρ (I − F_m) a
            const SweepRun& run = s_.runs[std::size_t(r)];
            const C* data = &s_.run_data[run.at];
            c.noalias() = Eigen::Map<const Matrix>(data + layout.i_minus_f(), h, h) * amplitude;
            y_inverse_rho(p);
            xp.noalias() -= Eigen::Map<const Matrix>(data + layout.e(), n, h) * amplitude;
            xp.noalias() -= Eigen::Map<const Matrix>(data + layout.b(), n, h) * c;
          } else {
            xp.noalias() -= gain_a * amplitude;
          }
          for (int ci = 0; ci < nc; ++ci)
            for (int m = 0; m < nm; ++m)
              y[element(p, r, group.components[std::size_t(ci)], m)] = Complex(xp(ci * nm + m));
          if (p + 1 < nz) {
            amplitude.noalias() += down * xp;
            for (Eigen::Index i = 0; i < h; ++i)
              amplitude(i) *= s_.step[(std::size_t(a) * nz + p + 1) * nm + std::size_t(i % nm)];
          }
        }
      }
    }
  }

  [[nodiscard]] Memory memory() const override { return Memory::host; }

 private:
  SweepMatrices s_;
  std::vector<int> rhs_incidence_;
  std::vector<int> first_group_;  // incidence a's groups: [first_group_[a], first_group_[a + 1])
  std::size_t per_rhs_ = 0;
  std::vector<std::complex<double>, Eigen::aligned_allocator<std::complex<double>>> scratch_;
  std::vector<Matrix> e_plus_diagonals_;  // per group (edge_diagonals)
};

}  // namespace

template <class Real>
std::unique_ptr<Preconditioner<Real>> make_host_sweep_preconditioner(SweepMatrices sweep, std::vector<int> rhs_incidence) {
  for (int a : rhs_incidence)
    GS_EXPECTS(a >= 0 && a < sweep.incidences, "sweep preconditioner: a right-hand side's incidence is out of range");
  return std::make_unique<HostSweepPreconditioner<Real>>(std::move(sweep), std::move(rhs_incidence));
}

template std::unique_ptr<Preconditioner<float>> make_host_sweep_preconditioner<float>(SweepMatrices, std::vector<int>);
template std::unique_ptr<Preconditioner<double>> make_host_sweep_preconditioner<double>(SweepMatrices, std::vector<int>);

}  // namespace gratingsim::physics
