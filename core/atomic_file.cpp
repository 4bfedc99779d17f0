#include "core/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include "core/error.hpp"

namespace gratingsim {
namespace {

void sync_path(const std::filesystem::path& path, int flags, bool directory) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0 || (::fsync(fd) != 0 && !(directory && errno == EINVAL))) {
    const int reason = errno;
    if (fd >= 0) ::close(fd);
    throw FileError("cannot sync " + path.string() + ": " + std::strerror(reason));
  }
  ::close(fd);
}

}  // namespace

void sync_file(const std::filesystem::path& path) { sync_path(path, O_RDONLY, false); }

void sync_parent_directory(const std::filesystem::path& path) {
  const std::filesystem::path parent = path.parent_path();
  sync_path(parent.empty() ? std::filesystem::path(".") : parent, O_RDONLY | O_DIRECTORY, true);
}

void write_file_atomically(const std::filesystem::path& target, std::string_view contents) {
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  std::filesystem::path temporary = target;
  temporary += ".tmp." + std::to_string(::getpid());
  try {
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out << contents;
      out.close();
      if (!out) throw FileError("cannot write " + temporary.string());
    }
    sync_file(temporary);
    std::filesystem::rename(temporary, target, ec);
    if (ec) throw FileError("cannot rename " + temporary.string() + " to " + target.string() + ": " + ec.message());
  } catch (const FileError&) {
    std::filesystem::remove(temporary, ec);
    throw;
  }
  sync_parent_directory(target);
}

}  // namespace gratingsim
