// Device presence for the GPU backends.
#include "convolution/backends.hpp"
#include "core/cuda_check.hpp"

namespace gratingsim::conv::detail {
bool cuda_device_present() {
  int count = 0;
  // No driver or no device both read as "absent": the GPU backends are then unavailable, not an error.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error state of the failed query
    return false;
  }
  return count > 0;
}
}  // namespace gratingsim::conv::detail
