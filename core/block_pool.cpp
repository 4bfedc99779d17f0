#include "core/block_pool.hpp"

#include <cstdlib>
#include <list>
#include <mutex>

#include "core/host_memory.hpp"

namespace gratingsim::block_pool {
namespace {

struct Kept {
  void* block;
  std::size_t bytes;
};

struct Pool {
  std::mutex mutex;
  std::list<Kept> kept;  // oldest first
  std::size_t bytes = 0;
  std::size_t limit = 0;
  Pool() : limit(host_memory_bytes() / 4) {}
  /// Frees the oldest kept blocks until `bytes` more fit within the limit.
  void evict_for(std::size_t more) {
    while (!kept.empty() && bytes + more > limit) {
      std::free(kept.front().block);
      bytes -= kept.front().bytes;
      kept.pop_front();
    }
  }
  void free_all() {
    for (const Kept& k : kept) std::free(k.block);
    kept.clear();
    bytes = 0;
  }
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: vectors of static storage may release blocks at exit
  return *p;
}

}  // namespace

void* take(std::size_t bytes) {
  if (bytes >= min_kept_bytes) {
    Pool& p = pool();
    const std::lock_guard lock(p.mutex);
    for (auto it = p.kept.begin(); it != p.kept.end(); ++it)
      if (it->bytes == bytes) {
        void* block = it->block;
        p.bytes -= bytes;
        p.kept.erase(it);
        return block;
      }
    p.evict_for(bytes);  // a fresh block: the kept ones and it within the limit
  }
  if (void* block = std::malloc(bytes == 0 ? 1 : bytes)) return block;
  throw std::bad_alloc();
}

void give(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  Pool& p = pool();
  if (bytes < min_kept_bytes || bytes > p.limit) {
    std::free(block);
    return;
  }
  const std::lock_guard lock(p.mutex);
  p.evict_for(bytes);
  try {
    p.kept.push_back({block, bytes});
    p.bytes += bytes;
  } catch (...) {  // no memory for the list's node: free the block instead
    std::free(block);
  }
}

std::size_t kept_bytes() noexcept {
  Pool& p = pool();
  const std::lock_guard lock(p.mutex);
  return p.bytes;
}

void release() noexcept {
  Pool& p = pool();
  const std::lock_guard lock(p.mutex);
  p.free_all();
}

}  // namespace gratingsim::block_pool
