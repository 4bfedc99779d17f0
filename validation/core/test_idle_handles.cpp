// core/idle_handles.hpp: take() gives the newest idle handle of its key and nothing of another key; give() hands
// back the oldest beyond `kept`; concurrent users never hold one handle at once, and no handle is lost or doubled.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/idle_handles.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/random.hpp"

using namespace gratingsim;

TEST_CASE("idle handles: the newest of the key first, the oldest evicted beyond the bound", "[core][idle_handles]") {
  std::uniform_int_distribution<int> draw(1, 1 << 30);
  const int key = draw(test::rng()), other = key + 1;
  std::vector<long> handles(6);
  for (long& h : handles) h = draw(test::rng());
  IdleHandles<int, long> idle(4);
  CHECK_FALSE(idle.take(key).has_value());
  for (std::size_t i = 0; i < 4; ++i) CHECK_FALSE(idle.give(key, handles[i]).has_value());
  CHECK(idle.size() == 4);
  // Beyond 4 idle ones the oldest goes, in the order they were given.
  CHECK(idle.give(other, handles[4]) == std::optional<long>(handles[0]));
  CHECK(idle.give(key, handles[5]) == std::optional<long>(handles[1]));
  CHECK(idle.size() == 4);
  // Newest of the key first; the other key's handle only under its key.
  CHECK(idle.take(key) == std::optional<long>(handles[5]));
  CHECK(idle.take(key) == std::optional<long>(handles[3]));
  CHECK(idle.take(key) == std::optional<long>(handles[2]));
  CHECK_FALSE(idle.take(key).has_value());
  CHECK(idle.take(other) == std::optional<long>(handles[4]));
  CHECK(idle.size() == 0);
}

TEST_CASE("idle handles: concurrent users never share one, and none is lost or doubled", "[core][idle_handles]") {
  // Each thread takes a handle of a random key (or makes a new one), marks it held, checks nobody else holds it,
  // and gives it back; evicted handles are recorded. At the end every handle made is idle or evicted, once.
  constexpr int threads = 8, rounds = 20000, keys = 3;
  constexpr std::size_t kept = 5;
  IdleHandles<int, int> idle(kept);
  std::atomic<int> next{0};
  std::vector<std::atomic<int>> holders(threads * rounds);
  std::vector<std::vector<int>> evicted(threads);
  std::atomic<bool> shared{false};
  std::vector<std::thread> workers;
  const unsigned seed = unsigned(test::rng()());
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::mt19937 random(seed + unsigned(t));
      for (int r = 0; r < rounds; ++r) {
        const int key = int(random() % keys);
        const std::optional<int> taken = idle.take(key);
        const int handle = taken ? *taken : next++;
        if (holders[std::size_t(handle)].fetch_add(1) != 0) shared = true;
        holders[std::size_t(handle)].fetch_sub(1);
        if (const std::optional<int> out = idle.give(key, handle)) evicted[std::size_t(t)].push_back(*out);
      }
    });
  for (std::thread& w : workers) w.join();
  CHECK_FALSE(shared.load());
  std::vector<int> accounted;
  for (const auto& e : evicted) accounted.insert(accounted.end(), e.begin(), e.end());
  const std::size_t idle_now = idle.size();
  CHECK(idle_now <= kept);
  for (int key = 0; key < keys; ++key)
    while (const std::optional<int> h = idle.take(key)) accounted.push_back(*h);
  CHECK(accounted.size() == std::size_t(next.load()));
  CHECK(std::set<int>(accounted.begin(), accounted.end()).size() == accounted.size());
}
