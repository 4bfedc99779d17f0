#pragma once
// Large host blocks kept after they are freed, for the next allocation of the same size, and an allocator
// that takes its memory from them.
//
// Why: the host sweep preconditioner's per-slice arrays (physics/sweep_preconditioner.hpp) are sized anew for
// every wavelength batch, about 1 GB a batch on configs/default.yaml, the same sizes batch after batch. Freed,
// such blocks go back to the kernel (glibc maps blocks above 32 MB at most, never reusing them), so every batch
// faulted all its pages in again: 8.4 M minor faults, 14 s of system time against 58 s of user time on the 2 cores
// of the dev machine (session 33). A kept block is already mapped.
//
// Policy: blocks of at least min_kept_bytes are kept on release, by exact size (a batch's sizes repeat in the next
// batch of its shape; Richardson's two slicings are two shapes, solved in turn), while the kept total stays within
// a quarter of the host memory the process may use (core/host_memory.hpp); a request no kept block matches first frees the oldest until the kept blocks
// and the new one fit within that limit. So a process holds at most that quarter more than it uses (the solver's
// memory plans count what a batch uses, not what is kept; a host sweep may take at most half the memory while it
// is built, physics/solver.cpp). A quarter keeps both slicings of si_lines_metrology.yaml (1.1 + 2.2 GB) on the
// 23 GiB dev machine; an eighth did not, and the two evicted each other. Thread-safe (one mutex; a few calls per
// batch).
#include <cstddef>

#include "core/zeroed_allocator.hpp"

namespace gratingsim {

namespace block_pool {
/// Smallest block the pool keeps; below it malloc's own free lists serve.
inline constexpr std::size_t min_kept_bytes = std::size_t(1) << 20;
/// A block of `bytes` (a kept one of exactly that size, or fresh from malloc, whose pages are faulted in when
/// first written); its contents are unspecified. Throws std::bad_alloc.
void* take(std::size_t bytes);
/// Keeps `block` (from take, of `bytes`) for a later take, or frees it.
void give(void* block, std::size_t bytes) noexcept;
/// Bytes kept now.
std::size_t kept_bytes() noexcept;
/// Frees every kept block.
void release() noexcept;
}  // namespace block_pool

/// Blocks from block_pool: a kept one, with a previous batch's numbers, or a fresh one.
struct PooledBlocks {
  static void* take(std::size_t bytes) { return block_pool::take(bytes); }
  static void give(void* block, std::size_t bytes) noexcept { block_pool::give(block, bytes); }
};

/// `std::vector<T, RecycledAllocator<T>> v; v.resize(n)` holds n elements of unspecified value (a previous batch's
/// numbers where the block was kept). For arrays of plain numbers every element of which is written before it is
/// read (each page first touched by the thread that fills it where the block is fresh).
template <class T>
using RecycledAllocator = BlockAllocator<T, PooledBlocks>;

}  // namespace gratingsim
