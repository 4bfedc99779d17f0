#include "app/grating_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <map>
#include <sstream>
#include <utility>

#include "io/accuracy.hpp"
#include "physics/solver.hpp"

namespace gratingsim::app {
namespace {

/// "633 nm", or "400 … 800 nm" for the wavelengths of a call's incidences.
std::string wavelengths_of(const std::vector<physics::Incidence>& incidences) {
  const auto [least, most] = std::minmax_element(incidences.begin(), incidences.end(),
                                                 [](const auto& a, const auto& b) { return a.wavelength < b.wavelength; });
  std::ostringstream os;
  os << least->wavelength;
  if (most->wavelength != least->wavelength) os << " … " << most->wavelength;
  os << " nm";
  return os.str();
}

}  // namespace

void check_measured_wavelengths(const io::Case& c, const io::MeasuredData& measured) {
  for (std::size_t row = 0; row < measured.rows(); ++row)
    for (const auto& [name, material] : c.materials) {
      try {
        (void)material.index(measured.points[row].wavelength_nm);
      } catch (const InvalidArgument& e) {
        io::refuse_value(measured, row, "wavelength", "material '" + name + "' of the case: " + user_message(e));
      }
    }
}

std::vector<io::FrozenAccuracy> freeze_accuracy(const io::Problem& problem, const std::vector<std::size_t>& floating,
                                                const std::vector<double>& start, const io::MeasuredData& measured) {
  const io::Case& c = problem.source;
  GS_EXPECTS(c.numerics.accuracy.has_value(), "freeze_accuracy needs harmonics: auto or slices: auto");
  GS_EXPECTS(floating.size() == start.size(), "one start value per floating parameter");
  std::vector<double> axes;
  for (const io::ParameterAxis& axis : c.parameters) axes.push_back(c.parameter_values.at(axis.name));
  for (std::size_t j = 0; j < floating.size(); ++j) axes[floating[j]] = start[j];
  // The case at the start, one parameter point, swept over the measured (λ, θ, φ); no fields.
  io::Case at_start = io::case_at(c, axes);
  for (std::size_t a = 0; a < axes.size(); ++a) at_start.parameters[a].values = {axes[a]};
  at_start.wavelength_nm.clear();
  at_start.incidence.theta_deg.clear();
  at_start.incidence.phi_deg.clear();
  const auto index_in = [](std::vector<double>& axis, double x) {  // x's index, appended when new
    const auto it = std::find(axis.begin(), axis.end(), x);
    if (it != axis.end()) return std::size_t(it - axis.begin());
    axis.push_back(x);
    return axis.size() - 1;
  };
  std::vector<std::array<std::size_t, 3>> row_index;
  for (const io::MeasuredPoint& p : measured.points)
    row_index.push_back({index_in(at_start.wavelength_nm, p.wavelength_nm), index_in(at_start.incidence.theta_deg, p.theta_deg),
                         index_in(at_start.incidence.phi_deg, p.phi_deg)});
  at_start.output = io::OutputOptions{};
  at_start.incidence.polarization = io::Polarization::both;
  io::Problem ladder = io::make_problem(std::move(at_start));
  // The fit's solver options (backend, precision, tolerances), from the ladder's first rung.
  const int m1 = ladder.solver.m1, m2 = ladder.solver.m2;
  ladder.solver = problem.solver;
  ladder.solver.m1 = m1;
  ladder.solver.m2 = m2;
  ladder.solver.keep_fields = false;

  const io::ResultLayout& l = ladder.layout;
  std::vector<std::set<std::size_t>> points(l.wavelength_nm.size());
  for (const auto& [iw, itheta, iphi] : row_index) points[iw].insert(l.point_index(iw, itheta, iphi, 0));
  long long base_slices = 0;
  for (const physics::Layer& layer : ladder.structure().layers) base_slices += layer.slices;
  std::vector<io::FrozenAccuracy> frozen;
  for (std::size_t iw = 0; iw < points.size(); ++iw) {
    const std::vector<std::size_t> members(points[iw].begin(), points[iw].end());
    const io::SolvedPoints solved = io::solve_to_target(ladder, members);
    io::FrozenAccuracy f;
    f.wavelength_nm = l.wavelength_nm[iw];
    f.target_reached = true;
    f.estimated_error = std::numeric_limits<double>::quiet_NaN();  // stays NaN when no point had a second rung
    for (const io::PointResult& r : solved.results) {
      f.harmonics_x = std::max(f.harmonics_x, int(r.used_harmonics[0]));
      f.harmonics_y = std::max(f.harmonics_y, int(r.used_harmonics[1]));
      f.slices = std::max(f.slices, int(r.used_slices));
      f.estimated_error = std::fmax(f.estimated_error, r.estimated_error);  // a NaN (no second rung) is ignored
      f.target_reached = f.target_reached && r.target_reached == 1;
    }
    f.slice_factor = int(f.slices / base_slices);  // the ladder doubles every layer: used = base × 2^k
    frozen.push_back(f);
  }
  return frozen;
}

GratingModel::GratingModel(const io::Problem& problem, std::vector<std::size_t> floating,
                           const io::MeasuredData& measured, const std::vector<io::FrozenAccuracy>& frozen)
    : problem_(problem), floating_(std::move(floating)), measured_(measured) {
  GS_EXPECTS(frozen.empty() != problem.source.numerics.accuracy.has_value(),
             "a case with harmonics: auto or slices: auto is fitted with frozen settings, one with fixed numerics without");
  for (const std::size_t axis : floating_)
    GS_EXPECTS(axis < problem.source.parameters.size(), "a floating parameter is an axis of the case");
  for (const std::string& q : measured.quantities) {
    if (q == "psi_deg")
      sources_.push_back(-1);
    else if (q == "delta_deg")
      sources_.push_back(-2);
    else {  // "mIJ", I and J in 1..4 (io::read_measured accepts no other)
      GS_EXPECTS(q.size() == 3 && q[0] == 'm' && q[1] >= '1' && q[1] <= '4' && q[2] >= '1' && q[2] <= '4',
                 "a measured quantity is psi_deg, delta_deg or m11..m44, got '" + q + "'");
      sources_.push_back((q[1] - '1') * 4 + (q[2] - '1'));
    }
  }
  // Rows grouped by solver settings (one group with fixed numerics; per distinct M1, M2 and slice factor
  // with frozen auto numerics), each distinct (λ, θ, φ) solved once (exactly equal values).
  const auto settings_of = [&](double wavelength_nm) -> std::optional<io::FrozenAccuracy> {
    if (frozen.empty()) return std::nullopt;
    const auto it = std::find_if(frozen.begin(), frozen.end(),
                                 [&](const io::FrozenAccuracy& f) { return f.wavelength_nm == wavelength_nm; });
    GS_EXPECTS(it != frozen.end(), "freeze_accuracy resolved every measured wavelength");
    return *it;
  };
  std::map<std::array<int, 3>, std::size_t> group_of;  // (M1, M2, slice factor) → group
  for (std::size_t row = 0; row < measured.rows(); ++row) {
    const io::MeasuredPoint& p = measured.points[row];
    const std::optional<io::FrozenAccuracy> settings = settings_of(p.wavelength_nm);
    const std::array<int, 3> key = settings ? std::array{settings->harmonics_x, settings->harmonics_y, settings->slice_factor}
                                            : std::array{0, 0, 0};
    const auto [it, added] = group_of.emplace(key, groups_.size());
    if (added) {
      groups_.emplace_back();
      groups_.back().frozen = settings;
    }
    SolveGroup& g = groups_[it->second];
    std::size_t k = 0;
    while (k < g.incidences.size() &&
           !(g.incidences[k].wavelength == p.wavelength_nm && g.incidences[k].theta_deg == p.theta_deg &&
             g.incidences[k].phi_deg == p.phi_deg))
      ++k;
    if (k == g.incidences.size()) g.incidences.push_back({p.wavelength_nm, p.theta_deg, p.phi_deg});
    g.rows.push_back(row);
    g.incidence_of_row.push_back(k);
  }
}

void GratingModel::note(const std::string& what) {
  constexpr std::size_t max_notes = 8;  // a fit may meet the same failure at every step
  if (notes_.size() < max_notes) notes_.push_back(what);
}

Eigen::MatrixXd GratingModel::evaluate(const std::vector<Eigen::VectorXd>& points) {
  const std::size_t quantities = measured_.quantities.size();
  Eigen::MatrixXd out = Eigen::MatrixXd::Constant(Eigen::Index(outputs()), Eigen::Index(points.size()),
                                                  std::numeric_limits<double>::quiet_NaN());
  const io::Case& c = problem_.source;
  // Every point's grating; a point whose grating is invalid (io::CaseError) is left out: the fit avoids it.
  std::vector<physics::Structure> structures;
  std::vector<std::size_t> column;  // the point of structures[k]
  for (std::size_t k = 0; k < points.size(); ++k) {
    GS_EXPECTS(std::size_t(points[k].size()) == floating_.size(), "one value per floating parameter");
    std::vector<double> axes;
    for (const io::ParameterAxis& axis : c.parameters) axes.push_back(c.parameter_values.at(axis.name));
    for (std::size_t j = 0; j < floating_.size(); ++j) axes[floating_[j]] = points[k][Eigen::Index(j)];
    try {
      structures.push_back(io::case_at(c, axes).structure);
      column.push_back(k);
    } catch (const InvalidArgument& e) {
      note(user_message(e));
    }
  }
  if (structures.empty()) return out;
  for (const SolveGroup& g : groups_) {
    // Frozen auto settings: the group's M1, M2 and every layer's slices × its factor.
    physics::SolverOptions options = problem_.solver;
    std::vector<physics::Structure> finer;
    if (g.frozen) {
      options.m1 = g.frozen->harmonics_x;
      options.m2 = g.frozen->harmonics_y;
      if (g.frozen->slice_factor > 1) {
        finer = structures;
        for (physics::Structure& structure : finer)
          for (physics::Layer& layer : structure.layers) layer.slices *= g.frozen->slice_factor;  // as the ladder does
      }
    }
    const std::vector<physics::Structure>& solved_structures = finer.empty() ? structures : finer;
    // Every point's structure in one call: the points' (structure, wavelength) members share batched
    // problems (physics::solve(pairs)). Where that call throws, each point is solved alone, so that a
    // failure costs only its own point's rows, as one call per point did.
    std::vector<physics::SolveResult> solved(solved_structures.size());
    std::vector<bool> failed(solved_structures.size(), false);
    try {
      std::vector<physics::StructureIncidences> pairs;
      for (const physics::Structure& structure : solved_structures) pairs.push_back({structure, g.incidences});
      ++batches_;
      solved = physics::solve(pairs, options);
    } catch (const Error&) {
      for (std::size_t k = 0; k < solved_structures.size(); ++k) {
        try {
          ++batches_;
          solved[k] = physics::solve(solved_structures[k], g.incidences, options);
        } catch (const Error& e) {
          failed[k] = true;
          ++failed_solves_;
          std::ostringstream os;
          os << "solve at " << wavelengths_of(g.incidences) << " failed: " << user_message(e);
          note(os.str());
        }
      }
    }
    for (std::size_t k = 0; k < solved.size(); ++k) {
      if (failed[k]) continue;
      std::vector<bool> converged(g.incidences.size(), true);
      for (std::size_t i = 0; i < g.incidences.size(); ++i)
        for (const auto& solve : solved[k].incidences[i].solves)
          converged[i] = converged[i] && solve[physics::s_pol].converged && solve[physics::p_pol].converged;
      for (std::size_t r = 0; r < g.rows.size(); ++r) {
        const std::size_t i = g.incidence_of_row[r];
        if (!converged[i]) {
          ++failed_solves_;
          std::ostringstream os;
          os << "the solve at " << g.incidences[i].wavelength << " nm, θ = " << g.incidences[i].theta_deg
             << "°, φ = " << g.incidences[i].phi_deg << "° did not reach the solver tolerance";
          note(os.str());
          continue;
        }
        const physics::Ellipsometry& e = solved[k].incidences[i].zeroth_order;
        for (std::size_t q = 0; q < quantities; ++q) {
          const int source = sources_[q];
          const double value = source == -1   ? e.psi_deg
                               : source == -2 ? e.delta_deg
                                              : e.mueller[std::size_t(source / 4)][std::size_t(source % 4)];
          out(Eigen::Index(g.rows[r] * quantities + q), Eigen::Index(column[k])) = value;
        }
      }
    }
  }
  return out;
}

}  // namespace gratingsim::app
