#include "core/error.hpp"

#include <string_view>

#include "core/config.hpp"

namespace gratingsim {

std::string source_position(const Error& error) {
  const std::source_location& where = error.where();
  if (where.line() == 0) return "";
  std::string_view file = where.file_name();
  constexpr std::string_view root = GRATINGSIM_SOURCE_DIR "/";
  if (file.starts_with(root)) file.remove_prefix(root.size());
  return std::string(file) + ":" + std::to_string(where.line());
}

}  // namespace gratingsim
