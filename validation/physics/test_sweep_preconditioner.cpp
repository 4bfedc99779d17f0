// physics/sweep_preconditioner.hpp: the sweep is A⁻¹. P A x = x for random x against the solver's own
// operator A (convolution engine + z-operator, an implementation independent of the sweep's dense
// per-slice assembly), on 1D and 2D gratings, both formulations, conical incidence, several layers, and
// a batch of two wavelengths; preconditioned solves then take a few iterations and agree with
// unpreconditioned ones, including the high-contrast and metal p cases that need hundreds without.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>
#include <utility>
#include <vector>

#include "core/block_pool.hpp"
#include "physics/problem.hpp"
#include "physics/solver.hpp"
#include "physics/sweep_preconditioner.hpp"
#include "validation/physics/preconditioner_checks.hpp"

using namespace gratingsim;
using namespace gratingsim::physics;

TEST_CASE("the sweep preconditioner is the inverse of A (host)", "[physics][sweep]") {
  for (Formulation formulation : test::formulations)
    for (bool one_dimensional : {true, false}) {
      const int m1 = one_dimensional ? 6 : 2, m2 = one_dimensional ? 0 : 2;
      INFO(to_string(formulation) << (one_dimensional ? ", 1D" : ", 2D"));
      const Structure s = test::random_stack(one_dimensional, 4);
      CHECK(test::inverse_error<double>(s, conv::Backend::cpu_direct, formulation, m1, m2, Preconditioning::sweep) <
            1e-10);
      CHECK(test::inverse_error<float>(s, conv::Backend::cpu_fftw, formulation, m1, m2, Preconditioning::sweep) < 2e-4);
      // Two wavelengths in one problem (two members, each with its own kernels and Green coefficients).
      const std::vector<Incidence> two{{1.0, 25, 30}, {1.0, 10, 0}, {1.3, 25, 30}, {1.3, 10, 0}};
      CHECK(test::inverse_error<double>(s, conv::Backend::cpu_fftw, formulation, m1, m2, Preconditioning::sweep, 0,
                                        two) < 1e-10);
      // A run of uniform slices in Woodbury's form (SweepRun): the upright ridge, or the 2D grating's blocks.
      const Structure upright = test::random_stack(one_dimensional, host_woodbury_least_run + 1, true);
      CHECK(test::inverse_error<double>(upright, conv::Backend::cpu_direct, formulation, m1, m2, Preconditioning::sweep) <
            1e-10);
      // The limits the averaged preconditioner is exact in are special cases.
      CHECK(test::inverse_error<double>(test::uniform_stack(one_dimensional), conv::Backend::cpu_direct, formulation,
                                        m1, m2, Preconditioning::sweep) < 1e-11);
      CHECK(test::inverse_error<double>(test::single_slice(one_dimensional), conv::Backend::cpu_direct, formulation,
                                        m1, m2, Preconditioning::sweep) < 1e-11);
    }
}

TEST_CASE("sweep-preconditioned solves take a few iterations and agree with unpreconditioned ones", "[physics][sweep]") {
  // ε = 12 lamellar in p (#10's case: hundreds of GMRES iterations without a preconditioner), the metal
  // lamellar of validation/peers (ε = −20 + 1.5i, thin, p: thousands), and a crossed grating.
  Structure lam12 = test::lamellar(20);
  std::get<Rectangle>(lam12.layers[0].shapes[0]).material = Material::constant_permittivity(12.0);
  const Structure metal = test::thin_metal_lamellar(16);
  const Structure crossed = test::crossed(4);
  struct Case {
    const Structure& structure;
    int m1, m2;
    std::vector<Incidence> incidences;
  };
  for (const Case& c : {Case{lam12, 20, 0, {{1.0, 10, 0}}}, Case{metal, 15, 0, {{1.0, 15, 0}}},
                        Case{crossed, 3, 3, {{1.0, 40, 25}}}})
    for (Formulation formulation : test::formulations) {
      INFO(to_string(formulation) << ", M = " << c.m1 << " × " << c.m2);
      SolverOptions o;
      o.m1 = c.m1;
      o.m2 = c.m2;
      o.backend = conv::Backend::cpu_fftw;
      o.formulation = formulation;
      o.gmres_restart = 300;
      o.max_iterations = 3000;
      o.tolerance = 1e-10;
      o.on_unconverged = OnUnconverged::mark;
      o.preconditioner = Preconditioning::none;
      const IncidenceResult plain = solve(c.structure, c.incidences, o).incidences[0];
      o.preconditioner = Preconditioning::sweep;
      const IncidenceResult pre = solve(c.structure, c.incidences, o).incidences[0];
      CHECK(pre.preconditioned == std::vector<bool>{true});
      for (int pol : {s_pol, p_pol}) {
        INFO((pol == s_pol ? "s" : "p") << ": " << plain.solves[0][pol].iterations << " iterations without, "
                                        << pre.solves[0][pol].iterations << " with the sweep");
        CHECK(pre.solves[0][pol].converged);
        CHECK(pre.solves[0][pol].iterations <= 3);
        if (!plain.solves[0][pol].converged) continue;  // the metal without it, at most 3000 iterations
        CHECK(std::abs(plain.total_R[pol] - pre.total_R[pol]) < 1e-8);
        CHECK(std::abs(plain.total_T[pol] - pre.total_T[pol]) < 1e-8);
        CHECK(std::abs(plain.orders[0].reflection.p_from_p - pre.orders[0].reflection.p_from_p) < 1e-8);
        CHECK(std::abs(plain.orders[0].reflection.s_from_s - pre.orders[0].reflection.s_from_s) < 1e-8);
      }
    }
}

