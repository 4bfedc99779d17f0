#pragma once
// cuBLAS and dense-matrix helpers shared by the device preconditioners (device_preconditioner.cu,
// device_sweep_preconditioner.cu). Private to physics/.
#include <cublas_v2.h>

#include <algorithm>
#include <complex>
#include <map>
#include <span>
#include <source_location>
#include <string>
#include <vector>

#include "convolution/convolution.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/error.hpp"

/// Every cuBLAS call: a failure throws gratingsim::CudaError naming the call and the status, located here.
#define GS_CUBLAS_TRY(call)                                                                        \
  do {                                                                                             \
    const cublasStatus_t cublas_try_status_ = (call);                                              \
    if (cublas_try_status_ != CUBLAS_STATUS_SUCCESS)                                               \
      throw ::gratingsim::CudaError(std::string(#call) + " failed: " + cublasGetStatusName(cublas_try_status_) + \
                                        ": " + cublasGetStatusString(cublas_try_status_),          \
                                    std::source_location::current());                              \
  } while (0)

namespace gratingsim::physics {
namespace {

/// This thread's cuBLAS handle for the current device, on the thread's default stream
/// (cudaStreamPerThread), created on first use and kept until the thread ends: cublasCreate and
/// cublasDestroy allocate and free device memory, which synchronises the whole device, so a handle per
/// set-up stalled every worker sharing the GPU (app/run.cpp). Per thread because a handle must not be used
/// by two threads at once.
class CublasHandle {
 public:
  static cublasHandle_t get() {
    thread_local std::map<int, CublasHandle> handles;
    int device = 0;
    GS_CUDA_TRY(cudaGetDevice(&device));
    auto it = handles.find(device);
    if (it == handles.end()) it = handles.try_emplace(device).first;
    return it->second.handle_;
  }
  CublasHandle() {
    GS_CUBLAS_TRY(cublasCreate(&handle_));
    GS_CUBLAS_TRY(cublasSetStream(handle_, cudaStreamPerThread));
  }
  ~CublasHandle() { cublasDestroy(handle_); }  // no throw from a destructor
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

 private:
  cublasHandle_t handle_ = nullptr;
};

/// out[i] = in[i] rounded to Real.
template <class V>
__global__ void round_to(const double2* in, V* out, std::size_t count) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = V{decltype(V::x)(in[i].x), decltype(V::y)(in[i].y)};
}

/// Complex128 values from the host in a new device buffer (std::complex<double> and double2 share their
/// layout); the copy is DeviceBuffer's, on the calling thread's default stream.
inline DeviceBuffer<double2> upload_complex128(std::span<const std::complex<double>> values) {
  DeviceBuffer<double2> buffer(values.size());
  buffer.upload(std::span(reinterpret_cast<const double2*>(values.data()), values.size()));
  return buffer;
}

/// A pattern's terms as kernel arguments: (output or D's axis, input, kernel), at most 18 of a kind (the 2D
/// tilted pattern's, docs/normal-vector.md §3).
struct DeviceTerms {
  static constexpr int capacity = 18;
  int count = 0;
  int output[capacity], input[capacity], kernel[capacity];
};

inline DeviceTerms device_terms(const std::vector<conv::Term>& terms) {
  GS_EXPECTS(terms.size() <= std::size_t(DeviceTerms::capacity), "device preconditioner: more than 18 pattern terms");
  DeviceTerms t;
  for (const conv::Term& term : terms) {
    t.output[t.count] = term.output;
    t.input[t.count] = term.input;
    t.kernel[t.count++] = term.kernel;
  }
  return t;
}

}  // namespace
}  // namespace gratingsim::physics
