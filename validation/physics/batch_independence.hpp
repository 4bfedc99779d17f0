#pragma once
// A point's result must not depend on which incidences share its batch: a sweep over several workers
// (app/sweep_executor.hpp: MPI ranks, local GPUs) splits a wavelength's batch over them and promises
// the file of a one-worker run bit for bit. Shared by the host and the GPU solver tests.
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "physics/solver.hpp"
#include "validation/physics/grating_cases.hpp"
#include "validation/support/catch.hpp"

namespace gratingsim::test {

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Solves (in `formulation`) four incidences of one wavelength (conical ones included) together, alone, and in two
/// other groupings, on a crossed grating; every order's R, T and Jones matrices and every solve's
/// iterations and residual must be identical bit for bit.
inline void check_batch_independence(conv::Backend backend, Precision precision, physics::Formulation formulation) {
  using namespace physics;
  SolverOptions o;
  o.formulation = formulation;
  o.m1 = o.m2 = 3;
  o.backend = backend;
  o.precision = precision;
  o.tolerance = precision == Precision::single ? 1e-5 : 1e-10;
  o.on_unconverged = OnUnconverged::mark;
  const std::vector<Incidence> all{{0.93, 0, 0}, {0.93, 25, 35}, {0.93, 50, 75}, {0.93, 10, 5}};
  const std::vector<std::vector<std::size_t>> groupings[] = {{{0}, {1}, {2}, {3}}, {{0, 2}, {1, 3}}, {{3, 1, 0}, {2}}};
  const SolveResult together = solve(crossed(3), all, o);
  for (const auto& grouping : groupings)
    for (const auto& group : grouping) {
      std::vector<Incidence> some;
      for (std::size_t i : group) some.push_back(all[i]);
      const SolveResult part = solve(crossed(3), some, o);
      for (std::size_t j = 0; j < group.size(); ++j) {
        INFO("incidence " << group[j] << " in a batch of " << group.size());
        const IncidenceResult &a = together.incidences[group[j]], &b = part.incidences[j];
        REQUIRE(a.orders.size() == b.orders.size());
        REQUIRE(!a.orders.empty());
        for (std::size_t k = 0; k < a.orders.size(); ++k) {
          INFO("order (" << a.orders[k].m1 << ", " << a.orders[k].m2 << ")");
          CHECK(same_bits(a.orders[k].R, b.orders[k].R));
          CHECK(same_bits(a.orders[k].T, b.orders[k].T));
          CHECK(same_bits(a.orders[k].reflection, b.orders[k].reflection));
          CHECK(same_bits(a.orders[k].transmission, b.orders[k].transmission));
        }
        for (int pol : {s_pol, p_pol}) {
          CHECK(a.solves[0][pol].iterations == b.solves[0][pol].iterations);
          CHECK(same_bits(a.solves[0][pol].residual, b.solves[0][pol].residual));
        }
      }
    }
}

/// check_batch_independence for every formulation, each of `backends` and both precisions; a
/// backend that cannot serve a formulation yet is skipped with a warning.
inline void check_batch_independence_of(std::span<const conv::Backend> backends) {
  for (physics::Formulation formulation : formulations)
    for (conv::Backend backend : backends)
      for (Precision precision : {Precision::double_, Precision::single}) {
        INFO(to_string(formulation) << ", " << conv::to_string(backend) << ", " << to_string(precision));
        if (!serves(backend, precision, formulation)) {
          WARN(std::string(conv::to_string(backend)) + " does not serve the " + std::string(to_string(formulation)) +
               " formulation yet: skipped");
          continue;
        }
        check_batch_independence(backend, precision, formulation);
      }
}

}  // namespace gratingsim::test
