#pragma once
// RAII device memory for plans and tests. Allocation happens at construction only.
#include <cstddef>
#include <span>
#include <utility>

#include "core/cuda_check.hpp"

namespace gratingsim {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : size_(count) {
    if (count) GS_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
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
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);  // no throw from a destructor; a failure here means a dead context
  }

  [[nodiscard]] T* data() { return data_; }
  [[nodiscard]] const T* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::size_t bytes() const { return size_ * sizeof(T); }

  /// Synchronous copies (cudaMemcpy: waits for all prior work on the legacy default stream). upload()
  /// also waits for its own transfer: from pageable memory cudaMemcpy may return once the data are
  /// staged, before the DMA lands, and work enqueued next on a non-blocking stream does not wait for
  /// the legacy stream (a kernel could read the old contents, or its output be overwritten by the
  /// late copy: seen as a poisoned test output under a loaded GPU).
  void upload(std::span<const T> host) {
    GS_EXPECTS(host.size() == size_, "upload size mismatch");
    GS_CUDA_TRY(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamLegacy));
  }
  void download(std::span<T> host) const {
    GS_EXPECTS(host.size() == size_, "download size mismatch");
    GS_CUDA_TRY(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace gratingsim
