#pragma once
// Handles a process keeps idle for its next user of the same key, instead of destroying and making them again:
// the cuFFT plans (convolution/cufft_plans.cu) and the CUDA streams (physics/device_vector_space.cu), whose
// making and destroying synchronise with the whole device (session 35: 312 plans made and destroyed took 6.5 s, 113
// streams 0.9 s, summed over 8 workers on one H200, against a 5.7 s sweep).
//
// Policy: take() gives the newest idle handle of a key (the one most likely still in the library's and the GPU's
// caches); give() keeps a handle, and beyond `kept` idle handles the oldest goes. The caller destroys what give()
// hands back, outside the lock (destroying may wait for the device). Thread-safe: one mutex.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace gratingsim {

template <class Key, class Handle>
class IdleHandles {
 public:
  explicit IdleHandles(std::size_t kept) : kept_(kept) {}

  /// The newest idle handle of `key`, removed from the idle ones; none if there is none.
  std::optional<Handle> take(const Key& key) {
    const std::lock_guard lock(mutex_);
    const auto found = std::find_if(idle_.rbegin(), idle_.rend(), [&](const auto& entry) { return entry.first == key; });
    if (found == idle_.rend()) return std::nullopt;
    Handle taken = std::move(found->second);
    idle_.erase(std::next(found).base());
    return taken;
  }

  /// Keeps `handle` idle under `key`. Returns the handle the caller must destroy: the oldest idle one where more
  /// than `kept` are idle, `handle` itself where the list cannot grow (no memory), else none.
  std::optional<Handle> give(const Key& key, Handle handle) noexcept {
    const std::lock_guard lock(mutex_);
    try {
      idle_.emplace_back(key, handle);
    } catch (...) {
      return handle;
    }
    if (idle_.size() <= kept_) return std::nullopt;
    Handle evicted = std::move(idle_.front().second);
    idle_.erase(idle_.begin());
    return evicted;
  }

  /// Handles idle now.
  [[nodiscard]] std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return idle_.size();
  }

 private:
  std::size_t kept_;
  mutable std::mutex mutex_;
  std::vector<std::pair<Key, Handle>> idle_;  // oldest first
};

}  // namespace gratingsim
