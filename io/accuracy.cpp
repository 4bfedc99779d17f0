// The ladder of accuracy on demand (see accuracy.hpp).
#include "io/accuracy.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <utility>

namespace gratingsim::io {

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

/// Settings of one rung: the highest orders and every layer's slices × slice_factor.
struct Rung {
  int m1 = 0, m2 = 0, slice_factor = 1;
};

/// How much a point's result changed from one rung to the next: the largest |ΔR_m|, |ΔT_m| over the
/// stored orders and polarisations; |ΔΨ| and |ΔΔ| (Δ taken the short way round the circle) in degrees,
/// NaN unless both polarisations are stored. NaN everywhere: no second rung was solved.
struct Change {
  double efficiency = nan, psi_deg = nan, delta_deg = nan;
};

/// The larger of two changes, value by value (NaN, no change measured, counts as none).
Change larger(const Change& a, const Change& b) {
  const auto most = [](double x, double y) { return std::isnan(x) ? y : std::isnan(y) ? x : std::max(x, y); };
  return {most(a.efficiency, b.efficiency), most(a.psi_deg, b.psi_deg), most(a.delta_deg, b.delta_deg)};
}

Change change(const PointResult& before, const PointResult& after) {
  Change c;
  c.efficiency = 0;
  for (std::size_t i = 0; i < after.reflectance.size(); ++i)
    c.efficiency = std::max({c.efficiency, std::abs(after.reflectance[i] - before.reflectance[i]),
                             std::abs(after.transmittance[i] - before.transmittance[i])});
  c.psi_deg = std::abs(after.psi_deg - before.psi_deg);
  const double turn = std::abs(after.delta_deg - before.delta_deg);  // both in (−180°, 180°]: at most 360°
  c.delta_deg = std::min(turn, 360 - turn);
  return c;
}

/// One point on its way up the ladder.
struct Climb {
  Rung rung;
  physics::IncidenceResult latest;  ///< at `rung`
  PointResult latest_point;         ///< the same as the result file stores it (what rungs compare)
  std::vector<std::array<physics::SolveStats, 2>> solves;  ///< of every rung solved
  /// The last two changes on each ladder ([0] the earlier; NaN until measured).
  std::array<Change, 2> harmonics_changes, slices_changes;
  bool reached = true;                                     ///< no ladder ended without agreement
};

class Ladder {
 public:
  Ladder(const Problem& problem, std::span<const std::size_t> points)
      : problem_(problem), points_(points.begin(), points.end()), climbs_(points.size()) {}

  /// Solves `members` (indices into the points) at `rung`, in one batch.
  void solve(const std::vector<std::size_t>& members, const Rung& rung) {
    physics::SolverOptions options = problem_.solver;
    options.m1 = rung.m1;
    options.m2 = rung.m2;
    std::vector<physics::Incidence> incidences;
    for (const std::size_t j : members) incidences.push_back(incidence_of(problem_, points_[j]));
    physics::SolveResult result = physics::solve(structure(rung.slice_factor), incidences, options);
    warnings_.insert(warnings_.end(), result.warnings.begin(), result.warnings.end());
    phases_ += result.phases;
    for (std::size_t k = 0; k < members.size(); ++k) {
      Climb& c = climbs_[members[k]];
      c.rung = rung;
      c.latest = std::move(result.incidences[k]);
      c.solves.insert(c.solves.end(), c.latest.solves.begin(), c.latest.solves.end());
      c.latest_point = to_point_result(problem_, points_[members[k]], c.latest, 0.0);
    }
  }

  /// Climbs one ladder with `members`, all solved at `rung` already: `next` gives the following rung
  /// (nullopt: the ladder ends). A point leaves once its last two changes are both within its
  /// tolerance (tolerance[j] for point j); `changes` names the Climb member that records them.
  void climb(std::vector<std::size_t> members, Rung rung, const std::function<std::optional<Rung>(const Rung&)>& next,
             const std::vector<double>& tolerance, std::array<Change, 2> Climb::*changes) {
    while (!members.empty()) {
      const std::optional<Rung> following = next(rung);
      if (!following) {
        for (const std::size_t j : members) climbs_[j].reached = false;
        return;
      }
      rung = *following;
      std::vector<PointResult> before;
      for (const std::size_t j : members) before.push_back(climbs_[j].latest_point);
      solve(members, rung);
      std::vector<std::size_t> climbing;
      for (std::size_t k = 0; k < members.size(); ++k) {
        std::array<Change, 2>& last = climbs_[members[k]].*changes;
        last = {last[1], change(before[k], climbs_[members[k]].latest_point)};
        const double within = tolerance[members[k]];
        if (!(last[0].efficiency <= within && last[1].efficiency <= within)) climbing.push_back(members[k]);
      }
      members = std::move(climbing);
    }
  }

