#pragma once
// The units of work of `gratingsim run`'s sweep (sweep_executor.hpp hands them to the workers): the
// points of ONE parameter point (one structure), of one or several wavelengths, solved in one
// physics::solve call. UI-free, part of gratingsim_solving.
//
// How many wavelengths a unit takes (wavelengths_per_unit), with the thresholds below:
//   - host backends (cpu-direct, cpu-fftw): one. They parallelise inside a solve (OpenMP over the
//     right-hand sides and the slices' convolutions) and gain nothing from a larger one; smaller units
//     keep the progress line, resumability and load balancing as fine as they were. Except with the
//     sweep preconditioner (physics::member_plan), whose set-up runs its groups (one or two per incidence)
//     on the threads: physics::host_sweep_members wavelengths (threads / incidences), so that every thread
//     has a group and unequal groups balance, while the sweep keeps units_per_worker units per worker.
//   - device backends, solves with the sweep preconditioner (physics::member_plan): a unit's wavelengths
//     are one batched problem at any size, since the sweep's set-up is a chain of latency-bound launches
//     per slice whose time hardly grows with the wavelengths beside it; as many as keep each of the
//     units_per_device workers sharing a device within 1/sweep_memory_shares of its memory, capped as
//     below so that every worker has units.
//   - other device solves: one where a wavelength's solve has physics::device_batch_unknowns unknowns or
//     more (solver.hpp: it is not launch-bound, and a batch would wait for its slowest wavelength);
//     below, enough wavelengths that a unit holds gpu_filling_unknowns unknowns (a solve that small
//     leaves a GPU idle between its launches: batching several wavelengths makes each launch do more
//     work), capped so that the sweep still has units_per_device units per device (every worker
//     sharing a device gets one; load balancing; a --resume or a failure loses little).
// A unit never spans parameter points (its incidences share one structure). The wavelengths of one
// parameter point are cut into near-equal runs of neighbouring wavelengths. A point's result does not
// depend on which points share its unit (physics::solve treats every right-hand side on its own), so on
// host backends the file is the same, bit for bit, for any unit size (solve times aside); on a GPU the
// batched arithmetic of another unit size may differ at the rounding (README: local workers).
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "io/problem.hpp"
#include "physics/solver.hpp"

