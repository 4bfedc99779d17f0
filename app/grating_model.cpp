#include "app/grating_model.hpp"

#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "physics/solver.hpp"

namespace gratingsim::app {

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

GratingModel::GratingModel(const io::Problem& problem, std::vector<std::size_t> floating,
                           const io::MeasuredData& measured)
    : problem_(problem), floating_(std::move(floating)), measured_(measured) {
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
  // Rows grouped by wavelength (exactly equal values share a batch), each distinct (θ, φ) solved once.
  std::map<double, std::size_t> group_of;
  for (std::size_t row = 0; row < measured.rows(); ++row) {
    const io::MeasuredPoint& p = measured.points[row];
    const auto [it, added] = group_of.emplace(p.wavelength_nm, groups_.size());
    if (added) {
      groups_.emplace_back();
      groups_.back().wavelength_nm = p.wavelength_nm;
    }
    WavelengthGroup& g = groups_[it->second];
    std::size_t k = 0;
    while (k < g.incidences.size() && !(g.incidences[k].theta_deg == p.theta_deg && g.incidences[k].phi_deg == p.phi_deg))
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
  for (std::size_t k = 0; k < points.size(); ++k) {
    GS_EXPECTS(std::size_t(points[k].size()) == floating_.size(), "one value per floating parameter");
    std::vector<double> axes;
    for (const io::ParameterAxis& axis : c.parameters) axes.push_back(c.parameter_values.at(axis.name));
    for (std::size_t j = 0; j < floating_.size(); ++j) axes[floating_[j]] = points[k][Eigen::Index(j)];
    physics::Structure structure;
    try {
      structure = io::case_at(c, axes).structure;
    } catch (const InvalidArgument& e) {  // an invalid grating there (io::CaseError): the fit avoids it
      note(user_message(e));
      continue;
    }
    for (const WavelengthGroup& g : groups_) {
      ++batches_;
      physics::SolveResult solved;
      try {
        solved = physics::solve(structure, g.incidences, problem_.solver);
      } catch (const Error& e) {
        ++failed_solves_;
        std::ostringstream os;
        os << "solve at " << g.wavelength_nm << " nm failed: " << user_message(e);
        note(os.str());
        continue;
      }
      std::vector<bool> converged(g.incidences.size(), true);
      for (std::size_t i = 0; i < g.incidences.size(); ++i)
        for (const auto& solve : solved.incidences[i].solves)
          converged[i] = converged[i] && solve[physics::s_pol].converged && solve[physics::p_pol].converged;
      for (std::size_t r = 0; r < g.rows.size(); ++r) {
        const std::size_t i = g.incidence_of_row[r];
        if (!converged[i]) {
          ++failed_solves_;
          std::ostringstream os;
          os << "the solve at " << g.wavelength_nm << " nm, θ = " << g.incidences[i].theta_deg
             << "°, φ = " << g.incidences[i].phi_deg << "° did not reach the solver tolerance";
          note(os.str());
          continue;
        }
        const physics::Ellipsometry& e = solved.incidences[i].zeroth_order;
        for (std::size_t q = 0; q < quantities; ++q) {
          const int source = sources_[q];
          const double value = source == -1   ? e.psi_deg
                               : source == -2 ? e.delta_deg
                                              : e.mueller[std::size_t(source / 4)][std::size_t(source % 4)];
          out(Eigen::Index(g.rows[r] * quantities + q), Eigen::Index(k)) = value;
        }
      }
    }
  }
  return out;
}

}  // namespace gratingsim::app
