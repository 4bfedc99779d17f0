#pragma once
// cuBLAS, cuSOLVER and dense-matrix helpers shared by the device preconditioners (device_preconditioner.cu,
// device_sweep_preconditioner.cu). Private to physics/.
#include <cublas_v2.h>
#include <cusolverDn.h>

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

/// Every cuSOLVER call: a failure throws gratingsim::CudaError naming the call and the status, located here.
#define GS_CUSOLVER_TRY(call)                                                                          \
  do {                                                                                                 \
    const cusolverStatus_t cusolver_try_status_ = (call);                                              \
    if (cusolver_try_status_ != CUSOLVER_STATUS_SUCCESS)                                               \
      throw ::gratingsim::CudaError(std::string(#call) + " failed: cusolverStatus_t " +               \
                                        std::to_string(int(cusolver_try_status_)),                     \
                                    std::source_location::current());                                  \
  } while (0)

namespace gratingsim::physics {
namespace {

/// This thread's handle of a CUDA library for the current device, on the thread's default stream
/// (cudaStreamPerThread), created on first use and kept until the thread ends: cublasCreate and
/// cublasDestroy (cuSOLVER's likewise) allocate and free device memory, which synchronises the whole
/// device, so a handle per set-up stalled every worker sharing the GPU (app/run.cpp). Per thread because a
/// handle must not be used by two threads at once. Library: the handle type and its create (with the
/// stream set) and destroy.
template <class Library>
class ThreadHandle {
 public:
  using Handle = typename Library::Handle;
  static Handle get() {
    thread_local std::map<int, ThreadHandle> handles;
    int device = 0;
    GS_CUDA_TRY(cudaGetDevice(&device));
    auto it = handles.find(device);
    if (it == handles.end()) it = handles.try_emplace(device).first;
    return it->second.handle_;
  }
  ThreadHandle() { handle_ = Library::create(); }
  ~ThreadHandle() { Library::destroy(handle_); }  // no throw from a destructor
  ThreadHandle(const ThreadHandle&) = delete;
  ThreadHandle& operator=(const ThreadHandle&) = delete;

 private:
  Handle handle_ = nullptr;
};

struct Cublas {
  using Handle = cublasHandle_t;
  static Handle create() {
    Handle h = nullptr;
    GS_CUBLAS_TRY(cublasCreate(&h));
    GS_CUBLAS_TRY(cublasSetStream(h, cudaStreamPerThread));
    return h;
  }
  static void destroy(Handle h) { cublasDestroy(h); }
};

/// cuSOLVER's dense API.
struct Cusolver {
  using Handle = cusolverDnHandle_t;
  static Handle create() {
    Handle h = nullptr;
    GS_CUSOLVER_TRY(cusolverDnCreate(&h));
    GS_CUSOLVER_TRY(cusolverDnSetStream(h, cudaStreamPerThread));
    return h;
  }
  static void destroy(Handle h) { cusolverDnDestroy(h); }
};

using CublasHandle = ThreadHandle<Cublas>;
using CusolverHandle = ThreadHandle<Cusolver>;

/// a ← the n×n identity (column-major), one thread per element.
__global__ void set_identity(cuDoubleComplex* a, int n) {
  const std::size_t e = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < std::size_t(n) * n) a[e] = {e % (std::size_t(n) + 1) == 0 ? 1.0 : 0.0, 0.0};
}

/// inverse ← A⁻¹ from A's LU factors and pivots (cuSOLVER's getrf), by getrs on the identity; on
/// cudaStreamPerThread, asynchronous.
inline void invert_factored(cusolverDnHandle_t solver, const cuDoubleComplex* factors, int n, const int* pivots,
                            cuDoubleComplex* inverse, int* info) {
  const std::size_t elements = std::size_t(n) * n;
  set_identity<<<unsigned((elements + 255) / 256), 256, 0, cudaStreamPerThread>>>(inverse, n);
  GS_CUDA_CHECK_LAUNCH();
  GS_CUSOLVER_TRY(cusolverDnZgetrs(solver, CUBLAS_OP_N, n, n, factors, n, pivots, inverse, n, info));
}

/// cuSOLVER's getrf workspace (complex128 elements) for n×n matrices.
inline int getrf_workspace(cusolverDnHandle_t solver, cuDoubleComplex* any_matrix, int n) {
  int size = 0;
  GS_CUSOLVER_TRY(cusolverDnZgetrf_bufferSize(solver, n, n, any_matrix, n, &size));
  return std::max(size, 1);
}

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
