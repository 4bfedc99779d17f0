#pragma once
// Capturing what a device Krylov iteration enqueues as a CUDA graph (device_gmres.cu, device_bicgstab.cu), for .cu
// files only.
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <type_traits>

#include "core/cuda_check.hpp"

namespace gratingsim::physics {

/// What `enqueue` enqueues on `stream`, as an instantiated graph (the caller destroys it). Thread-local capture
/// mode: a call that is illegal while capturing (a synchronisation, cudaMalloc, a pageable copy) fails on this
/// thread only and invalidates the capture (then EndCapture reports it and this throws); workers on other threads
/// that share the GPU are not affected. On a throw the capture is ended, so the stream stays usable.
inline cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& enqueue) {
  GS_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // the capture's error is the exception's, not the next call's
    throw;
  }
  GS_CUDA_TRY(cudaStreamEndCapture(stream, &graph));
  // The executable graph does not need the graph it was made from.
  const std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, decltype(&cudaGraphDestroy)> owned(graph, &cudaGraphDestroy);
  cudaGraphExec_t exec = nullptr;
  GS_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
  return exec;
}

}  // namespace gratingsim::physics
