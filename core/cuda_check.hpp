#pragma once
// Check macros for CUDA runtime and cuFFT calls: a failure throws gratingsim::CudaError naming the call
// and the status, located at the check (core/error.hpp).
#include <cuda_runtime.h>
#include <cufft.h>

#include <string>

#include "core/error.hpp"

namespace gratingsim::detail {
const char* cufft_error_name(cufftResult result);
}

#define GS_CUDA_TRY(call)                                                                              \
  do {                                                                                              \
    const cudaError_t cuda_try_status_ = (call);                                                    \
    if (cuda_try_status_ != cudaSuccess)                                                            \
      throw ::gratingsim::CudaError(std::string(#call) + " failed: " + cudaGetErrorName(cuda_try_status_) + \
                                        ": " + cudaGetErrorString(cuda_try_status_),                  \
                                    std::source_location::current());                               \
  } while (0)

#define GS_CUFFT_TRY(call)                                                                             \
  do {                                                                                              \
    const cufftResult cufft_try_status_ = (call);                                                   \
    if (cufft_try_status_ != CUFFT_SUCCESS)                                                         \
      throw ::gratingsim::CudaError(                                                                \
          std::string(#call) + " failed: " + ::gratingsim::detail::cufft_error_name(cufft_try_status_),  \
          std::source_location::current());                                                         \
  } while (0)

/// After every kernel launch: launch-configuration errors surface here, asynchronous ones later.
#define GS_CUDA_CHECK_LAUNCH() GS_CUDA_TRY(cudaGetLastError())
