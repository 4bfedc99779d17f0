#pragma once
// The command line of `gratingsim`: commands dispatched from tables, options parsed by hand
// ("--name value", "--name=value", "--flag", "-o value" where an option has a one-letter alias) and
// positional arguments where a command takes them; -h is --help everywhere. Hand-written on purpose:
// CLI11 (Debian libcli11-dev) was tried and kept out: it is not among the project's dependencies nor
// on the GPU host's stated package list (that host has no registry), and keeping today's help layout and
// messages took more code with it (325 lines against these 269).
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

using Args = std::span<const std::string_view>;

/// One option of a command. An empty `value` makes it a flag.
struct OptionSpec {
  std::string_view name;   ///< without the leading "--"
  std::string_view value;  ///< placeholder shown in the help, e.g. "N"
  std::string_view help;
  char alias = 0;  ///< one-letter form "-x", or 0
};

/// A command's options, checked against its specs: unknown options, missing values, values given to
/// flags, repeated options and more than `max_positional` positional arguments are UsageErrors.
class Options {
 public:
  Options(std::string_view command, std::span<const OptionSpec> specs, Args args, std::size_t max_positional = 0);
  [[nodiscard]] bool flag(std::string_view name) const { return given_.count(std::string(name)) > 0; }
  [[nodiscard]] std::optional<std::string_view> value(std::string_view name) const;
  /// The arguments that are not options, in order.
  [[nodiscard]] const std::vector<std::string_view>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string, std::less<>> given_;
  std::vector<std::string_view> positional_;
};

/// "usage: <usage>\n\n<description>\n\noptions:\n  --name VALUE  help\n..."
std::string format_help(std::string_view usage, std::string_view description, std::span<const OptionSpec> specs);

/// e.what() without the "file:line: " prefix of library errors: what a user reads.
std::string user_message(const std::exception& e);

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

/// "--precision single|double|both" → the precisions, single first.
std::vector<conv::Precision> parse_precisions(std::string_view value);

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(Args args);  ///< gets the arguments after the command's name
};

/// Runs the command named by args[0] with the arguments after it. "--help" lists the commands (exit
/// 0); no command or an unknown one is a UsageError. `program` ("gratingsim bench") prefixes messages.
int dispatch(std::string_view program, std::string_view description, std::span<const Command> commands, Args args);

}  // namespace gratingsim::app
