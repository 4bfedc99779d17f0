// The units of work of `gratingsim run` (app/work_units.hpp): the wavelengths per unit by the documented
// rule (host backends one, or with the sweep preconditioner a group per thread; device backends enough to
// reach gpu_filling_unknowns, or with the sweep as many as the memory share allows, while the sweep keeps
// units_per_device units per device), and plan_units' units: every point left in exactly one unit, none
// done, no unit mixing parameter points, near-equal runs of wavelengths; a unit's runs of one batch and
// each wavelength's share of its time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "app/work_units.hpp"
#include "io/case.hpp"
#include "io/problem.hpp"
#include "physics/solver.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;

namespace {

/// A 1D grating at `wavelengths` wavelengths (400–800 nm) and `angles` θ, both polarisations, with
/// ±`harmonics` orders and `slices` slices: one wavelength's solve has 3·(2·harmonics+1)·slices·angles·2
/// unknowns. With `parameters` ("parameters: {w: [...]}\n"), the lines' width is the parameter w.
io::Problem lines(int wavelengths, int angles, int harmonics, int slices, conv::Backend backend,
                  const std::string& parameters = "") {
  std::string theta;
  for (int k = 0; k < angles; ++k) theta += (k ? ", " : "") + std::to_string(4 * k);
  const std::string wavelength =
      wavelengths == 1 ? "[633]" : "{start: 400, stop: 800, count: " + std::to_string(wavelengths) + "}";
  const std::string width = parameters.empty() ? "200" : "\"${w}\"";  // a parameter sweep: over w
  const std::string text = parameters + "wavelength: " + wavelength + "\nincidence: {theta_deg: [" + theta +
                           "], polarization: both}\nlattice: {period_x: 500}\nsubstrate: SiO2\nlayers:\n"
                           "  - {name: lines, thickness: 120, slices: " + std::to_string(slices) +
                           ", shapes: [{type: line, material: Si3N4, width: " + width + "}]}\n"
                           "numerics: {harmonics: " + std::to_string(harmonics) + "}\n";
  io::Problem p = io::make_problem(io::parse_case(text, "lines.yaml"));
  p.solver.backend = backend;
  return p;
}

const auto nothing_done = [](std::size_t) { return false; };

/// The number of distinct wavelengths (batches) in a unit.
std::size_t wavelengths_in(const io::ResultLayout& layout, const app::Unit& unit) {
  std::set<std::size_t> batches;
  for (const std::size_t p : unit) batches.insert(layout.batch_of(p));
  return batches.size();
}

}  // namespace

TEST_CASE("host backends solve one wavelength per unit without the sweep, whatever the workers", "[app][units]") {
  for (const conv::Backend backend : {conv::Backend::cpu_direct, conv::Backend::cpu_fftw}) {
    io::Problem p = lines(41, 1, 12, 20, backend);  // 3e3 unknowns per wavelength: a GPU would batch 10
    p.solver.preconditioner = physics::Preconditioning::averaged;  // the sweep's units: the test case below
    for (const int workers : {1, 2, 8}) {
      INFO("workers " << workers);
      CHECK(app::wavelengths_per_unit(p, 41, workers) == 1);
      const std::vector<app::Unit> units = app::plan_units(p, nothing_done, workers);
      CHECK(units.size() == 41);  // 41 ≥ 4 per worker up to 8 workers: no wavelength split either
      for (const app::Unit& u : units) CHECK(wavelengths_in(p.layout, u) == 1);
    }
  }
}

namespace {

/// `lines` on gpu-fused with the averaged preconditioner: the unknowns' rule, whether or not this machine
/// has a device (with one, automatic would take the device sweep for these 1D complex128 problems, whose
/// rule is the memory's: the test case after next).
io::Problem averaged_lines(int wavelengths, int angles, int harmonics, int slices) {
  io::Problem p = lines(wavelengths, angles, harmonics, slices, conv::Backend::gpu_fused);
  p.solver.preconditioner = physics::Preconditioning::averaged;
  return p;
}

}  // namespace

