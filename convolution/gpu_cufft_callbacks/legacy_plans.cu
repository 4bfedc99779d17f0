// gpu-cufft-callbacks' legacy route (legacy_plans.hpp): the callbacks of callbacks.cuh as legacy
// (separately compiled) cuFFT callbacks, and the plans that carry them, on this library's own static cuFFT.
// Built with relocatable device code and device-linked against libcufft_static.a (convolution/CMakeLists.txt).
#include <cuda_runtime.h>
#include <cufftXt.h>

#include <vector>

#include "convolution/gpu_cufft_callbacks/callbacks.cuh"
#include "convolution/gpu_cufft_callbacks/legacy_plans.hpp"

namespace {
using namespace gratingsim::conv::detail::callbacks;

__device__ cufftComplex pad_load_c(void*, size_t offset, void* info, void*) {
  return pad_load<cufftComplex>(offset, params(info));
}
__device__ cufftDoubleComplex pad_load_z(void*, size_t offset, void* info, void*) {
  return pad_load<cufftDoubleComplex>(offset, params(info));
}
__device__ cufftComplex products_load_c(void*, size_t offset, void* info, void*) {
  return products_load<cufftComplex>(offset, params(info));
}
__device__ cufftDoubleComplex products_load_z(void*, size_t offset, void* info, void*) {
  return products_load<cufftDoubleComplex>(offset, params(info));
}
__device__ void extract_store_c(void*, size_t offset, cufftComplex element, void* info, void*) {
  extract_store(offset, element, params(info));
}
__device__ void extract_store_z(void*, size_t offset, cufftDoubleComplex element, void* info, void*) {
  extract_store(offset, element, params(info));
}

// The callbacks' device addresses, read by the host (cudaMemcpyFromSymbol) for cufftXtSetCallback.
__device__ cufftCallbackLoadC pad_load_c_address = pad_load_c;
__device__ cufftCallbackLoadZ pad_load_z_address = pad_load_z;
__device__ cufftCallbackLoadC products_load_c_address = products_load_c;
__device__ cufftCallbackLoadZ products_load_z_address = products_load_z;
__device__ cufftCallbackStoreC extract_store_c_address = extract_store_c;
__device__ cufftCallbackStoreZ extract_store_z_address = extract_store_z;

template <class Address>
int attach(cufftHandle plan, const Address& symbol, cufftXtCallbackType type, void* caller_info) {
  void* address = nullptr;
  if (cudaMemcpyFromSymbol(&address, symbol, sizeof address) != cudaSuccess) return legacy_cuda_error;
  return int(cufftXtSetCallback(plan, &address, type, &caller_info));
}

int attach_callbacks(cufftHandle plan, bool z, int role, void* info) {
  if (role == legacy_forward_pad)
    return z ? attach(plan, pad_load_z_address, CUFFT_CB_LD_COMPLEX_DOUBLE, info)
             : attach(plan, pad_load_c_address, CUFFT_CB_LD_COMPLEX, info);
  if (const int r = z ? attach(plan, products_load_z_address, CUFFT_CB_LD_COMPLEX_DOUBLE, info)
                      : attach(plan, products_load_c_address, CUFFT_CB_LD_COMPLEX, info);
      r != 0)
    return r;
  return z ? attach(plan, extract_store_z_address, CUFFT_CB_ST_COMPLEX_DOUBLE, info)
           : attach(plan, extract_store_c_address, CUFFT_CB_ST_COMPLEX, info);
}
}  // namespace

extern "C" {

int gratingsim_legacy_callbacks_plan(int l1, int l2, long long batch, int double_precision, int role,
                                     void* caller_info, int* handle) {
  std::vector<long long> lengths;
  if (l1 > 1) lengths.push_back(l1);
  if (l2 > 1) lengths.push_back(l2);
  if (lengths.empty() || batch <= 0) return int(CUFFT_INVALID_VALUE);
  cufftHandle plan;
  if (const cufftResult r = cufftCreate(&plan); r != CUFFT_SUCCESS) return int(r);
  const long long distance = (long long)l1 * l2;
  std::size_t work_bytes = 0;
  int result = int(cufftMakePlanMany64(plan, int(lengths.size()), lengths.data(), nullptr, 1, distance, nullptr, 1,
                                       distance, double_precision ? CUFFT_Z2Z : CUFFT_C2C, batch, &work_bytes));
  if (result == 0) result = attach_callbacks(plan, double_precision != 0, role, caller_info);
  if (result != 0) {
    cufftDestroy(plan);
    return result;
  }
  *handle = plan;
  return 0;
}

int gratingsim_legacy_callbacks_execute(int handle, int double_precision, int role, void* data, void* stream) {
  if (const cufftResult r = cufftSetStream(handle, static_cast<cudaStream_t>(stream)); r != CUFFT_SUCCESS)
    return int(r);
  const int direction = role == legacy_forward_pad ? CUFFT_FORWARD : CUFFT_INVERSE;
  return double_precision ? int(cufftExecZ2Z(handle, static_cast<cufftDoubleComplex*>(data),
                                             static_cast<cufftDoubleComplex*>(data), direction))
                          : int(cufftExecC2C(handle, static_cast<cufftComplex*>(data), static_cast<cufftComplex*>(data),
                                             direction));
}

int gratingsim_legacy_callbacks_destroy(int handle) { return int(cufftDestroy(handle)); }
}