TEST_CASE("the host sweep's matrices and application do not depend on the thread count or the batch, bit for bit",
          "[physics][sweep]") {
  // A point's results are bitwise the same whichever batch, worker or process solved it (the app tests
  // compare files): the sweep runs OpenMP over groups and right-hand sides, and its vectors' alignment
  // depends on where a group or rhs sits in the batch, so each must be computed alike anywhere.
  // The sloped ridge (the direct form) and the upright one (Woodbury's form in a run of 8 slices).
  for (const bool upright : {false, true}) {
  INFO((upright ? "upright ridge" : "sloped ridge"));
  const Structure stack = test::random_stack(true, upright ? host_woodbury_least_run : 6, upright);
  ProblemSettings settings;
  settings.m1 = 12;
  settings.backend = conv::Backend::cpu_fftw;
  const auto solve = [&](const std::vector<Incidence>& inc, const std::vector<std::complex<double>>& x, int threads) {
    std::vector<std::string> warnings;
    const DiscreteProblem<double> problem(stack, inc, settings, 1, warnings);
    REQUIRE(problem.layout().size() == x.size());
    std::vector<int> rhs_incidence;
    for (int r = 0; r < problem.rhs(); ++r) rhs_incidence.push_back(r / 2);
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    SweepMatrices m = sweep_matrices(problem.sweep_inputs());
    std::vector<std::complex<double>> y(x.size(), test::poison<double>());
    make_host_sweep_preconditioner<double>(m, rhs_incidence)->apply(x.data(), y.data(), nullptr);
    omp_set_num_threads(before);
    return std::pair{std::move(m), std::move(y)};
  };
  // Two wavelengths, a conical incidence (one group) and one at φ = 0 (two groups) each.
  const std::vector<Incidence> both{{1.0, 25, 30}, {1.0, 10, 0}, {1.3, 25, 30}, {1.3, 10, 0}};
  std::vector<std::string> warnings;
  const std::size_t per_rhs = 3 * 25, nr = 8,  // 3·orders per (slice, rhs)
      nz = DiscreteProblem<double>(stack, both, settings, 1, warnings).layout().size() / (nr * per_rhs);
  const auto x = test::random_complex<double>(nz * nr * per_rhs);
  const auto [one, y_one] = solve(both, x, 1);
  const auto [four, y_four] = solve(both, x, 4);
  const auto [again, y_again] = solve(both, x, 1);
  CHECK(one.lu == four.lu);
  CHECK(one.gain_a == four.gain_a);
  CHECK(one.up == four.up);
  CHECK(one.permutation == four.permutation);
  CHECK(y_one == y_four);
  CHECK(y_one == y_again);
  // The second wavelength alone: its rhs 4..7 become 0..3, its groups the first.
  std::vector<std::complex<double>> x_alone, y_expected;
  for (std::size_t p = 0; p < nz; ++p)
    for (std::size_t r = 4; r < nr; ++r)
      for (std::size_t i = 0; i < per_rhs; ++i) {
        x_alone.push_back(x[(p * nr + r) * per_rhs + i]);
        y_expected.push_back(y_one[(p * nr + r) * per_rhs + i]);
      }
  const auto [alone, y_alone] = solve({both[2], both[3]}, x_alone, 2);
  CHECK(y_alone == y_expected);
  CHECK(one.runs.size() == (upright ? 4u : 0u));  // the p groups (h < n) and the conical ones, at 2 wavelengths
  CHECK(one.run_data == four.run_data);
  }
}