TEST_CASE("device backends batch wavelengths up to a GPU's fill, keeping 8 units per device", "[app][units]") {
  // 3·25·20·2 = 3000 unknowns per wavelength: 334 wavelengths would reach 1e6; the cap decides.
  const io::Problem small = averaged_lines(41, 1, 12, 20);
  CHECK(app::batch_unknowns(small) == 3000);
  CHECK(app::wavelengths_per_unit(small, 41, 1) == 5);   // 41 / (8 units per device) = 5
  CHECK(app::wavelengths_per_unit(small, 41, 2) == 2);   // 41 / 16
  CHECK(app::wavelengths_per_unit(small, 41, 16) == 1);  // fewer batches than 8 per device
  CHECK(app::wavelengths_per_unit(small, 20, 1) == 2);   // a resume with 20 wavelengths left
  std::vector<std::size_t> sizes;
  for (const app::Unit& u : app::plan_units(small, nothing_done, 1)) sizes.push_back(wavelengths_in(small.layout, u));
  CHECK(sizes == std::vector<std::size_t>{4, 5, 4, 5, 4, 5, 4, 5, 5});  // 41 in ⌈41/5⌉ = 9 near-equal runs

  // 3·25·60·2 = 9000 unknowns, just below physics::device_batch_unknowns: 112 wavelengths fill the GPU
  // (1e6 unknowns), whatever more the cap (1600 batches / 8) allows.
  const io::Problem filling = averaged_lines(200, 1, 12, 60);
  CHECK(app::batch_unknowns(filling) == 9000);
  CHECK(app::wavelengths_per_unit(filling, 1600, 1) == 112);
  // 3·41·200·12·2 = 590400 unknowns: beyond device_batch_unknowns, one wavelength per unit.
  const io::Problem nearly = averaged_lines(40, 12, 20, 200);
  CHECK(app::batch_unknowns(nearly) == 590400);
  CHECK(app::wavelengths_per_unit(nearly, 40, 1) == 1);
  CHECK(app::plan_units(nearly, nothing_done, 1).size() == 40);
  // 3·41·200·21·2 = 1033200: one wavelength fills it.
  const io::Problem large = averaged_lines(40, 21, 20, 200);
  CHECK(app::wavelengths_per_unit(large, 40, 1) == 1);
  CHECK(app::plan_units(large, nothing_done, 1).size() == 40);
  // Accuracy on demand: sized at the ladder's top (here M = 48 and 160 slices: 3·97·160·2 = 93120
  // unknowns, beyond device_batch_unknowns: one wavelength per unit), not at its first rung.
  io::Problem climbing = io::make_problem(io::parse_case(
      "wavelength: {start: 400, stop: 800, count: 41}\nincidence: {theta_deg: [0], polarization: both}\n"
      "lattice: {period_x: 500}\nsubstrate: SiO2\nlayers:\n  - {name: lines, thickness: 120, slices: 20, "
      "shapes: [{type: line, material: Si3N4, width: 200}]}\n"
      "numerics: {harmonics: auto, slices: auto, max_harmonics: 48, max_slices: 160, target_error: 1e-3}\n",
      "climbing.yaml"));
  climbing.solver.backend = conv::Backend::gpu_fused;
  CHECK(app::batch_unknowns(climbing) == 93120);
  CHECK(app::wavelengths_per_unit(climbing, 41, 1) == 1);
  CHECK(app::wavelengths_per_unit(climbing, 400, 1) == 1);
  // Never more than the case's wavelengths (a parameter sweep has more batches than wavelengths).
  const io::Problem swept = lines(6, 1, 2, 2, conv::Backend::gpu_fused, "parameters: {w: [100, 150, 200, 250, 300, 350]}\n");
  CHECK(app::wavelengths_per_unit(swept, 60, 1) == 6);  // 60 / 8 = 7 > 6 wavelengths
}

