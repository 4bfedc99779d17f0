#pragma once
// RAII device and pinned host memory for plans, problems and tests. Allocation happens at construction
// only (set-up), never inside an execute().
//
// Why not cudaMalloc/cudaFree: both synchronise implicitly with every stream of the device (CUDA C++
// Programming Guide, "Implicit Synchronization"), and so does pinned host allocation. Where several
// workers share one GPU, each on its own stream (app/run.cpp), every allocation in one worker's set-up
// then waited for all the others' in-flight Krylov iterations. Device memory therefore comes from the
// device's stream-ordered pool (cudaMallocAsync/cudaFreeAsync on the calling thread's default stream,
// cudaStreamPerThread), which waits for nothing but that stream; pinned host memory from a process-wide
// free list that keeps freed blocks for reuse (core/cuda_check.cu). Devices without memory pools fall
// back to cudaMalloc/cudaFree.
//
// Ownership rule that replaces cudaFree's implicit synchronisation: a buffer is freed in the order of
// the freeing thread's default stream only, so its owner must have waited for every other stream that
// used it before destroying it (DiscreteProblem, DeviceStream, the device vector space and the Arnoldi
// state do: their destructors synchronise).
#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>

#include "core/cuda_check.hpp"

namespace gratingsim {
namespace detail {
/// `bytes` of device memory on the current device, usable by any stream once this returns (it waits
/// for the calling thread's default stream, which set-up code alone uses). Throws CudaError.
void* device_allocate(std::size_t bytes);
/// Returns memory of device_allocate (nullptr: nothing). No throw.
void device_free(void* pointer) noexcept;
/// `bytes` of page-locked host memory (reused from earlier frees of the same size where possible).
void* pinned_allocate(std::size_t bytes);
void pinned_free(void* pointer, std::size_t bytes) noexcept;
}  // namespace detail

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : size_(count) {
    if (count) data_ = static_cast<T*>(detail::device_allocate(count * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~DeviceBuffer() { detail::device_free(data_); }

  [[nodiscard]] T* data() { return data_; }
  [[nodiscard]] const T* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::size_t bytes() const { return size_ * sizeof(T); }

  /// Synchronous copies on the calling thread's default stream (cudaStreamPerThread): each returns
  /// once its transfer has landed, after that stream's earlier work (set-up kernels enqueued there),
  /// and waits for no other stream.
  void upload(std::span<const T> host) {
    GS_EXPECTS(host.size() == size_, "upload size mismatch");
    GS_CUDA_TRY(cudaMemcpyAsync(data_, host.data(), bytes(), cudaMemcpyHostToDevice, cudaStreamPerThread));
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));
  }
  void download(std::span<T> host) const {
    GS_EXPECTS(host.size() == size_, "download size mismatch");
    GS_CUDA_TRY(cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, cudaStreamPerThread));
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Page-locked host memory (cudaMemcpyAsync to and from it is truly asynchronous).
template <class T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t count)
      : data_(static_cast<T*>(detail::pinned_allocate(std::max<std::size_t>(count, 1) * sizeof(T)))), size_(count) {}
  ~PinnedBuffer() { detail::pinned_free(data_, std::max<std::size_t>(size_, 1) * sizeof(T)); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  [[nodiscard]] T* data() { return data_; }
  [[nodiscard]] const T* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace gratingsim
