#pragma once
// Internal: the process's idle cuFFT plans, so that a backend made for each wavelength batch takes the
// plans its predecessor of the same shape left instead of making its own. Making a cuFFT plan allocates
// device memory with cudaMalloc and destroying one frees it with cudaFree; both synchronise with every
// stream of the device (device_buffer.hpp), so with several workers on one GPU each plan waited for the
// others' work: configs/si_lines_metrology.yaml on an H200, 8 workers, 312 plans made and destroyed in 6.5 s
// summed over the workers (10 ms each; session 35), against a 5.7 s sweep.
//
// The pooled plans are made with cuFFT's work-area auto-allocation off: their user supplies the work area
// (cufftSetWorkArea, from the stream-ordered pool, counted in the backends' workspace estimates), so an idle
// plan holds only cuFFT's own tables. Plans with callbacks are not pooled (their callerInfo is the user's).
// Types are cuFFT's (cufftHandle is an int, cufftType an enum) as ints, so that no header includes cufft.h.
#include <cstddef>

namespace gratingsim::conv::detail {

/// What a pooled plan transforms: `batch` contiguous L1×L2 blocks of cufftType `type`, length-1 axes dropped
/// (cufft_pipeline.cuh's CufftPlan), on CUDA device `device`.
struct CufftPlanShape {
  int device = 0, l1 = 0, l2 = 0;
  long long batch = 0;
  int type = 0;
  friend bool operator==(const CufftPlanShape&, const CufftPlanShape&) = default;
};

/// A plan of `shape`: an idle one if there is one, else made now; `work_bytes` is the size of the work area its
/// user must set (cufftSetWorkArea) before executing it. Thread-safe. Throws CufftError.
int acquire_cufft_plan(const CufftPlanShape& shape, std::size_t& work_bytes);

/// Returns a plan of acquire_cufft_plan to the idle ones; the plan must not be used after this (executions
/// already enqueued may still run). Beyond idle_cufft_plans_kept idle plans the oldest is destroyed. No throw.
void release_cufft_plan(const CufftPlanShape& shape, int plan, std::size_t work_bytes) noexcept;

/// At most this many idle plans are kept (Richardson's two problems × three plans × 8 workers per GPU fit).
inline constexpr std::size_t idle_cufft_plans_kept = 64;

/// Plans made and plans reused since the process started, and the idle ones now.
struct CufftPlanCounts {
  std::size_t made = 0, reused = 0, idle = 0;
};
CufftPlanCounts cufft_plan_counts();

}  // namespace gratingsim::conv::detail
