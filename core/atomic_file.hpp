#pragma once
// Durable, atomic publication of files (POSIX): a reader sees the old file or the complete new one,
// never a part, and once a call returns the new file survives a power failure (on file systems that
// honour fsync; io/SCHEMA.md §2.3 says which do). Errors throw gratingsim::FileError naming the path,
// the step and the system's reason.
#include <filesystem>
#include <string_view>

namespace gratingsim {

/// fsync(path): its data and size reach the disk.
void sync_file(const std::filesystem::path& path);
/// fsync of the directory holding `path`, so that a rename or creation in it reaches the disk (file
/// systems that cannot sync a directory, EINVAL, have nothing to sync).
void sync_parent_directory(const std::filesystem::path& path);
/// Writes `contents` to a sibling temporary "target.tmp.PID", syncs it, renames it over `target` and
/// syncs the directory; creates target's directory if needed. The temporary is removed on failure.
void write_file_atomically(const std::filesystem::path& target, std::string_view contents);

}  // namespace gratingsim
