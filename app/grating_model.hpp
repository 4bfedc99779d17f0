#pragma once
// The grating as a fitting::BatchModel (fitting/model.hpp), for `gratingsim fit`: parameter vectors in
// (the case's floating parameters), the measured table's Ψ/Δ or Mueller elements out, in its order
// (io::to_measurement: [row][quantity]). UI-free, part of gratingsim_solving.
//
// One evaluate() call takes every parameter vector the fit sends at once (a Jacobian's perturbed points,
// or an iteration's trial steps). Each vector's grating is built by io::case_at (the case's text read at
// those values, through every check of a case file); then every measured row of every vector is solved
// in ONE physics::solve(pairs) call (the run's solver options: the backend, precision and tolerances
// `run` would use): each (grating, wavelength) is a member of the batched problems that solve forms
// (physics/solver.hpp: members of equal slice count and lattice share a batch, as many as memory and
// max_wavelengths_per_batch allow; automatic: on device backends for problems below
// physics::device_batch_unknowns or with the sweep preconditioner, one member per problem on host
// backends or physics::host_sweep_members with the sweep), so a GPU solves a
// Jacobian's perturbed spectra at once instead of one launch-bound solve per vector and wavelength.
// Where that call throws, each vector is solved alone, so that a failure costs only its own column.
// With frozen auto numerics, wavelengths whose harmonics and slices differ cannot share a solve: one
// call per distinct setting.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "fitting/model.hpp"
#include "io/fit_results.hpp"
#include "io/measured.hpp"
#include "io/problem.hpp"

namespace gratingsim::app {

/// Refuses, located at the row's wavelength (io::refuse_value), a measured wavelength where a material
/// of the case has no data (outside its table or model range), before anything is solved.
void check_measured_wavelengths(const io::Case& c, const io::MeasuredData& measured);

/// numerics harmonics: auto / slices: auto resolved ONCE for a fit (io::FrozenAccuracy): the case at the
/// `start` parameters (floating[j] the axis of start[j]; the other axes at the case's values), swept over
/// the measured rows' distinct wavelengths, θ and φ (the ladder's first rung M0 comes from that sweep, as
/// `run`'s from its own), each wavelength's measured (θ, φ) climbed by io::solve_to_target with
/// problem.solver (backend, precision, tolerances) — `run`'s procedure. Per wavelength the finest rung any
/// of its points chose (largest M1, M2 and slice factor), in order of first appearance in `measured`.
/// The case must have numerics.accuracy.
std::vector<io::FrozenAccuracy> freeze_accuracy(const io::Problem& problem, const std::vector<std::size_t>& floating,
                                                const std::vector<double>& start, const io::MeasuredData& measured);

class GratingModel : public fitting::BatchModel {
 public:
  /// `problem`: the case's problem with its solver options final (backend, precision). `floating[j]`:
  /// the index in problem.source.parameters of the fit's parameter j; the other axes keep the case's
  /// value (problem.source.parameter_values). `measured` must outlive the model. `frozen`: with
  /// harmonics: auto / slices: auto, freeze_accuracy's settings, used at every parameter vector (each
  /// wavelength solved with its M1, M2 and every layer's slices × its factor); empty with fixed numerics.
  GratingModel(const io::Problem& problem, std::vector<std::size_t> floating, const io::MeasuredData& measured,
               const std::vector<io::FrozenAccuracy>& frozen = {});

  [[nodiscard]] std::size_t outputs() const override { return measured_.rows() * measured_.quantities.size(); }
  /// Column k: the model at points[k]. NaN for the rows whose solve failed (the rows of every wavelength
  /// of a call that threw; a row whose incidence did not reach the case's tolerance), and for the whole
  /// column where the parameter vector gives an invalid grating (each failure is kept in notes()).
  Eigen::MatrixXd evaluate(const std::vector<Eigen::VectorXd>& points) override;

  /// What failed so far, in words (at most a few of each kind; counts in failed_solves()).
  [[nodiscard]] const std::vector<std::string>& notes() const { return notes_; }
  [[nodiscard]] std::size_t failed_solves() const { return failed_solves_; }
  /// physics::solve calls made (one per evaluate() and distinct frozen setting; one more per vector where
  /// that call threw).
  [[nodiscard]] std::size_t batches() const { return batches_; }

 private:
  /// The measured rows solved in one call: their distinct (λ, θ, φ), of every wavelength that shares the
  /// solver settings (all of them with fixed numerics).
  struct SolveGroup {
    std::vector<physics::Incidence> incidences;
    std::vector<std::size_t> rows, incidence_of_row;  ///< rows[i] is solved as incidences[incidence_of_row[i]]
    std::optional<io::FrozenAccuracy> frozen;          ///< the group's frozen settings (auto numerics; its
                                                       ///< wavelength_nm: the first wavelength's)
  };
  /// Where quantity q of a row comes from: Ψ (-1), Δ (-2) or Mueller element row*4+col (0..15).
  std::vector<int> sources_;

  void note(const std::string& what);

  const io::Problem& problem_;
  std::vector<std::size_t> floating_;
  const io::MeasuredData& measured_;
  std::vector<SolveGroup> groups_;
  std::vector<std::string> notes_;
  std::size_t failed_solves_ = 0, batches_ = 0;
};

}  // namespace gratingsim::app
