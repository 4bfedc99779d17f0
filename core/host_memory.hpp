#pragma once
// How much host memory this process may use: the physical memory, or less where a control group limits the
// process (a batch scheduler's job, a container). The solver's memory plans, the case file's memory check and the
// block pool read it, so that a job given 16 GB on a 512 GB node plans for 16 GB (it would be killed past it).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gratingsim {

/// Bytes of host memory this process may use: min(physical memory, its control group's limit), read once.
std::size_t host_memory_bytes();
/// Whether host_memory_bytes() is a control group's limit (below the physical memory).
bool host_memory_is_group_limit();

/// The control group's memory limit below `root` (normally /sys/fs/cgroup) for a process whose /proc/self/cgroup
/// reads `self_cgroup`: the smallest of cgroup v2's memory.max and v1's memory.limit_in_bytes, at the hierarchy's
/// root (what a container sees) and at the process's own group; nullopt where none is set ("max", absent files).
std::optional<std::size_t> control_group_memory_limit(const std::string& root, std::string_view self_cgroup);
/// A memory.max or memory.limit_in_bytes text: its number of bytes, or nullopt for "max" or anything else.
std::optional<std::size_t> parse_memory_limit(std::string_view text);

}  // namespace gratingsim
