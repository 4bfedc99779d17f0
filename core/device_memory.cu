// Device and pinned host memory for core/device_buffer.hpp (why they avoid cudaMalloc, cudaFree and
// cudaMallocHost is said there).
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

/// Whether the current device has a stream-ordered pool; on first use per device its cache threshold
/// is set. Devices are few: one flag per device ordinal below 64, else no pool.
bool pool_ready() {
  static std::once_flag flags[64];
  static bool supported[64] = {};
  int device = 0;
  GS_CUDA_TRY(cudaGetDevice(&device));
  if (device < 0 || device >= 64) return false;
  std::call_once(flags[device], [device] {
    int pools = 0;
    if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess || !pools) return;
    cudaMemPool_t pool = nullptr;
    GS_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, device));
    std::uint64_t threshold = pool_cache_bytes;
    GS_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    supported[device] = true;
  });
  return supported[device];
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
  // The pool is known to be set up (pointer came from device_allocate on this process's devices); a
  // failure here means a dead context: nothing to do in a destructor.
  int device = 0, pools = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess && pools)
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
