#pragma once
// Check macros for CUDA runtime and cuFFT calls: a failure throws gratingsim::CudaError with file:line.
#include <cuda_runtime.h>
#include <cufft.h>

#include <string>

#include "convolution/error.hpp"

namespace gratingsim::detail {
const char* cufft_error_name(cufftResult result);
}

#define CUDA_TRY(call)                                                                              \
  do {                                                                                              \
    const cudaError_t cuda_try_status_ = (call);                                                    \
    if (cuda_try_status_ != cudaSuccess)                                                            \
      ::gratingsim::detail::throw_located<::gratingsim::CudaError>(                                 \
          __FILE__, __LINE__,                                                                       \
          std::string(#call) + " failed: " + cudaGetErrorName(cuda_try_status_) + ": " +           \
              cudaGetErrorString(cuda_try_status_));                                                \
  } while (0)

#define CUFFT_TRY(call)                                                                             \
  do {                                                                                              \
    const cufftResult cufft_try_status_ = (call);                                                   \
    if (cufft_try_status_ != CUFFT_SUCCESS)                                                         \
      ::gratingsim::detail::throw_located<::gratingsim::CudaError>(                                 \
          __FILE__, __LINE__,                                                                       \
          std::string(#call) + " failed: " + ::gratingsim::detail::cufft_error_name(cufft_try_status_)); \
  } while (0)

/// After every kernel launch: launch-configuration errors surface here, asynchronous ones later.
#define CUDA_CHECK_LAUNCH() CUDA_TRY(cudaGetLastError())