TEST_CASE("the host sweep skips a decoupled group where its input is zero, and still inverts A", "[physics][sweep]") {
  // At φ = 0 on a 1D grating s and p decouple: A maps a vector that is zero in x, z (y) to one that is zero
  // there too, and the host sweep skips such a group's sweeps (sweep_preconditioner.cpp, apply). P A x = x
  // for x whose s rhs (even) hold only y and whose p rhs (odd) only x and z, with the zeros exact in P A x;
  // the random x makes a skip of a group whose input is not zero, or zeros written over the wrong components,
  // fail. The sloped ridge (direct form) and the upright one (Woodbury's form).
  for (const bool upright : {false, true}) {
    INFO((upright ? "upright ridge" : "sloped ridge"));
    const Structure stack = test::random_stack(true, upright ? host_woodbury_least_run : 6, upright);
    for (Formulation formulation : test::formulations) {
      INFO(to_string(formulation));
      ProblemSettings settings;
      settings.m1 = 9;
      settings.backend = conv::Backend::cpu_fftw;
      settings.formulation = formulation;
      std::vector<std::string> warnings;
      const std::vector<Incidence> inc{{1.0, 20, 0}, {1.2, 40, 0}};
      DiscreteProblem<double> problem(stack, inc, settings, 1, warnings);
      const BatchLayout& l = problem.layout();
      const std::size_t orders = l.block / 3;
      auto x = test::random_complex<double>(l.size());
      std::size_t zeros = 0;
      for (std::size_t p = 0; p < l.slices; ++p)
        for (std::size_t r = 0; r < l.rhs; ++r)
          for (std::size_t i = 0; i < l.block; ++i)
            if ((i / orders == 1) != (r % 2 == 0)) x[(p * l.rhs + r) * l.block + i] = 0, ++zeros;
      REQUIRE(2 * zeros == l.size());  // s rhs: 2 of 3 components, p rhs: 1 of 3
      const auto sweep = problem.make_sweep_preconditioner();
      auto space = problem.make_space(3);
      space->upload(x, 0);
      problem.apply(space->data(0), space->data(1));
      sweep->apply(space->data(1), space->data(2), problem.stream());
      std::vector<std::complex<double>> back(l.size(), test::poison<double>());
      space->download(2, back);
      double err = 0, scale = 0;
      std::size_t exact = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        err = std::max(err, std::abs(back[i] - x[i]));
        scale = std::max(scale, std::abs(x[i]));
        if (x[i] == std::complex<double>{} && back[i] == std::complex<double>{}) ++exact;
      }
      CHECK(err / scale < 1e-10);
      CHECK(exact == zeros);
    }
  }
}

