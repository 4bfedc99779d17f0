#include "app/work_units.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <omp.h>

#include "convolution/convolution.hpp"
#include "convolution/devices.hpp"
#include "physics/solver.hpp"

namespace gratingsim::app {

double batch_unknowns(const io::Problem& problem) {
  const physics::SolverOptions& o = problem.solver;
  const io::ResultLayout& l = problem.layout;
  int m1 = o.m1, m2 = o.m2;
  double slices = problem.source.total_slices();
  if (l.accuracy && l.accuracy->harmonics) {  // the ladder's last rung: what a unit may come to hold
    m1 = std::max(m1, l.accuracy->max_harmonics);
    m2 = m2 > 0 ? std::max(m2, l.accuracy->max_harmonics) : 0;
  }
  if (l.accuracy && l.accuracy->slices) slices = std::max(slices, double(l.accuracy->max_slices));
  const double orders = double(2 * m1 + 1) * double(2 * m2 + 1);
  slices *= o.richardson ? 2 : 1;
  return 3 * orders * slices * double(l.theta_deg.size() * l.phi_deg.size()) * l.polarizations();
}

physics::MemberPlan member_plan(const io::Problem& problem) {
  const io::ResultLayout& l = problem.layout;
  if (l.accuracy) return {};  // a ladder's rungs change the harmonics and slices: the unknowns' rule instead
  physics::MemberPlan plan;
  const std::size_t incidences = l.theta_deg.size() * l.phi_deg.size();
  for (const physics::Structure& structure : problem.structures) {
    const physics::MemberPlan p = physics::member_plan(structure, incidences, l.wavelength_nm, problem.solver);
    plan.sweep = plan.sweep || p.sweep;
    plan.bytes_per_member = std::max(plan.bytes_per_member, p.bytes_per_member);
    plan.budget_per_member = std::max(plan.budget_per_member, p.budget_per_member);
  }
  return plan;
}

int device_sweep_workers(const io::Problem& problem, std::size_t wavelengths, std::size_t device_memory_bytes) {
  constexpr int unbounded = std::numeric_limits<int>::max();
  if (device_memory_bytes == 0 || conv::memory_of(problem.solver.backend) == Memory::host) return unbounded;
  const physics::MemberPlan plan = member_plan(problem);
  if (!plan.sweep || plan.bytes_per_member == 0) return unbounded;
  // The last worker to check finds the others' units in memory: (W − 1)·k·bytes + k·budget/f ≤ 0.95·memory
  // (f: the share of the free memory solve budgets, physics::device_budget_tenths / 10; 0.95: the context and
  // cuFFT's, cuBLAS's scratch).
  const double k = double(std::max<std::size_t>(wavelengths, 1)), memory = 0.95 * double(device_memory_bytes);
  const double left = memory - k * double(plan.budget_per_member) / (double(physics::device_budget_tenths) / 10);
  if (left < 0) return 1;
  return int(std::min(1.0 + std::floor(left / (k * double(plan.bytes_per_member))), double(unbounded / 2)));
}

std::optional<std::size_t> device_sweep_wavelengths(const io::Problem& problem, std::size_t device_memory_bytes) {
  if (device_memory_bytes == 0 || conv::memory_of(problem.solver.backend) == Memory::host) return std::nullopt;
  const physics::MemberPlan plan = member_plan(problem);
  if (!plan.sweep) return std::nullopt;
  return device_memory_bytes / sweep_memory_shares / std::max<std::size_t>(plan.bytes_per_member, 1);
}

std::size_t smallest_device_memory() {
  const conv::CudaReport cuda = conv::cuda_report();
  if (cuda.devices.empty()) return 0;
  std::size_t memory = cuda.devices.front().global_memory_bytes;
  for (const conv::CudaDevice& d : cuda.devices) memory = std::min(memory, d.global_memory_bytes);
  return memory;
}

std::size_t wavelengths_per_unit(const io::Problem& problem, std::size_t batches, int workers,
                                 std::optional<std::size_t> device_memory_bytes, std::optional<int> threads) {
  const std::size_t most = std::max(problem.layout.wavelength_nm.size(), std::size_t(1));
  if (conv::memory_of(problem.solver.backend) == Memory::host) {
    if (!member_plan(problem).sweep) return 1;
    const std::size_t incidences = problem.layout.theta_deg.size() * problem.layout.phi_deg.size();
    const std::size_t members = physics::host_sweep_members(incidences, threads.value_or(omp_get_max_threads()));
    const std::size_t balanced = batches / (units_per_worker * std::size_t(std::max(workers, 1)));
    return std::clamp(std::min(members, balanced), std::size_t(1), most);
  }
  const std::size_t balanced = batches / (units_per_device * std::size_t(std::max(workers, 1)));
  if (const auto sweep = device_sweep_wavelengths(problem, device_memory_bytes.value_or(smallest_device_memory())))
    return std::clamp(std::min(*sweep, balanced), std::size_t(1), most);
  const double unknowns = batch_unknowns(problem);
  if (unknowns >= physics::device_batch_unknowns) return 1;  // not launch-bound (solver.hpp)
  const auto filling = std::size_t(std::ceil(gpu_filling_unknowns / std::max(unknowns, 1.0)));
  return std::clamp(std::min(filling, balanced), std::size_t(1), most);
}

std::vector<Unit> plan_units(const io::Problem& problem, const std::function<bool(std::size_t)>& done, int workers,
                             std::optional<std::size_t> wavelengths) {
  const io::ResultLayout& layout = problem.layout;
  const std::size_t per_point = layout.wavelength_nm.size();  // batches per parameter point
  // The points left of each batch with any, grouped by parameter point.
  std::vector<std::vector<Unit>> left(layout.parameter_points());
  std::size_t batches = 0;
  for (std::size_t batch = 0; batch < layout.batches(); ++batch) {
    Unit points = io::points_of_batch(problem, batch);
    std::erase_if(points, [&](std::size_t p) { return done(p); });
    if (points.empty()) continue;
    left[batch / per_point].push_back(std::move(points));
    ++batches;
  }
  const std::size_t k = std::max<std::size_t>(wavelengths.value_or(wavelengths_per_unit(problem, batches, workers)), 1);

  std::vector<Unit> units;
  if (k > 1) {
    for (const std::vector<Unit>& runs : left) {
      const std::size_t n = runs.size(), pieces = (n + k - 1) / k;
      for (std::size_t g = 0; g < pieces; ++g) {  // runs [g·n/pieces, (g+1)·n/pieces)
        Unit& unit = units.emplace_back();
        for (std::size_t b = g * n / pieces; b < (g + 1) * n / pieces; ++b)
          unit.insert(unit.end(), runs[b].begin(), runs[b].end());
      }
    }
    return units;
  }
  for (std::vector<Unit>& runs : left)
    for (Unit& points : runs) units.push_back(std::move(points));
  const std::size_t wanted = units_per_worker * std::size_t(std::max(workers, 1));
  if (workers <= 1 || units.empty() || units.size() >= wanted) return units;
  const std::size_t pieces = (wanted + units.size() - 1) / units.size();
  std::vector<Unit> split;
  for (const Unit& points : units) {
    const std::size_t n = std::min(pieces, points.size());
    for (std::size_t piece = 0; piece < n; ++piece)  // points [piece·size/n, (piece+1)·size/n)
      split.emplace_back(points.begin() + std::ptrdiff_t(piece * points.size() / n),
                         points.begin() + std::ptrdiff_t((piece + 1) * points.size() / n));
  }
  return split;
}

std::vector<std::span<const std::size_t>> split_by_batch(const io::ResultLayout& layout,
                                                         std::span<const std::size_t> points) {
  std::vector<std::span<const std::size_t>> runs;
  for (std::size_t start = 0, end = 0; start < points.size(); start = end) {
    end = start + 1;
    while (end < points.size() && layout.batch_of(points[end]) == layout.batch_of(points[start])) ++end;
    runs.push_back(points.subspan(start, end - start));
  }
  return runs;
}

double share_of_batch(const io::ResultLayout& layout, std::span<const std::size_t> points, std::size_t j) {
  const std::size_t batch = layout.batch_of(points[j]);
  const auto same = std::count_if(points.begin(), points.end(), [&](std::size_t p) { return layout.batch_of(p) == batch; });
  return double(same) / double(points.size());
}

}  // namespace gratingsim::app
