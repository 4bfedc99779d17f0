// The idle cuFFT plans (cufft_plans.hpp): core/idle_handles.hpp's list, keyed by shape. The list is never
// destroyed: at exit its plans go with the CUDA context (destroying them from a static destructor could run
// after the context is gone).
#include <cufft.h>

#include <atomic>
#include <optional>

#include "convolution/cufft_plans.hpp"
#include "core/cuda_check.hpp"
#include "core/idle_handles.hpp"

namespace gratingsim::conv::detail {
namespace {

struct IdlePlan {
  cufftHandle plan;
  std::size_t work_bytes;
};

struct PlanPool {
  IdleHandles<CufftPlanShape, IdlePlan> idle{idle_cufft_plans_kept};
  std::atomic<std::size_t> made{0}, reused{0};
};

PlanPool& pool() {
  static PlanPool* const instance = new PlanPool;  // never destroyed (the file's comment)
  return *instance;
}

}  // namespace

int acquire_cufft_plan(const CufftPlanShape& shape, std::size_t& work_bytes) {
  PlanPool& p = pool();
  if (const std::optional<IdlePlan> taken = p.idle.take(shape)) {
    ++p.reused;
    work_bytes = taken->work_bytes;
    return taken->plan;
  }
  long long lengths[2];
  int rank = 0;
  if (shape.l1 > 1) lengths[rank++] = shape.l1;
  if (shape.l2 > 1) lengths[rank++] = shape.l2;
  GS_EXPECTS(rank > 0 && shape.batch > 0, "a pooled cuFFT plan needs a transform (L1 or L2 > 1, batch > 0)");
  cufftHandle plan = 0;
  GS_CUFFT_TRY(cufftCreate(&plan));
  try {
    GS_CUFFT_TRY(cufftSetAutoAllocation(plan, 0));
    const long long distance = static_cast<long long>(shape.l1) * shape.l2;
    GS_CUFFT_TRY(cufftMakePlanMany64(plan, rank, lengths, nullptr, 1, distance, nullptr, 1, distance,
                                     static_cast<cufftType>(shape.type), shape.batch, &work_bytes));
  } catch (...) {
    cufftDestroy(plan);  // no throw: the error above is the one to report
    throw;
  }
  ++p.made;
  return plan;
}

void release_cufft_plan(const CufftPlanShape& shape, int plan, std::size_t work_bytes) noexcept {
  // Destroyed outside the pool's lock: it waits for the device (cudaFree).
  if (const std::optional<IdlePlan> evicted = pool().idle.give(shape, {plan, work_bytes})) cufftDestroy(evicted->plan);
}

CufftPlanCounts cufft_plan_counts() {
  PlanPool& p = pool();
  return {p.made.load(), p.reused.load(), p.idle.size()};
}

}  // namespace gratingsim::conv::detail