TEST_CASE("auto continues what its first solve leaves unconverged with the sweep", "[physics][sweep]") {
  // Solves a first solve leaves far from the tolerance: an ε = 12 lamellar grating in p beyond
  // sweep_orders_limit orders, where automatic starts with averaged (normal-vector, complex128) or none
  // (Laurent, or complex64) on a host (a 1D metal takes the sweep at once there, up to 321 orders), and metal
  // ellipses on a 2D lattice, where it starts with none (solver.cpp, solve_group; a metal disk grating at
  // M = 6 did not converge in 3000 GMRES(200) iterations: residual 0.18). With 30 iterations allowed, the
  // first solve gets 15: p is left far from the tolerance and continues with the sweep; a right-hand side
  // that converged in the first solve keeps its result bit for bit. The answer is the sweep's own to the
  // tolerance, per right-hand side (the continuation starts from u₀ = A x: its tolerance is relative to b).
  Structure high_contrast = test::lamellar(4);
  std::get<Rectangle>(high_contrast.layers[0].shapes[0]).material = Material::constant_permittivity(12.0);
  const Structure metal_2d = test::metal_crossed(3);
  for (bool two_dimensional : {false, true})
    for (Formulation formulation : test::formulations)
      for (Precision precision : {Precision::double_, Precision::single}) {
        const bool single = precision == Precision::single;
        INFO((two_dimensional ? "2D, " : "1D, ") << to_string(formulation) << (single ? ", complex64" : ", complex128"));
        // complex64 on the 2D metal: the operator's rounding leaves a residual floor near 2e-6 (cpu-fftw).
        const double tolerance = single ? (two_dimensional ? 1e-5 : 1e-6) : 1e-9, agree = single ? 1e-4 : 1e-8;
        const std::vector<Incidence> inc{{1.0, 15, two_dimensional ? 20.0 : 0.0}};
        SolverOptions o;
        o.m1 = two_dimensional ? 3 : int(sweep_orders_limit / 2) + 1;
        o.m2 = two_dimensional ? 3 : 0;
        o.backend = conv::Backend::cpu_direct;  // the same rounding in every solve (FFTW's measured plans vary)
        o.formulation = formulation;
        o.precision = precision;
        o.gmres_restart = 15;
        o.tolerance = tolerance;
        const auto [first, automatic, sweep] =
            test::continuation_runs(two_dimensional ? metal_2d : high_contrast, inc, o, 15, conv::Backend::cpu_direct);
        INFO("p: " << first.solves[0][p_pol].iterations << " iterations in the first solve (residual "
                   << first.solves[0][p_pol].residual << "), " << automatic.solves[0][p_pol].iterations << " in all");
        REQUIRE(first.solves[0][p_pol].residual > std::sqrt(tolerance));  // far: the sweep follows
        CHECK(automatic.preconditioned == std::vector<bool>{true});
        for (int pol : {s_pol, p_pol}) {
          CHECK(automatic.solves[0][pol].converged);
          CHECK(automatic.solves[0][pol].residual <= tolerance);
          if (first.solves[0][pol].converged) {  // the first solve's, bit for bit
            CHECK(automatic.solves[0][pol].iterations == first.solves[0][pol].iterations);
            CHECK(automatic.solves[0][pol].residual == first.solves[0][pol].residual);
          } else {
            CHECK(automatic.solves[0][pol].iterations > 15);
            CHECK(automatic.solves[0][pol].iterations <= (single ? 20 : 17));  // the sweep's one or two (a few)
          }
          CHECK(std::abs(automatic.total_R[pol] - sweep.total_R[pol]) < agree);
          CHECK(std::abs(automatic.total_T[pol] - sweep.total_T[pol]) < agree);
        }
        const DiffractionOrder *zeroth = test::find_order(automatic, 0, 0), *zeroth_first = test::find_order(first, 0, 0),
                               *zeroth_sweep = test::find_order(sweep, 0, 0);
        REQUIRE((zeroth && zeroth_first && zeroth_sweep));
        const DiffractionOrder &a = *zeroth, &f = *zeroth_first, &w = *zeroth_sweep;
        if (first.solves[0][s_pol].converged) {
          CHECK(a.reflection.s_from_s == f.reflection.s_from_s);
          CHECK(a.transmission.s_from_s == f.transmission.s_from_s);
        }
        CHECK(std::abs(a.reflection.p_from_p - w.reflection.p_from_p) < agree);
        CHECK(std::abs(a.transmission.p_from_p - w.transmission.p_from_p) < agree);
        // The first solve alone is far from it.
        CHECK(std::abs(first.total_R[p_pol] - sweep.total_R[p_pol]) > 10 * agree);
      }
}

