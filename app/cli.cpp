#include "app/cli.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <regex>
#include <sstream>

#include "app/ranks.hpp"

namespace gratingsim::app {

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

/// "usage: <usage>\n\n<description>\n\noptions:\n  -o, --name VALUE  help\n..." for a command that runs;
/// "usage: <path> <command> [options] ...\n\n<description>\n\ncommands:\n  name  summary\n..." for a group.
class Help : public CLI::FormatterBase {
 public:
  explicit Help(const Command& command) : command_(command) {}
  std::string make_help(const CLI::App*, std::string path, CLI::AppFormatMode) const override {
    std::ostringstream os;
    const auto rows = [&](const std::vector<std::pair<std::string, std::string_view>>& rows) {
      std::size_t width = 0;
      for (const auto& [left, right] : rows) width = std::max(width, left.size());
      for (const auto& [left, right] : rows)
        os << "  " << left << std::string(width - left.size() + 2, ' ') << wrap(right, help_width - width - 4, width + 4)
           << '\n';
    };
    if (!command_.commands.empty()) {
      os << "usage: " << path << " <command> [options]   (" << path << " <command> --help for its options)\n\n"
         << wrap(command_.description, help_width, 0) << "\n\ncommands:\n";
      std::vector<std::pair<std::string, std::string_view>> commands;
      for (const Command* c : command_.commands) commands.emplace_back(c->name, c->summary);
      rows(commands);
      return os.str();
    }
    os << "usage: " << wrap(command_.usage, help_width - 7, 7) << "\n\n"
       << wrap(command_.description, help_width, 0) << "\n\noptions:\n";
    std::vector<std::pair<std::string, std::string_view>> options;
    for (const OptionSpec& s : command_.options) {
      if (s.hidden) continue;
      std::string left = s.alias ? std::string{'-', s.alias, ',', ' '} : std::string();
      (left += "--") += s.name;
      if (!s.value.empty()) (left += ' ') += s.value;
      options.emplace_back(std::move(left), s.help);
    }
    options.emplace_back("-h, --help", "show this help");
    rows(options);
    return os.str();
  }

 private:
  const Command& command_;
};

/// Gives `app` the options and subcommands of `command`, and its help.
void configure(CLI::App& app, const Command& command) {
  app.formatter(std::make_shared<Help>(command));
  app.require_subcommand(0, 1);  // "bench conv solve" is not two commands in a row
  for (const OptionSpec& s : command.options) {
    CLI::Option* option = app.add_option((s.alias ? std::string{'-', s.alias, ','} : "") + "--" + std::string(s.name));
    if (s.value.empty())
      option->type_size(0)->disable_flag_override();  // a flag: "--quiet=false" is refused, not "quiet"
    else
      option->type_name(std::string(s.value));
  }
  if (command.max_positional > 0)  // more than one: all taken here, the excess refused by run_command_line
    app.add_option(std::string(command.positional))->allow_extra_args(command.max_positional > 1);
  for (const Command* c : command.commands) configure(*app.add_subcommand(std::string(c->name)), *c);
}

/// CLI11's "--output: 1 required OUT.h5 missing" and "--quiet was given a disallowed flag override"
/// in the project's words; other CLI11 messages as they are.
std::string usage_message(const std::string& cli11) {
  static const std::regex missing(R"(^(\S+): \d+ required (.*) missing$)");
  static const std::regex flag(R"(^-*(\S+) was given a disallowed flag override$)");
  return std::regex_replace(std::regex_replace(cli11, missing, "option '$1' needs a value $2"), flag,
                            "option '--$1' takes no value");
}

/// Refuses the command line: "PATH: WHAT (expected EXPECTED; see 'PATH --help')". Every rank of an
/// MPI launch parses the same command line: rank 0 alone says what is wrong.
[[noreturn]] void fail(const std::string& path, const std::string& what, const std::string& expected = "") {
  const std::string message =
      path + ": " + what + " (" + (expected.empty() ? "" : "expected " + expected + "; ") + "see '" + path + " --help')";
  if (detect_launch().rank != 0) throw ReportedElsewhere(message);
  throw UsageError(message);
}

}  // namespace

std::string_view command_line_library_version() { return CLI11_VERSION; }

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