namespace gratingsim::app {

/// The points of one unit (flat sweep indices, io::ResultLayout::point_index), in point order.
using Unit = std::vector<std::size_t>;

/// Unknowns of one solve below which a GPU is mostly idle: its Krylov step is a few dozen launches, and
/// a launch costs a few microseconds, about what one kernel takes to stream 1e6 complex doubles (16 MB at
/// 3 TB/s: ~5 µs). Measured on one H200, gpu-fused, as the sweep wall time with 1 → 4 workers of one
/// wavelength each sharing the device (validation/results/workers-h200.txt): default.yaml (3e3 unknowns
/// per wavelength) 0.51 → 0.35 s, contact_holes (2e4) 0.31 → 0.14 s, si_lines_metrology (2e4) 4.2 →
/// 2.3 s gained from concurrent solves; problem_case_3 (6e6) 0.64 → 0.62–0.89 s did not (one solve fills
/// the GPU). Units are made this large where the sweep allows it; while they are smaller, several local
/// workers share each device (app/run.cpp). (Before units of several wavelengths the sharing threshold
/// was 2.5e5 unknowns per wavelength, between the measured cases; 1e6 follows the launch-cost estimate
/// above and is to be measured with batched wavelengths.) A unit of ~1e6 unknowns holds ~3 GB of GMRES
/// basis at restart 200 (16 B × 200 per unknown).
inline constexpr double gpu_filling_unknowns = 1e6;

/// Units wanted per worker: with about 4, the last units to finish leave the other workers idle for a
/// quarter of a worker's share at most. Wavelengths are batched only while the sweep keeps this many
/// units per worker; a sweep of fewer wavelengths than this per worker has each wavelength's points
/// cut into near-equal units instead (or every unit is one point).
inline constexpr std::size_t units_per_worker = 4;

/// Units wanted per device on device backends (wavelengths_per_unit's cap): as many as the local workers
/// that may share one device (app/run.cpp's workers_per_device_small), so that each of them has a unit.
/// A unit's set-up runs on its worker's host thread (the preconditioner's assembly is most of it in 1D):
/// measured on an H100 (session 10, gpu-fused, 3 runs each), si_lines_metrology with 4 units per device
/// (12 wavelengths per unit, 5 workers) swept 61–69 points/s against 75–84 with one wavelength per unit
/// on 8 workers: the summed preconditioner phase is 6.2 s either way, the Krylov phase 1.3 against 3.7 s.
inline constexpr std::size_t units_per_device = 8;

/// The device memory a unit of sweep-preconditioned wavelengths may take, as a share: 1/16 of the
/// device for each of the units_per_device workers that share it, which leaves half of it for the
/// estimates' slack (physics::member_plan is an upper bound of the sweep's matrices: conical incidence)
/// and the workers' set-up peaks.
inline constexpr std::size_t sweep_memory_shares = 2 * units_per_device;

/// physics::member_plan of every parameter point's structure at the sweep's wavelengths (the sweep if any
/// takes it, the largest memory); none with accuracy on demand (its ladder changes the sizes).
physics::MemberPlan member_plan(const io::Problem& problem);

/// The wavelengths a unit of a device sweep-preconditioned solve may take within its share of devices of
/// `device_memory_bytes` each (sweep_memory_shares; 0 where one wavelength exceeds it: units of one, and
/// app/run.cpp then shares the device only as for other solves); nullopt where the solve is not one
/// (member_plan, a device backend) or there is no device (0 bytes).
std::optional<std::size_t> device_sweep_wavelengths(const io::Problem& problem, std::size_t device_memory_bytes);

/// The most local workers that may share a device of `device_memory_bytes` with units of `wavelengths`
/// wavelengths of a device sweep-preconditioned solve, so that the last to start still finds the budget its
/// preconditioner needs (physics::MemberPlan::budget_per_member) beside the others' units; at least 1.
/// INT_MAX where the solve is not one or there is no device. Session 21, H100, si_lines_metrology with the
/// sweep and units of 2 wavelengths (`--wavelengths-per-unit 2`) on 8 workers: a worker found 30 GiB of
/// 80 left and refused its preconditioner (7.95 GiB, more than a quarter of it); this rule gives 2 workers there.
int device_sweep_workers(const io::Problem& problem, std::size_t wavelengths, std::size_t device_memory_bytes);

/// The smallest global memory of the visible CUDA devices; 0 without one.
std::size_t smallest_device_memory();

/// Unknowns of one wavelength's solve at a parameter point: 3 field components × orders × slices (the
/// finer slicing with Richardson) × right-hand sides (incidences × polarisations). With accuracy on
/// demand, at the ladder's highest harmonics and slices: a unit's points may climb that far together.
double batch_unknowns(const io::Problem& problem);

/// The wavelengths per unit for a sweep of `batches` (parameter point, wavelength) batches still to solve
/// on `workers` workers with problem.solver.backend, by the rule above; at least 1, at most the
/// case's wavelengths.
/// `device_memory_bytes` and `threads` (for tests): default smallest_device_memory() and the OpenMP threads.
std::size_t wavelengths_per_unit(const io::Problem& problem, std::size_t batches, int workers,
                                 std::optional<std::size_t> device_memory_bytes = std::nullopt,
                                 std::optional<int> threads = std::nullopt);

/// The units of the points not `done` for `workers` workers: per parameter point, its wavelengths with
/// points left in runs of `wavelengths` (default: wavelengths_per_unit for the batches left), cut into
/// near-equal units; a unit holds only the points left (a resumed file's gaps are fine). One
/// wavelength per unit on several workers with fewer than units_per_worker units per worker: each
/// wavelength's points cut into near-equal units until there are that many (or every unit is one point).
std::vector<Unit> plan_units(const io::Problem& problem, const std::function<bool(std::size_t)>& done, int workers,
                             std::optional<std::size_t> wavelengths = std::nullopt);

/// `points` (in point order) as runs of one batch each (one wavelength of one parameter point).
std::vector<std::span<const std::size_t>> split_by_batch(const io::ResultLayout& layout,
                                                         std::span<const std::size_t> points);

/// The share of a unit's time that its points at the wavelength of points[j] get: their number over the
/// unit's (1 for a one-wavelength unit). Solve and phase times are stored per wavelength this way, so
/// that a wavelength's time, and the sum over the sweep, mean what they do with one wavelength per unit.
double share_of_batch(const io::ResultLayout& layout, std::span<const std::size_t> points, std::size_t j);

}  // namespace gratingsim::app