TEST_CASE("the sweep's uniform runs are the layers whose content does not vary with z", "[physics][sweep]") {
  // run_bottoms (sweep_preconditioner.hpp): the device's recursion takes Woodbury's form within such runs. The
  // expected runs follow from the layers alone: a layer of uniform content cut into slices is one run, ending
  // at its bottom slice (slices are numbered from the top); a sloped sidewall makes every slice its own.
  const std::vector<Incidence> two{{1.0, 25, 30}, {1.0, 10, 0}, {1.3, 25, 30}, {1.3, 10, 0}};
  for (bool one_dimensional : {true, false})
    for (bool upright : {true, false}) {
      Structure s = test::random_stack(one_dimensional, 5, upright);
      const bool sloped = one_dimensional && !upright;
      s.layers.push_back(test::uniform_stack(one_dimensional).layers[2]);  // a uniform film of 4 slices
      INFO((one_dimensional ? "1D" : "2D") << (sloped ? ", sloped" : ", upright"));
      ProblemSettings settings;
      settings.m1 = one_dimensional ? 7 : 2;
      settings.m2 = one_dimensional ? 0 : 2;
      settings.backend = conv::Backend::cpu_fftw;
      std::vector<std::string> warnings;
      const DiscreteProblem<double> problem(s, two, settings, 1, warnings);
      const SweepInputs inputs = problem.sweep_inputs(false);
      std::vector<int> expected;
      int top = 0;
      for (const Layer& layer : s.layers) {
        for (int p = top; p < top + layer.slices; ++p)
          expected.push_back(sloped && &layer == &s.layers[0] ? p : top + layer.slices - 1);
        top += layer.slices;
      }
      REQUIRE(inputs.slices == top);
      for (std::size_t k = 0; k < inputs.groups.size(); ++k) {
        CHECK(run_bottoms(inputs, k) == expected);
        // The runs of least_run slices or more (the host's Woodbury form, the device's run form).
        for (int least_run : {2, 4, 5, 6}) {
          INFO("least run " << least_run);
          std::vector<int> taken = expected;
          for (std::size_t p = 0; p < taken.size(); ++p)
            if (std::count(expected.begin(), expected.end(), expected[p]) < least_run) taken[p] = -1;
          CHECK(long_run_bottoms(inputs, k, least_run) == taken);
        }
      }
    }
  // Two films of the same material and thickness per slice, one after the other, are one run.
  Structure films = test::uniform_stack(true);
  films.layers = {films.layers[0], films.layers[0]};
  ProblemSettings settings;
  settings.m1 = 5;
  std::vector<std::string> warnings;
  const DiscreteProblem<double> problem(films, two, settings, 1, warnings);
  const SweepInputs inputs = problem.sweep_inputs(false);
  for (std::size_t k = 0; k < inputs.groups.size(); ++k) CHECK(run_bottoms(inputs, k) == std::vector<int>(6, 5));
}

TEST_CASE("the host sweep writes every element of its arrays: built in blocks poisoned by a previous batch it is the same",
          "[physics][sweep]") {
  // DenseArray's blocks come back from block_pool uninitialised, with a previous batch's numbers. Filled with NaN
  // before the second build, any element the set-up leaves unwritten would differ (NaN is unequal to itself).
  // The upright ridge: Woodbury's form in its run (its unused slots zeroed), the direct form in the film. M = 40
  // so that every array is above block_pool::min_kept_bytes.
  block_pool::release();
  const Structure stack = test::random_stack(true, host_woodbury_least_run + 2, true);
  ProblemSettings settings;
  settings.m1 = 40;
  settings.backend = conv::Backend::cpu_fftw;
  std::vector<std::string> warnings;
  const std::vector<Incidence> inc{{1.0, 25, 30}, {1.0, 10, 0}};
  const DiscreteProblem<double> problem(stack, inc, settings, 1, warnings);
  std::vector<int> rhs_incidence;
  for (int r = 0; r < problem.rhs(); ++r) rhs_incidence.push_back(r / 2);
  const auto x = test::random_complex<double>(problem.layout().size());
  const auto build = [&] {
    SweepMatrices m = sweep_matrices(problem.sweep_inputs());
    std::vector<std::complex<double>> y(x.size(), test::poison<double>());
    make_host_sweep_preconditioner<double>(m, rhs_incidence)->apply(x.data(), y.data(), nullptr);
    return std::pair{std::move(m), std::move(y)};
  };
  using Copy = std::vector<std::complex<double>>;
  std::vector<std::size_t> sizes;  // the arrays' bytes: n² per slice (lu), n·h per slice (the others), the runs'
  Copy lu, gain_a, up, down, run_data, y_fresh;
  {
    auto [fresh, y] = build();
    REQUIRE(!fresh.runs.empty());
    for (const DenseArray* a : {&fresh.lu, &fresh.gain_a, &fresh.run_data}) {
      REQUIRE(a->size() * sizeof(std::complex<double>) >= block_pool::min_kept_bytes);
      sizes.push_back(a->size() * sizeof(std::complex<double>));
    }
    lu.assign(fresh.lu.begin(), fresh.lu.end());
    gain_a.assign(fresh.gain_a.begin(), fresh.gain_a.end());
    up.assign(fresh.up.begin(), fresh.up.end());
    down.assign(fresh.down.begin(), fresh.down.end());
    run_data.assign(fresh.run_data.begin(), fresh.run_data.end());
    y_fresh = std::move(y);
  }
  // Every kept block of those sizes poisoned (and remembered): taken until a take is fresh (the kept bytes stay),
  // that one poisoned too, all given back.
  std::vector<std::pair<void*, std::size_t>> poisoned;
  for (const std::size_t bytes : sizes)
    for (bool kept = true; kept;) {
      const std::size_t before = block_pool::kept_bytes();
      auto* block = static_cast<std::complex<double>*>(block_pool::take(bytes));
      kept = block_pool::kept_bytes() < before;
      std::fill_n(block, bytes / sizeof(std::complex<double>), test::poison<double>());
      poisoned.emplace_back(block, bytes);
    }
  REQUIRE(poisoned.size() >= 8);  // at least lu, run_data and the four n·h arrays kept, and a fresh one per size
  for (const auto& [block, bytes] : poisoned) block_pool::give(block, bytes);
  const auto is_poisoned = [&](const void* data) {
    return std::any_of(poisoned.begin(), poisoned.end(), [&](const auto& p) { return p.first == data; });
  };
  const auto [again, y_again] = build();
  for (const DenseArray* a : {&again.lu, &again.gain_a, &again.up, &again.down, &again.run_data}) CHECK(is_poisoned(a->data()));
  // The first element that differs, or −1 (a count, not the vectors: Catch would print every element).
  const auto first_difference = [](const auto& a, const Copy& b) {
    if (a.size() != b.size()) return std::ptrdiff_t(-2);
    const auto [i, j] = std::mismatch(a.begin(), a.end(), b.begin());
    return i == a.end() ? std::ptrdiff_t(-1) : std::ptrdiff_t(i - a.begin());
  };
  CHECK(first_difference(again.lu, lu) == -1);
  CHECK(first_difference(again.gain_a, gain_a) == -1);
  CHECK(first_difference(again.up, up) == -1);
  CHECK(first_difference(again.down, down) == -1);
  CHECK(first_difference(again.run_data, run_data) == -1);
  CHECK(first_difference(y_again, y_fresh) == -1);
  block_pool::release();
}

