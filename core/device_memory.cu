// Device and pinned host memory for core/device_buffer.hpp (why they avoid cudaMalloc, cudaFree and
// cudaMallocHost is said there).
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

#include "core/device_buffer.hpp"

namespace gratingsim::detail {
namespace {

/// Freed pool memory kept for the next batch's allocations instead of being returned to the driver at
/// every synchronisation (the pool's default threshold, 0). Small enough not to matter for the
/// solver's free-memory check (physics/solver.cpp), large enough for the small batches that share a GPU.
constexpr std::uint64_t pool_cache_bytes = 256ull << 20;

/// Per device ordinal below 64 (devices are few; beyond: no pool): whether its stream-ordered pool is
/// used, decided once (pool_ready) and read by device_free, so that memory is always freed the way it
/// was allocated.
constexpr int pool_devices = 64;
std::once_flag pool_flags[pool_devices];
std::atomic<bool> pool_used[pool_devices];

/// Whether the current device's stream-ordered pool is used; on first use per device its cache
/// threshold is set.
bool pool_ready() {
  int device = 0;
  GS_CUDA_TRY(cudaGetDevice(&device));
  if (device < 0 || device >= pool_devices) return false;
  std::call_once(pool_flags[device], [device] {
    int pools = 0;
    if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess || !pools) return;
    cudaMemPool_t pool = nullptr;
    GS_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, device));
    std::uint64_t threshold = pool_cache_bytes;
    GS_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    pool_used[device] = true;
  });
  return pool_used[device];
}

/// Freed pinned blocks by size, for reuse (pinned allocation is slow and synchronises the device).
/// Process-wide: a block may be freed on another thread than the one that allocated it.
struct PinnedCache {
  std::mutex mutex;
  std::multimap<std::size_t, void*> free_blocks;
  ~PinnedCache() {
    for (auto& [bytes, pointer] : free_blocks) cudaFreeHost(pointer);  // at exit: errors ignored
  }
};
PinnedCache& pinned_cache() {
  static PinnedCache cache;
  return cache;
}

}  // namespace

void* device_allocate(std::size_t bytes) {
  void* pointer = nullptr;
  if (pool_ready()) {
    GS_CUDA_TRY(cudaMallocAsync(&pointer, bytes, cudaStreamPerThread));
    GS_CUDA_TRY(cudaStreamSynchronize(cudaStreamPerThread));  // usable by any stream from here on
  } else {
    GS_CUDA_TRY(cudaMalloc(&pointer, bytes));
  }
  return pointer;
}

void device_free(void* pointer) noexcept {
  if (!pointer) return;
  // pointer came from device_allocate on this device, which decided pool_used; a failure here means a
  // dead context: nothing to do in a destructor.
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess && device >= 0 && device < pool_devices && pool_used[device])
    cudaFreeAsync(pointer, cudaStreamPerThread);
  else
    cudaFree(pointer);
}

void* pinned_allocate(std::size_t bytes) {
  PinnedCache& cache = pinned_cache();
  {
    const std::lock_guard lock(cache.mutex);
    if (const auto it = cache.free_blocks.find(bytes); it != cache.free_blocks.end()) {
      void* pointer = it->second;
      cache.free_blocks.erase(it);
      return pointer;
    }
  }
  void* pointer = nullptr;
  GS_CUDA_TRY(cudaMallocHost(&pointer, bytes));
  return pointer;
}

void pinned_free(void* pointer, std::size_t bytes) noexcept {
  if (!pointer) return;
  PinnedCache& cache = pinned_cache();
  try {
    const std::lock_guard lock(cache.mutex);
    cache.free_blocks.emplace(bytes, pointer);
  } catch (...) {
    cudaFreeHost(pointer);
  }
}

}  // namespace gratingsim::detail