TEST_CASE("device sweeps batch wavelengths at any size, by memory, keeping 8 units per device", "[app][units]") {
  // The thin metal of validation/peers (ε = −20 + 1.5i lines): automatic gives it the sweep on devices
  // (physics::member_plan). 3·121·32·2 = 23232 unknowns per wavelength, beyond device_batch_unknowns.
  const auto metal = [](const std::string& numerics, conv::Backend backend) {
    io::Problem p = io::make_problem(io::parse_case(
        "units: um\nwavelength: {start: 0.99, stop: 1.01, count: 33}\n"
        "incidence: {theta_deg: 15, polarization: both}\nlattice: {period_x: 0.8}\nsubstrate: sub\n"
        "materials: {sub: {epsilon: [2.25, 0]}, shape: {epsilon: [-20, 1.5]}}\n"
        "layers:\n  - {name: pattern, thickness: 0.08, slices: 16, shapes: [{type: line, material: shape, width: 0.4}]}\n"
        "numerics: " + numerics + "\n",
        "metal.yaml"));
    p.solver.backend = backend;
    return p;
  };
  const io::Problem sweep = metal("{harmonics: 60, richardson: true}", conv::Backend::gpu_fused);
  CHECK(app::batch_unknowns(sweep) == 23232);
  const physics::MemberPlan plan = app::member_plan(sweep);
  CHECK(plan.sweep);
  REQUIRE(plan.bytes_per_member > 0);
  constexpr std::size_t gib = std::size_t(1) << 30;
  for (const std::size_t memory : {gib, 16 * gib, 80 * gib, 1000 * gib}) {
    INFO("device memory " << memory / gib << " GiB");
    const std::optional<std::size_t> by_memory = app::device_sweep_wavelengths(sweep, memory);
    REQUIRE(by_memory);
    CHECK(*by_memory == memory / app::sweep_memory_shares / plan.bytes_per_member);
    // 33 / (8 units per device) = 4 at most; by memory where that is fewer; at least one.
    CHECK(app::wavelengths_per_unit(sweep, 33, 1, memory) == std::clamp<std::size_t>(*by_memory, 1, 4));
  }
  // A device too small for one wavelength in a worker's share: 0 (app/run.cpp then keeps one worker for
  // units this large), units of one.
  const std::size_t tiny = plan.bytes_per_member * app::sweep_memory_shares - 1;
  CHECK(app::device_sweep_wavelengths(sweep, tiny) == std::optional<std::size_t>(0));
  CHECK(app::wavelengths_per_unit(sweep, 33, 1, tiny) == 1);
  CHECK(app::wavelengths_per_unit(sweep, 33, 1, 1000 * gib) == 4);
  CHECK(app::wavelengths_per_unit(sweep, 33, 2, 1000 * gib) == 2);  // 33 / 16
  // The workers that may share a device: with 4 wavelengths per unit all eight on 80 GiB; as many as leave
  // the last its preconditioner's budget beside the others' units (work_units.hpp), at least one.
  REQUIRE(plan.budget_per_member > plan.bytes_per_member);
  const auto workers = [&](std::size_t k, std::size_t memory) { return app::device_sweep_workers(sweep, k, memory); };
  CHECK(workers(4, 80 * gib) >= 8);
  for (const std::size_t k : {1, 4, 16, 64, 256})
    for (const std::size_t memory : {gib, 16 * gib, 80 * gib}) {
      const int w = workers(k, memory);
      INFO(k << " wavelengths per unit, " << memory / gib << " GiB: " << w << " workers");
      REQUIRE(w >= 1);
      const double last = 0.95 * double(memory) - double(w - 1) * double(k * plan.bytes_per_member);
      if (w > 1) CHECK(0.9 * last >= double(k * plan.budget_per_member));  // the last still fits
      const double one_more = last - double(k * plan.bytes_per_member);
      CHECK(0.9 * one_more < double(k * plan.budget_per_member));  // one more would not
    }
  CHECK(app::device_sweep_workers(sweep, 1, 0) == std::numeric_limits<int>::max());
  // Without a device, or without the sweep: the unknowns' rule (one per unit here).
  CHECK_FALSE(app::device_sweep_wavelengths(sweep, 0));
  CHECK(app::wavelengths_per_unit(sweep, 33, 1, 0) == 1);
  const io::Problem averaged = metal("{harmonics: 60, richardson: true, solver: {preconditioner: averaged}}",
                                     conv::Backend::gpu_fused);
  CHECK_FALSE(app::member_plan(averaged).sweep);
  CHECK(app::wavelengths_per_unit(averaged, 33, 1, 1000 * gib) == 1);
  CHECK(app::device_sweep_workers(averaged, 1, 80 * gib) == std::numeric_limits<int>::max());
  // On a host backend the sweep's units fill the threads instead (next test case), whatever the memory.
  const io::Problem host = metal("{harmonics: 60, richardson: true}", conv::Backend::cpu_fftw);
  CHECK(app::member_plan(host).sweep);
  CHECK_FALSE(app::device_sweep_wavelengths(host, 1000 * gib));
  CHECK(app::wavelengths_per_unit(host, 33, 1, 1000 * gib, 16) == 8);  // 16 threads, 2 groups per wavelength
  // A dielectric takes the sweep on a device automatically where averaged would otherwise serve it (the
  // normal-vector formulation in complex128, physics::member_plan), not in complex64 nor with Laurent's rule
  // (none), nor where averaged is asked for; the memory per member grows with the orders.
  const io::Problem dielectric = lines(41, 2, 20, 100, conv::Backend::gpu_fused);
  CHECK(app::member_plan(dielectric).sweep);
  io::Problem variant = dielectric;
  variant.solver.precision = Precision::single;
  CHECK_FALSE(app::member_plan(variant).sweep);
  variant = dielectric;
  variant.solver.formulation = physics::Formulation::laurent;
  CHECK_FALSE(app::member_plan(variant).sweep);
  variant.solver.preconditioner = physics::Preconditioning::sweep;  // asked for: any formulation
  CHECK(app::member_plan(variant).sweep);
  variant = dielectric;
  variant.solver.preconditioner = physics::Preconditioning::averaged;
  CHECK_FALSE(app::member_plan(variant).sweep);
  io::Problem asked = dielectric;
  asked.solver.preconditioner = physics::Preconditioning::sweep;
  const physics::MemberPlan asked_plan = app::member_plan(asked);
  CHECK(asked_plan.sweep);
  io::Problem finer = asked;
  finer.solver.m1 = 40;
  CHECK(app::member_plan(finer).bytes_per_member > 3 * asked_plan.bytes_per_member);  // ~orders² per slice
}