  SolvedPoints run() {
    const auto start = std::chrono::steady_clock::now();
    const AccuracyTarget& a = *problem_.layout.accuracy;
    // The harmonics get half the target when the slices climb after them; the slices get what the
    // point's harmonics left (at least half), so that reaching the target means estimate ≤ target.
    std::vector<double> tolerance(points_.size(), a.target_error / (a.harmonics && a.slices ? 2 : 1));
    std::vector<std::size_t> all(points_.size());
    for (std::size_t j = 0; j < all.size(); ++j) all[j] = j;
    const Rung first{problem_.solver.m1, problem_.solver.m2, 1};
    solve(all, first);
    if (a.harmonics) {
      const auto more_harmonics = [&](const Rung& r) -> std::optional<Rung> {
        const int most_y = problem_.solver.m2 > 0 ? a.max_harmonics : 0;
        if (r.m1 >= a.max_harmonics && r.m2 >= most_y) return std::nullopt;
        return Rung{next_harmonics(r.m1, a.max_harmonics), r.m2 > 0 ? next_harmonics(r.m2, a.max_harmonics) : 0,
                    r.slice_factor};
      };
      climb(all, first, more_harmonics, tolerance, &Climb::harmonics_changes);
    }
    if (a.slices) {
      const long long slices = base_slices();
      const auto more_slices = [&](const Rung& r) -> std::optional<Rung> {
        if (2 * r.slice_factor * slices > a.max_slices) return std::nullopt;
        return Rung{r.m1, r.m2, 2 * r.slice_factor};
      };
      // The points whose harmonics agreed, grouped by the M they chose (each group one batch).
      std::map<std::pair<int, int>, std::vector<std::size_t>> by_harmonics;
      for (std::size_t j = 0; j < climbs_.size(); ++j) {
        if (!climbs_[j].reached) continue;
        by_harmonics[{climbs_[j].rung.m1, climbs_[j].rung.m2}].push_back(j);
        if (a.harmonics) {
          const auto& [earlier, last] = climbs_[j].harmonics_changes;
          tolerance[j] = a.target_error - larger(earlier, last).efficiency;
        }
      }
      for (const auto& [m, members] : by_harmonics)
        climb(members, climbs_[members[0]].rung, more_slices, tolerance, &Climb::slices_changes);
    }

    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    SolvedPoints solved;
    solved.warnings = std::move(warnings_);
    for (std::size_t j = 0; j < climbs_.size(); ++j) {
      Climb& c = climbs_[j];
      c.latest.solves = c.solves;  // the point's statistics cover every rung
      PointResult r = to_point_result(problem_, points_[j], c.latest, seconds);
      r.phase_seconds = phases_.seconds;  // every rung's batches; writing: recorded by the writer
      r.phase_seconds[std::size_t(physics::Phase::writing)] = std::numeric_limits<double>::quiet_NaN();
      r.used_harmonics = {c.rung.m1, c.rung.m2};
      r.used_slices = std::int32_t(base_slices() * c.rung.slice_factor);
      // Each ladder climbed adds the larger of its last two changes (a point whose harmonics did not
      // agree skips the slices: its estimate is the harmonics' alone); NaN when no ladder had a
      // second rung.
      Change estimate;
      for (const auto* changes : {a.harmonics ? &c.harmonics_changes : nullptr, a.slices ? &c.slices_changes : nullptr}) {
        if (!changes) continue;
        const Change ladder = larger((*changes)[0], (*changes)[1]);
        if (std::isnan(ladder.efficiency)) continue;
        const bool first_term = std::isnan(estimate.efficiency);
        estimate.efficiency = (first_term ? 0 : estimate.efficiency) + ladder.efficiency;
        estimate.psi_deg = (first_term ? 0 : estimate.psi_deg) + ladder.psi_deg;
        estimate.delta_deg = (first_term ? 0 : estimate.delta_deg) + ladder.delta_deg;
      }
      r.estimated_error = estimate.efficiency;
      if (problem_.layout.polarizations() == 2) {
        r.psi_change_deg = estimate.psi_deg;
        r.delta_change_deg = estimate.delta_deg;
      }
      r.target_reached = c.reached ? 1 : 0;
      solved.results.push_back(std::move(r));
    }
    return solved;
  }

 private:
  /// The slices in all of the points' structure (one batch: one parameter point), before any doubling.
  long long base_slices() const {
    long long n = 0;
    for (const physics::Layer& layer : problem_.structure_of(points_.front()).layers) n += layer.slices;
    return n;
  }

  /// The points' structure with every layer's slices × factor (built once per factor).
  const physics::Structure& structure(int factor) {
    if (factor == 1) return problem_.structure_of(points_.front());
    auto it = structures_.find(factor);
    if (it == structures_.end()) {
      physics::Structure finer = problem_.structure_of(points_.front());
      for (physics::Layer& layer : finer.layers) layer.slices *= factor;  // a tapered layer's steps too
      it = structures_.emplace(factor, std::move(finer)).first;
    }
    return it->second;
  }

  const Problem& problem_;
  std::vector<std::size_t> points_;
  std::vector<Climb> climbs_;
  std::vector<std::string> warnings_;
  physics::PhaseTimes phases_;  // summed over every batch the ladder solved
  std::map<int, physics::Structure> structures_;
};

}  // namespace

int next_harmonics(int m, int most) {
  return std::min(most, std::max(m + 1, int(std::lround(1.5 * m))));
}

SolvedPoints solve_to_target(const Problem& problem, std::span<const std::size_t> points) {
  GS_EXPECTS(problem.layout.accuracy.has_value(), "solve_to_target needs a case with harmonics: auto or slices: auto");
  return Ladder(problem, points).run();
}

}  // namespace gratingsim::io
