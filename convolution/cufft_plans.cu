// The idle cuFFT plans (cufft_plans.hpp): a process-wide list under a mutex, oldest first. The list is never
// destroyed: at exit its plans go with the CUDA context (destroying them from a static destructor could run
// after the context is gone).
#include <cufft.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "convolution/cufft_plans.hpp"
#include "core/cuda_check.hpp"

namespace gratingsim::conv::detail {
namespace {

struct IdlePlan {
  CufftPlanShape shape;
  cufftHandle plan;
  std::size_t work_bytes;
};

struct PlanPool {
  std::mutex mutex;
  std::vector<IdlePlan> idle;  // oldest first
  std::size_t made = 0, reused = 0;
};

PlanPool& pool() {
  static PlanPool* const instance = new PlanPool;  // never destroyed (the file's comment)
  return *instance;
}

}  // namespace

int acquire_cufft_plan(const CufftPlanShape& shape, std::size_t& work_bytes) {
  PlanPool& p = pool();
  {
    const std::lock_guard lock(p.mutex);
    // The newest idle plan of the shape: the one most likely still in cuFFT's and the GPU's caches.
    const auto found = std::find_if(p.idle.rbegin(), p.idle.rend(), [&](const IdlePlan& i) { return i.shape == shape; });
    if (found != p.idle.rend()) {
      const IdlePlan taken = *found;
      p.idle.erase(std::next(found).base());
      ++p.reused;
      work_bytes = taken.work_bytes;
      return taken.plan;
    }
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
  const std::lock_guard lock(p.mutex);
  ++p.made;
  return plan;
}

void release_cufft_plan(const CufftPlanShape& shape, int plan, std::size_t work_bytes) noexcept {
  PlanPool& p = pool();
  cufftHandle evicted = 0;
  bool evict = false;
  {
    const std::lock_guard lock(p.mutex);
    try {
      p.idle.push_back({shape, plan, work_bytes});
    } catch (...) {  // no memory for the list: destroy the plan instead
      evicted = plan;
      evict = true;
    }
    if (!evict && p.idle.size() > idle_cufft_plans_kept) {
      evicted = p.idle.front().plan;
      p.idle.erase(p.idle.begin());
      evict = true;
    }
  }
  if (evict) cufftDestroy(evicted);  // outside the lock: it waits for the device (cudaFree)
}

CufftPlanCounts cufft_plan_counts() {
  PlanPool& p = pool();
  const std::lock_guard lock(p.mutex);
  return {p.made, p.reused, p.idle.size()};
}

}  // namespace gratingsim::conv::detail