TEST_CASE("host sweeps batch as many wavelengths as give every thread a group, keeping 4 units per worker",
          "[app][units]") {
  // A 1D dielectric on the host: automatic takes the sweep (physics::member_plan), two groups per incidence.
  const io::Problem one = lines(41, 1, 12, 20, conv::Backend::cpu_fftw);
  REQUIRE(app::member_plan(one).sweep);
  CHECK(physics::host_sweep_members(1, 16) == 16);
  CHECK(physics::host_sweep_members(2, 16) == 8);
  CHECK(physics::host_sweep_members(1, 2) == 2);
  CHECK(physics::host_sweep_members(3, 4) == 1);
  CHECK(physics::host_sweep_members(3, 2) == 1);
  CHECK(app::wavelengths_per_unit(one, 41, 1, std::nullopt, 16) == 10);  // 41 / 4 units per worker = 10 < 16
  CHECK(app::wavelengths_per_unit(one, 81, 1, std::nullopt, 16) == 16);  // 81 / 4 = 20 > 16 threads
  CHECK(app::wavelengths_per_unit(one, 41, 1, std::nullopt, 2) == 2);    // two threads: four groups balance them
  CHECK(app::wavelengths_per_unit(one, 41, 1, std::nullopt, 1) == 1);
  CHECK(app::wavelengths_per_unit(one, 20, 1, std::nullopt, 16) == 5);  // 20 / 4: the cap
  CHECK(app::wavelengths_per_unit(one, 41, 3, std::nullopt, 16) == 3);  // 41 / 12 (three ranks)
  const io::Problem two_angles = lines(41, 2, 12, 20, conv::Backend::cpu_direct);
  CHECK(app::wavelengths_per_unit(two_angles, 41, 1, std::nullopt, 16) == 8);
  // Without the sweep one wavelength per unit, whatever the threads.
  io::Problem averaged = one;
  averaged.solver.preconditioner = physics::Preconditioning::averaged;
  CHECK_FALSE(app::member_plan(averaged).sweep);
  CHECK(app::wavelengths_per_unit(averaged, 41, 1, std::nullopt, 16) == 1);
}

TEST_CASE("the wavelengths per unit: as many as fill a GPU, no more, within the cap", "[app][units]") {
  std::uniform_int_distribution<int> wavelengths(1, 60), angles(1, 4), harmonics(1, 12), slices(1, 40), workers(1, 8);
  for (int trial = 0; trial < 200; ++trial) {
    const io::Problem p = averaged_lines(wavelengths(test::rng()), angles(test::rng()), harmonics(test::rng()),
                                         slices(test::rng()));
    const std::size_t batches = p.layout.batches(), nw = p.layout.wavelength_nm.size();
    const int w = workers(test::rng());
    const std::size_t k = app::wavelengths_per_unit(p, batches, w);
    const double unknowns = app::batch_unknowns(p);
    INFO("wavelengths " << nw << ", unknowns per wavelength " << unknowns << ", workers " << w << ": " << k);
    REQUIRE((k >= 1 && k <= nw));
    const std::size_t units_wanted = app::units_per_device * std::size_t(w);
    if (unknowns >= physics::device_batch_unknowns) {  // not launch-bound: never batched
      CHECK(k == 1);
      continue;
    }
    if (k > 1) {
      CHECK(k * units_wanted <= batches);                                   // the cap holds
      CHECK(double(k - 1) * unknowns < app::gpu_filling_unknowns);  // not more than fill the GPU
    }
    if (double(k) * unknowns < app::gpu_filling_unknowns && k < nw)
      CHECK((k + 1) * units_wanted > batches);  // short of the fill only where the cap stops it
  }
}

