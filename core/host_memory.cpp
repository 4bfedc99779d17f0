#include "core/host_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

namespace gratingsim {
namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::size_t physical_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : std::size_t(16) << 30;
}

struct HostMemory {
  std::size_t bytes;
  bool group_limit;
};

const HostMemory& host_memory() {
  static const HostMemory memory = [] {
    const std::size_t physical = physical_bytes();
    const std::optional<std::string> self = read_file("/proc/self/cgroup");
    const std::optional<std::size_t> limit = control_group_memory_limit("/sys/fs/cgroup", self ? *self : "");
    return limit && *limit < physical ? HostMemory{*limit, true} : HostMemory{physical, false};
  }();
  return memory;
}

}  // namespace

std::optional<std::size_t> parse_memory_limit(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;  // "max"
  return value;
}

std::optional<std::size_t> control_group_memory_limit(const std::string& root, std::string_view self_cgroup) {
  // The process's own group per hierarchy: "0::/path" (v2), "N:memory:/path" or "N:...,memory,...:/path" (v1).
  std::string v2_path, v1_path;
  std::istringstream lines{std::string(self_cgroup)};
  for (std::string line; std::getline(lines, line);) {
    const auto first = line.find(':'), second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) v2_path = path;
    if (("," + controllers + ",").find(",memory,") != std::string::npos) v1_path = path;
  }
  std::vector<std::string> candidates{root + "/memory.max", root + "/memory/memory.limit_in_bytes"};
  if (!v2_path.empty() && v2_path != "/") candidates.push_back(root + v2_path + "/memory.max");
  if (!v1_path.empty() && v1_path != "/") candidates.push_back(root + "/memory" + v1_path + "/memory.limit_in_bytes");
  std::optional<std::size_t> limit;
  for (const std::string& file : candidates)
    if (const auto text = read_file(file))
      if (const auto value = parse_memory_limit(*text); value && *value > 0) limit = std::min(limit.value_or(*value), *value);
  return limit;
}

std::size_t host_memory_bytes() { return host_memory().bytes; }
bool host_memory_is_group_limit() { return host_memory().group_limit; }

}  // namespace gratingsim
