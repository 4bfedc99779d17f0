#pragma once
// The command line of `gratingsim`, parsed by CLI11: each command is described by a table entry
// (name, help text, options, how many positional arguments) and run with the options it was given.
// "--name value", "--name=value", "-o value" where an option has a one-letter alias, flags, and
// "-h"/"--help" on every command. The values are checked by the commands (parse_int, ...), so
// that each message names the option; a UsageError a command throws reaches the user as
// "gratingsim CMD: what (see 'gratingsim CMD --help')", like the parser's own.
#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "convolution/convolution.hpp"
#include "core/error.hpp"

namespace gratingsim::app {

/// The user's command line is wrong (unknown command or option, bad value): main() exits with 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// One option of a command. An empty `value` makes it a flag.
struct OptionSpec {
  std::string_view name;   ///< without the leading "--"
  std::string_view value;  ///< placeholder shown in the help, e.g. "N"
  std::string_view help;
  char alias = 0;       ///< one-letter form "-x", or 0
  bool hidden = false;  ///< accepted, not shown in the help (options for the tests)
};

/// The options and positional arguments a command was given; each option at most once.
class Options {
 public:
  Options(std::map<std::string, std::string, std::less<>> given, std::vector<std::string> positional)
      : given_(std::move(given)), positional_(std::move(positional)) {}
  [[nodiscard]] bool flag(std::string_view name) const { return given_.count(name) > 0; }
  [[nodiscard]] std::optional<std::string_view> value(std::string_view name) const;
  /// The arguments that are not options, in order.
  [[nodiscard]] const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string, std::less<>> given_;
  std::vector<std::string> positional_;
};

/// A command: either runs (`run`) or groups commands (`commands`: "gratingsim", "gratingsim bench").
struct Command {
  std::string_view name = {};
  std::string_view summary = {};      ///< one line in the parent's list of commands
  std::string_view usage = {};        ///< the help's "usage:" line(s); a group's is generated
  std::string_view description = {};  ///< the help's paragraph
  std::span<const OptionSpec> options = {};  ///< besides -h, --help
  std::size_t max_positional = 0;            ///< positional arguments accepted (shown as `positional`)
  std::string_view positional = {};
  int (*run)(const Options&) = nullptr;
  std::span<const Command* const> commands = {};
};

/// Parses argv against `program` and runs the chosen command; returns its status. -h/--help prints
/// the help of the command it follows (status 0); "--version" alone prints "<name> <version>". A
/// wrong command line (unknown command or option, missing value, repeated option, extra argument,
/// no command) is a UsageError naming what is wrong.
int run_command_line(const Command& program, std::string_view version, int argc, const char* const* argv);

/// The version of CLI11, the command-line parser (for `gratingsim info`).
std::string_view command_line_library_version();

/// An integer option value; UsageError naming the option otherwise.
int parse_int(std::string_view option, std::string_view value, int min, int max);
/// A positive finite number; UsageError naming the option otherwise.
double parse_positive(std::string_view option, std::string_view value);
/// "a,b,c" → {"a", "b", "c"}; empty items are a UsageError.
std::vector<std::string_view> split_list(std::string_view option, std::string_view value);

/// "--case LIST|all" (default all) over a table of cases with an int `number`: the chosen entries
/// in the order given, each once; an unknown number is a UsageError listing the valid ones.
template <class Case>
std::vector<const Case*> select_cases(std::optional<std::string_view> value, std::span<const Case> table) {
  std::vector<const Case*> chosen;
  if (value.value_or("all") == "all") {
    for (const Case& c : table) chosen.push_back(&c);
    return chosen;
  }
  for (std::string_view name : split_list("case", *value)) {
    const Case* found = nullptr;
    for (const Case& c : table)
      if (name == std::to_string(c.number)) found = &c;
    if (!found) {
      std::string valid;
      for (const Case& c : table) valid += std::to_string(c.number) + ", ";
      throw UsageError("--case expects " + valid + "a list of them or all, got '" + std::string(name) + "'");
    }
    if (std::find(chosen.begin(), chosen.end(), found) == chosen.end()) chosen.push_back(found);
  }
  return chosen;
}

/// "--backend NAME|auto" of run and fit: UsageError naming the backends when NAME is none of them.
void check_backend_option(std::string_view value);
/// "--precision single|double" of run and fit; UsageError otherwise.
Precision parse_precision_option(std::string_view value);

/// "--precision single|double|both" → the precisions, single first.
std::vector<Precision> parse_precisions(std::string_view value);

}  // namespace gratingsim::app