void check_backend_option(std::string_view value) {
  if (value == "auto") return;
  try {
    (void)conv::parse_backend(value);
  } catch (const InvalidArgument&) {
    throw UsageError("--backend: unknown backend '" + std::string(value) +
                     "' (expected cpu-direct, cpu-fftw, gpu-cufft, gpu-cufft-callbacks, gpu-fused, gpu-direct or auto)");
  }
}

Precision parse_precision_option(std::string_view value) {
  if (value != "single" && value != "double")
    throw UsageError("--precision expects single or double, got '" + std::string(value) + "'");
  return parse_precision(value);
}

std::vector<Precision> parse_precisions(std::string_view value) {
  std::vector<Precision> precisions;
  if (value == "single" || value == "both") precisions.push_back(Precision::single);
  if (value == "double" || value == "both") precisions.push_back(Precision::double_);
  if (precisions.empty()) throw UsageError("--precision expects single, double or both, got '" + std::string(value) + "'");
  return precisions;
}

int run_command_line(const Command& program, std::string_view version, int argc, const char* const* argv) {
  CLI::App app("", std::string(program.name));
  app.set_help_flag("-h,--help");
  app.allow_extras();  // unknown options and arguments: found below and named in the project's words
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);  // repeats: refused below
  const CLI::Option* const version_flag = app.add_flag("--version");
  configure(app, program);

  // The chosen commands, the program first, each with its command line path ("gratingsim bench conv").
  const auto chosen = [&] {
    std::vector<std::pair<const CLI::App*, std::string>> chain{{&app, app.get_name()}};
    while (!chain.back().first->get_subcommands().empty()) {
      const CLI::App* sub = chain.back().first->get_subcommands()[0];
      chain.emplace_back(sub, chain.back().second + ' ' + sub->get_name());
    }
    return chain;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (detect_launch().rank == 0) std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    fail(chosen().back().second, usage_message(e.what()));
  }
  if (version_flag->count()) {
    if (argc != 2) throw UsageError(app.get_name() + ": --version takes no arguments");
    std::cout << program.name << ' ' << version << '\n';
    return 0;
  }
  const Command* command = &program;
  for (const auto& [sub, path] : chosen()) {
    if (sub != &app)
      command = *std::find_if(command->commands.begin(), command->commands.end(),
                              [&](const Command* c) { return c->name == sub->get_name(); });
    if (const std::vector<std::string> extra = sub->remaining(); !extra.empty()) {
      const std::string& arg = extra[0];
      if (arg.size() > 1 && arg[0] == '-') fail(path, "unknown option '" + arg.substr(0, arg.find('=')) + "'");
      if (command->commands.empty()) fail(path, "unexpected argument '" + arg + "'");
      std::string names;
      for (const Command* c : command->commands) names += (names.empty() ? "" : ", ") + std::string(c->name);
      fail(path, "unknown command '" + arg + "'", names);
    }
    for (const CLI::Option* option : sub->get_options())
      if (option->count() > 1 && !option->get_positional())
        fail(path, "option '" + option->get_name() + "' given twice");
    if (!command->run && sub->get_subcommands().empty()) {
      if (detect_launch().rank != 0) throw ReportedElsewhere(path + ": missing command");
      throw UsageError(path + ": missing command\n" + app.help());
    }
  }

  const CLI::App* const leaf = chosen().back().first;
  std::map<std::string, std::string, std::less<>> given;
  for (const OptionSpec& s : command->options)
    if (const CLI::Option* option = leaf->get_option("--" + std::string(s.name)); option->count())
      given.emplace(s.name, s.value.empty() ? "" : option->results()[0]);
  std::vector<std::string> positional;
  if (command->max_positional > 0) positional = leaf->get_option(std::string(command->positional))->results();
  if (positional.size() > command->max_positional)
    fail(chosen().back().second, "unexpected argument '" + positional[command->max_positional] + "'");
  // A UsageError of the command (a value its options do not accept) is worded as the parser's own.
  try {
    return command->run(Options(std::move(given), std::move(positional)));
  } catch (const UsageError& e) {
    fail(chosen().back().second, e.what());
  }
}

}  // namespace gratingsim::app