TEST_CASE("the host sweep in Woodbury's form applies what the direct form applies", "[physics][sweep]") {
  // sweep_matrices(inputs, false) keeps the direct form everywhere: an independent route to the same P = A⁻¹.
  // Conical and φ = 0 incidences at two wavelengths; the upright 1D ridge (p groups and conical ones in a run
  // of 9 slices, s groups direct: h = n) and the 2D blocks (one conical group per incidence); the film's 2 slices direct.
  const std::vector<Incidence> inc{{1.0, 25, 30}, {1.0, 10, 0}, {1.3, 25, 30}, {1.3, 10, 0}};
  for (Formulation formulation : test::formulations)
    for (bool one_dimensional : {true, false}) {
      INFO(to_string(formulation) << (one_dimensional ? ", 1D" : ", 2D"));
      const Structure stack = test::random_stack(one_dimensional, host_woodbury_least_run + 1, true);
      ProblemSettings settings;
      settings.m1 = one_dimensional ? 10 : 3;
      settings.m2 = one_dimensional ? 0 : 2;
      settings.backend = conv::Backend::cpu_fftw;
      settings.formulation = formulation;
      std::vector<std::string> warnings;
      const DiscreteProblem<double> problem(stack, inc, settings, 1, warnings);
      std::vector<int> rhs_incidence;
      for (int r = 0; r < problem.rhs(); ++r) rhs_incidence.push_back(r / 2);
      SweepMatrices woodbury = sweep_matrices(problem.sweep_inputs());
      const SweepMatrices direct = sweep_matrices(problem.sweep_inputs(), false);
      REQUIRE(direct.runs.empty());
      REQUIRE(woodbury.runs.size() == 4u);  // 1D: 2 conical groups and 2 p groups; 2D: a group per incidence
      for (const SweepRun& run : woodbury.runs) {
        CHECK(run.top == 0);
        CHECK(run.bottom == host_woodbury_least_run);
      }
      const auto x = test::random_complex<double>(problem.layout().size());
      std::vector<std::complex<double>> y_woodbury(x.size(), test::poison<double>()), y_direct(x.size(), test::poison<double>());
      make_host_sweep_preconditioner<double>(std::move(woodbury), rhs_incidence)->apply(x.data(), y_woodbury.data(), nullptr);
      make_host_sweep_preconditioner<double>(direct, rhs_incidence)->apply(x.data(), y_direct.data(), nullptr);
      CHECK(test::relative_difference(y_woodbury, y_direct) < 1e-11);
    }
}
