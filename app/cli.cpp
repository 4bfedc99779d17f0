#include "app/cli.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <regex>
#include <sstream>

namespace gratingsim::app {

Options::Options(std::string_view command, std::span<const OptionSpec> specs, Args args, std::size_t max_positional) {
  const auto usage_error = [&](const std::string& what) {
    throw UsageError(std::string(command) + ": " + what + " (see '" + std::string(command) + " --help')");
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    const OptionSpec* spec = nullptr;
    std::string_view name;
    std::optional<std::string_view> inline_value;
    if (arg.size() == 2 && arg[0] == '-' && arg[1] != '-') {  // "-x"
      // "-h" is --help wherever a command has --help and no option of its own called -h.
      const auto it = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) {
        return s.alias == arg[1] ||
               (arg[1] == 'h' && s.name == "help" &&
                std::none_of(specs.begin(), specs.end(), [](const OptionSpec& t) { return t.alias == 'h'; }));
      });
      if (it == specs.end()) usage_error("unknown option '" + std::string(arg) + "'");
      spec = &*it;
      name = spec->name;
    } else if (arg.starts_with("--") && arg.size() > 2) {
      name = arg.substr(2);
      if (const auto eq = name.find('='); eq != std::string_view::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      const auto it = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.name == name; });
      if (it == specs.end()) usage_error("unknown option '--" + std::string(name) + "'");
      spec = &*it;
    } else {
      if (arg.starts_with("-") || positional_.size() == max_positional)
        usage_error("unexpected argument '" + std::string(arg) + "'");
      positional_.push_back(arg);
      continue;
    }
    if (given_.count(name)) usage_error("option '--" + std::string(name) + "' given twice");
    std::string value;
    if (spec->value.empty()) {
      if (inline_value) usage_error("option '--" + std::string(name) + "' takes no value");
    } else if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      usage_error("option '--" + std::string(name) + "' needs a value " + std::string(spec->value));
    }
    given_.emplace(name, std::move(value));
  }
}

std::optional<std::string_view> Options::value(std::string_view name) const {
  const auto it = given_.find(name);
  if (it == given_.end()) return std::nullopt;
  return it->second;
}

namespace {
/// Words of `text` in lines of at most `width` characters, each after `indent` spaces but the first.
std::string wrap(std::string_view text, std::size_t width, std::size_t indent) {
  std::string out, line;
  std::istringstream words{std::string(text)};
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + '\n' + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}
constexpr std::size_t help_width = 100;
}  // namespace

std::string format_help(std::string_view usage, std::string_view description, std::span<const OptionSpec> specs) {
  std::ostringstream os;
  os << "usage: " << wrap(usage, help_width - 7, 7) << "\n\n" << wrap(description, help_width, 0) << "\n";
  if (specs.empty()) return os.str();
  std::size_t width = 0;
  const auto left = [](const OptionSpec& s) {
    std::string text = s.alias ? std::string{'-', s.alias, ',', ' '} : std::string();
    text += "--";
    text += s.name;
    if (!s.value.empty()) (text += ' ') += s.value;
    return text;
  };
  for (const auto& s : specs) width = std::max(width, left(s).size());
  os << "\noptions:\n";
  for (const auto& s : specs) {
    const std::string l = left(s);
    os << "  " << l << std::string(width - l.size() + 2, ' ') << wrap(s.help, help_width - width - 4, width + 4)
       << '\n';
  }
  return os.str();
}

std::string user_message(const std::exception& e) {
  static const std::regex location(R"(^\S+:\d+: )");
  return std::regex_replace(std::string(e.what()), location, "", std::regex_constants::format_first_only);
}

int parse_int(std::string_view option, std::string_view value, int min, int max) {
  int v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < min || v > max)
    throw UsageError("--" + std::string(option) + " expects an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], got '" + std::string(value) + "'");
  return v;
}

double parse_positive(std::string_view option, std::string_view value) {
  const std::string text(value);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0)
    throw UsageError("--" + std::string(option) + " expects a positive number, got '" + text + "'");
  return v;
}

std::vector<std::string_view> split_list(std::string_view option, std::string_view value) {
  std::vector<std::string_view> items;
  for (std::size_t begin = 0;;) {
    const auto comma = value.find(',', begin);
    const auto item = value.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    if (item.empty()) throw UsageError("--" + std::string(option) + ": empty item in list '" + std::string(value) + "'");
    items.push_back(item);
    if (comma == std::string_view::npos) return items;
    begin = comma + 1;
  }
}

std::vector<conv::Precision> parse_precisions(std::string_view value) {
  std::vector<conv::Precision> precisions;
  if (value == "single" || value == "both") precisions.push_back(conv::Precision::single);
  if (value == "double" || value == "both") precisions.push_back(conv::Precision::double_);
  if (precisions.empty()) throw UsageError("--precision expects single, double or both, got '" + std::string(value) + "'");
  return precisions;
}

int dispatch(std::string_view program, std::string_view description, std::span<const Command> commands, Args args) {
  const auto listing = [&] {
    std::ostringstream os;
    os << "usage: " << program << " <command> [options]   (" << program << " <command> --help for its options)\n\n"
       << description << "\n\ncommands:\n";
    std::size_t width = 0;
    for (const auto& c : commands) width = std::max(width, c.name.size());
    for (const auto& c : commands)
      os << "  " << c.name << std::string(width - c.name.size() + 2, ' ') << c.summary << '\n';
    return os.str();
  };
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << listing();
    return 0;
  }
  if (args.empty()) throw UsageError(std::string(program) + ": missing command\n" + listing());
  const auto command =
      std::find_if(commands.begin(), commands.end(), [&](const Command& c) { return c.name == args[0]; });
  if (command == commands.end()) {
    std::string names;
    for (const auto& c : commands) names += (names.empty() ? "" : ", ") + std::string(c.name);
    throw UsageError(std::string(program) + ": unknown command '" + std::string(args[0]) + "' (expected " + names +
                     "; see '" + std::string(program) + " --help')");
  }
  return command->run(args.subspan(1));
}

}  // namespace gratingsim::app
