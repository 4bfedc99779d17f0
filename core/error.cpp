#include "core/error.hpp"

#include <regex>
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

std::string user_message(const std::exception& e) {
  static const std::regex location(R"(^\S+:\d+: )");
  return std::regex_replace(std::string(e.what()), location, "", std::regex_constants::format_first_only);
}

}  // namespace gratingsim
