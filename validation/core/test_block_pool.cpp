// core/block_pool.hpp: a released block of at least min_kept_bytes comes back to the next request of its exact
// size, with what was written in it; other sizes and small blocks are fresh; the kept bytes are counted and released;
// concurrent takers never share a block.
#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "core/block_pool.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;

namespace {
constexpr std::size_t big = block_pool::min_kept_bytes + 4096;
}

TEST_CASE("a released block returns to the next request of its size, as it was left", "[core][block_pool]") {
  block_pool::release();
  REQUIRE(block_pool::kept_bytes() == 0);
  std::mt19937_64 random(std::random_device{}());
  auto* block = static_cast<std::uint64_t*>(block_pool::take(big));
  const std::size_t words = big / sizeof(std::uint64_t);
  std::vector<std::uint64_t> written(words);
  for (auto& w : written) w = random();
  std::copy(written.begin(), written.end(), block);
  block_pool::give(block, big);
  CHECK(block_pool::kept_bytes() == big);
  // Another size: a fresh block, the kept one stays.
  void* other = block_pool::take(big + 8);
  CHECK(other != static_cast<void*>(block));
  CHECK(block_pool::kept_bytes() == big);
  auto* again = static_cast<std::uint64_t*>(block_pool::take(big));
  CHECK(again == block);
  CHECK(std::equal(written.begin(), written.end(), again));
  CHECK(block_pool::kept_bytes() == 0);
  block_pool::give(again, big);
  block_pool::give(other, big + 8);
  CHECK(block_pool::kept_bytes() == 2 * big + 8);
  block_pool::release();
  CHECK(block_pool::kept_bytes() == 0);
}

TEST_CASE("blocks below min_kept_bytes are not kept", "[core][block_pool]") {
  block_pool::release();
  const std::size_t small = block_pool::min_kept_bytes - 16 - std::random_device{}() % 1024;
  block_pool::give(block_pool::take(small), small);
  CHECK(block_pool::kept_bytes() == 0);
}

TEST_CASE("a vector with RecycledAllocator reuses its predecessor's block and does not initialise it", "[core][block_pool]") {
  block_pool::release();
  using Array = std::vector<std::complex<double>, RecycledAllocator<std::complex<double>>>;
  const std::size_t n = big / sizeof(std::complex<double>) + 1;
  std::mt19937_64 random(std::random_device{}());
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<std::complex<double>> written(n);
  for (auto& z : written) z = {uniform(random), uniform(random)};
  const std::complex<double>* first_data = nullptr;
  {
    Array first;
    first.resize(n);
    std::copy(written.begin(), written.end(), first.begin());
    first_data = first.data();
  }
  Array second;
  second.resize(n);  // value-initialisation writes nothing: the first's numbers are still there
  CHECK(second.data() == first_data);
  CHECK(std::equal(written.begin(), written.end(), second.begin()));
}

TEST_CASE("concurrent takers never hold the same block", "[core][block_pool]") {
  block_pool::release();
  constexpr int threads = 4, rounds = 50;
  std::vector<int> clashes(threads, 0);
  std::vector<std::thread> team;
  for (int t = 0; t < threads; ++t)
    team.emplace_back([t, &clashes] {
      // Each thread marks its block with its own tag and checks the mark survives the others' traffic.
      for (int r = 0; r < rounds; ++r) {
        auto* block = static_cast<std::uint64_t*>(block_pool::take(big));
        const std::uint64_t tag = std::uint64_t(t) << 32 | std::uint64_t(r);
        std::fill_n(block, 64, tag);
        std::this_thread::yield();
        if (std::count(block, block + 64, tag) != 64) ++clashes[std::size_t(t)];
        block_pool::give(block, big);
      }
    });
  for (auto& member : team) member.join();
  for (int t = 0; t < threads; ++t) CHECK(clashes[std::size_t(t)] == 0);
  CHECK(block_pool::kept_bytes() <= std::size_t(threads) * big);
  block_pool::release();
}
