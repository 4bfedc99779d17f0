#include "app/solving.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>

#include "app/work_units.hpp"
#include "convolution/autotune.hpp"
#include "convolution/devices.hpp"
#include "physics/discretisation.hpp"
#include "physics/problem.hpp"

namespace gratingsim::app {

std::string device_of(conv::Backend backend) {
  if (conv::memory_of(backend) == Memory::host) return conv::describe(conv::host_cpu());
  const auto device = conv::current_cuda_device();
  return device ? device->name : "no CUDA device";
}

std::string physics_unavailable(conv::Backend backend, Precision precision, physics::Formulation formulation) {
  if (!conv::backend_available(backend)) {
    if (conv::memory_of(backend) == Memory::device) {
      const conv::CudaReport cuda = conv::cuda_report();
      if (!cuda.built) return "needs a CUDA device, and this build has no CUDA backends (configured without CUDA)";
      if (cuda.devices.empty())
        return "needs a CUDA device; none is present" + (cuda.problem.empty() ? "" : " (" + cuda.problem + ")");
    }
    return "not in this build, or no CUDA device";
  }
  // A 100 nm film of index 1.5 on it, one slice, M1 = 1: a solve of a few microseconds that goes
  // through every stage the backend takes part in.
  physics::Structure slab;
  slab.lattice = {500.0, 0.0};
  slab.substrate = physics::Material::constant_index(1.5);
  physics::Layer film;
  film.thickness = 100;
  film.slices = 1;
  film.background = physics::Material::constant_index(1.5);
  slab.layers = {film};
  physics::SolverOptions o;
  o.m1 = 1;
  o.backend = backend;
  o.precision = precision;
  o.formulation = formulation;
  o.tolerance = precision == Precision::single ? 1e-5 : 1e-10;
  o.on_unconverged = physics::OnUnconverged::mark;
  const physics::Incidence incidence{633.0, 10.0, 0.0};
  try {
    (void)physics::solve(slab, {&incidence, 1}, o);
  } catch (const Unsupported& e) {
    return user_message(e);
  }
  return {};
}

std::string apply_precision(physics::SolverOptions& solver, std::optional<Precision> precision) {
  if (precision) solver.precision = *precision;
  if (solver.precision != Precision::single || solver.tolerance >= single_tolerance_floor) return {};
  std::ostringstream warning;
  warning << "single precision: solver tolerance raised from " << solver.tolerance << " to " << single_tolerance_floor
          << " (complex64 arithmetic reaches no smaller relative residual)";
  solver.tolerance = single_tolerance_floor;
  return warning.str();
}

conv::Problem convolution_geometry(const io::Problem& problem) {
  // The problem the solver will run (physics::convolution_problem), at the largest slice count of a
  // solve: the automatic choice must time, and check, that problem.
  // With parameters: the most slices of any parameter point.
  const io::Case& c = problem.source;
  int slices = c.total_slices();
  for (const physics::Structure& s : problem.structures) {
    int n = 0;
    for (const physics::Layer& layer : s.layers) n += layer.slices;
    slices = std::max(slices, n);
  }
  bool sloped = physics::sloped_walls(problem.structure());
  for (const physics::Structure& s : problem.structures) sloped = sloped || physics::sloped_walls(s);
  return physics::convolution_problem(problem.solver.formulation, problem.structure().lattice, problem.solver.m1,
                                      problem.solver.m2, slices * (c.numerics.richardson ? 2 : 1),
                                      c.incidence.theta_deg.size() * c.incidence.phi_deg.size(), 1, sloped);
}

conv::Backend automatic_backend(const io::Problem& problem) {
  const Precision precision = problem.solver.precision;
  std::string note;
  const conv::Backend fastest =
      conv::select_backend(convolution_geometry(problem), precision, conv::default_backend_cache(), &note);
  if (!note.empty()) std::cerr << "gratingsim: " << note << '\n';
  const physics::Formulation formulation = problem.solver.formulation;
  if (physics_unavailable(fastest, precision, formulation).empty()) return fastest;
  return physics_unavailable(conv::Backend::cpu_fftw, precision, formulation).empty() ? conv::Backend::cpu_fftw
                                                                                     : conv::Backend::cpu_direct;
}

BatchSolve solve_points(const io::Problem& problem, std::span<const std::size_t> points) {
  BatchSolve batch;
  batch.points.assign(points.begin(), points.end());
  std::vector<physics::Incidence> incidences;
  for (std::size_t point : points) incidences.push_back(io::incidence_of(problem, point));
  const auto start = std::chrono::steady_clock::now();
  // A unit's points share their structure: one parameter point (ResultLayout::parameter_point_of), of
  // any of its wavelengths.
  GS_EXPECTS(!points.empty() && std::all_of(points.begin(), points.end(),
                                            [&](std::size_t p) {
                                              return problem.layout.parameter_point_of(p) ==
                                                     problem.layout.parameter_point_of(points.front());
                                            }),
             "a solve takes the points of one structure (parameter point)");
  batch.result = physics::solve(problem.structure_of(points.front()), incidences, problem.solver);
  batch.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return batch;
}

io::SolvedPoints solve_for_file(const io::Problem& problem, std::span<const std::size_t> points) {
  if (problem.layout.accuracy) {
    io::SolvedPoints solved = io::solve_to_target(problem, points);  // times: the whole ladder's
    for (std::size_t j = 0; j < points.size(); ++j) {
      io::PointResult& r = solved.results[j];
      const double share = share_of_batch(problem.layout, points, j);
      r.solve_seconds *= share;
      for (double& s : r.phase_seconds) s *= share;  // (writing: NaN, recorded by the writer)
    }
    return solved;
  }
  const BatchSolve batch = solve_points(problem, points);
  io::SolvedPoints solved;
  for (std::size_t j = 0; j < points.size(); ++j)
    solved.results.push_back(point_result(problem, batch, j));
  solved.warnings = batch.result.warnings;
  return solved;
}

}  // namespace gratingsim::app

namespace gratingsim::app {

io::PointResult point_result(const io::Problem& problem, const BatchSolve& batch, std::size_t j) {
  const double share = share_of_batch(problem.layout, batch.points, j);
  io::PointResult r = io::to_point_result(problem, batch.points[j], batch.result.incidences[j], share * batch.seconds);
  for (std::size_t p = 0; p < physics::phase_count; ++p) r.phase_seconds[p] = share * batch.result.phases.seconds[p];
  r.phase_seconds[std::size_t(physics::Phase::writing)] = std::numeric_limits<double>::quiet_NaN();
  return r;
}

}  // namespace gratingsim::app