TEST_CASE("plan_units: every point left in exactly one unit, of one parameter point, in near-equal runs", "[app][units]") {
  const io::Problem p = lines(7, 3, 2, 2, conv::Backend::gpu_fused, "parameters: {w: [100, 200, 300]}\n");
  const io::ResultLayout& l = p.layout;
  REQUIRE(l.points() == 3 * 7 * 3);
  std::bernoulli_distribution done_draw(0.3);
  std::uniform_int_distribution<std::size_t> per_unit(1, 8);
  std::uniform_int_distribution<int> workers(1, 4);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<bool> done(l.points());
    for (std::size_t q = 0; q < done.size(); ++q) done[q] = done_draw(test::rng());  // gaps across wavelengths
    const std::size_t k = per_unit(test::rng());
    const int w = workers(test::rng());
    INFO("wavelengths per unit " << k << ", workers " << w);
    const std::vector<app::Unit> units = app::plan_units(p, [&](std::size_t q) { return bool(done[q]); }, w, k);
    std::vector<int> seen(l.points(), 0);
    std::map<std::size_t, std::vector<std::size_t>> runs_of;  // parameter point → wavelengths of each unit
    for (const app::Unit& u : units) {
      REQUIRE(!u.empty());
      CHECK(std::is_sorted(u.begin(), u.end()));
      for (const std::size_t q : u) {
        ++seen[q];
        CHECK(l.parameter_point_of(q) == l.parameter_point_of(u.front()));
      }
      CHECK(wavelengths_in(l, u) <= k);
      runs_of[l.parameter_point_of(u.front())].push_back(wavelengths_in(l, u));
    }
    for (std::size_t q = 0; q < l.points(); ++q) CHECK(seen[q] == (done[q] ? 0 : 1));
    if (k == 1) continue;  // (one wavelength per unit: split for the workers where there are few)
    for (const auto& [point, runs] : runs_of) {
      std::size_t left = 0;  // the parameter point's wavelengths with points left
      for (std::size_t iw = 0; iw < 7; ++iw) {
        bool any = false;
        for (std::size_t j = 0; j < 3; ++j) any = any || !done[(point * 7 + iw) * 3 + j];
        left += any;
      }
      CHECK(runs.size() == (left + k - 1) / k);
      const auto [least, most] = std::minmax_element(runs.begin(), runs.end());
      CHECK(*most - *least <= 1);
    }
  }
}

TEST_CASE("a unit's runs of one batch, and each wavelength's share of the unit's time", "[app][units]") {
  const io::Problem p = lines(5, 2, 2, 2, conv::Backend::gpu_fused);
  const app::Unit unit{0, 1, 3, 4, 5, 9};  // wavelengths 0 (2 points), 1 (1), 2 (2), 4 (1): a resumed unit's gaps
  const auto runs = app::split_by_batch(p.layout, unit);
  REQUIRE(runs.size() == 4);
  const std::vector<std::size_t> sizes{2, 1, 2, 1};
  app::Unit joined;
  double total = 0;
  std::size_t j = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    CHECK(runs[r].size() == sizes[r]);
    for (std::size_t k = 0; k < runs[r].size(); ++k, ++j) {
      CHECK(p.layout.batch_of(runs[r][k]) == p.layout.batch_of(runs[r][0]));
      CHECK(app::share_of_batch(p.layout, unit, j) == double(sizes[r]) / 6);
    }
    total += app::share_of_batch(p.layout, unit, j - 1);
    joined.insert(joined.end(), runs[r].begin(), runs[r].end());
  }
  CHECK(joined == unit);
  CHECK(std::abs(total - 1) < 1e-15);
  const app::Unit alone{6, 7};
  CHECK(app::share_of_batch(p.layout, alone, 0) == 1);
}
