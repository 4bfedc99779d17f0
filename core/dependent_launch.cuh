#pragma once
// Programmatic dependent launch (compute capability 9.0): a kernel launched by launch_after_previous may be
// scheduled while the previous kernel of its stream is still finishing, and must call wait_for_previous_kernel
// before it reads anything that kernel (or an earlier one) wrote or writes anything they read. It gains the
// launch's latency (and whatever it does before the wait: work on inputs written long before), which bounds
// the small problems' Krylov steps (docs/solver.md §2). Under stream capture the dependency becomes a
// programmatic edge of the graph. On older devices the attribute is ignored and the wait is not compiled.
#include <cuda_runtime.h>

#include <cstddef>

#include "core/cuda_check.hpp"

namespace gratingsim {

/// Blocks until the previous kernel of the stream has completed and its writes are visible; a no-op in a kernel
/// launched the ordinary way.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// kernel<<<grid, block, shared, stream>>>(args...) with programmatic stream serialisation; throws CudaError on a
/// failed launch. Does not synchronise.
template <class... Params, class... Args>
void launch_after_previous(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared, cudaStream_t stream,
                           Args... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  GS_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, args...));
}

}  // namespace gratingsim
