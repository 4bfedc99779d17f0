#pragma once
// Strict, located reading of YAML (internal to io/: the one place yaml-cpp is included).
//
// Every value is read through a Node that knows its file, its key path ("layers[0].thickness") and
// its position, so every error reads "FILE:LINE:COLUMN: error: PATH: what was expected, what was found".
// Strictness: numbers must be plain (unquoted) finite scalars, integers must be integral, booleans
// are `true`/`false` only, mapping keys must be known (near typos get a "did you mean"), duplicate
// keys are errors, a missing required key is an error at its mapping.
#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/case.hpp"
#include "io/expression.hpp"

namespace gratingsim::io::yaml {

/// A position in a text file, 1-based.
struct Location {
  std::string file;
  int line = 0, column = 0;
};

[[noreturn]] void fail(const Location& where, const std::string& message);

/// An error in the text of a parameter expression (malformed, an unknown name, or one where
/// expressions are not allowed): the same at every parameter point, so not annotated with one.
class ExpressionTextError : public CaseError {
 public:
  using CaseError::CaseError;
};
[[noreturn]] void fail_expression_text(const Location& where, const std::string& message);
/// The closest candidate to `word` (case-insensitive optimal string alignment distance ≤ 2 and less
/// than half the candidate's length), or empty.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);
/// "; did you mean 'x'?" when one is close, then " (expected one of: a, b, c)".
std::string suggestion(std::string_view word, const std::vector<std::string>& candidates);

/// Parses YAML text; a syntax error becomes a located CaseError.
YAML::Node parse(std::string_view text, const std::string& file);

/// Parameter expressions in numeric values (io/expression.hpp, io/SCHEMA.md §1.11): a scalar holding "${"
/// is evaluated by Node::number() and Node::integer() with `values` while `enabled`, and refused with
/// `refusal` (why expressions do not belong there) otherwise. Shared by every Node of one reading
/// (they hold a pointer to it); the reader switches `enabled` per section.
struct Substitution {
  std::string_view text;  ///< the text parsed, for the columns of characters inside a scalar
  const ParameterValues* values = nullptr;
  bool enabled = false;
  std::string refusal;
  mutable std::set<std::string> referenced;  ///< every parameter an evaluated expression named
};

class Node {
 public:
  /// `fallback` locates null values, which yaml-cpp marks at the next token (their key's position).
  /// `substitution`: how expressions are read (null: nowhere; the nodes made from this one share it).
  Node(YAML::Node node, std::string path, std::string file, const YAML::Mark& fallback,
       const Substitution* substitution = nullptr);

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] Location location() const;
  /// Where the character at `offset` of this scalar's text is (its own location where the text in the
  /// file is not the scalar verbatim: escapes, folded lines).
  [[nodiscard]] Location location_at(std::size_t offset) const;
  [[noreturn]] void fail(const std::string& message) const;
  /// A scalar holding a parameter expression ("${").
  [[nodiscard]] bool is_expression() const;

  [[nodiscard]] bool is_null() const { return node_.IsNull(); }
  [[nodiscard]] bool is_map() const { return node_.IsMap(); }
  [[nodiscard]] bool is_sequence() const { return node_.IsSequence(); }
  [[nodiscard]] bool is_scalar() const { return node_.IsScalar(); }
  /// How the value looks, for messages: "a mapping", "a list", "nothing (null)", "'text'".
  [[nodiscard]] std::string describe() const;

  /// A finite plain number, or an expression's value where expressions are enabled (Substitution).
  [[nodiscard]] double number() const;
  /// A plain integer, or an expression's value if integral, where expressions are enabled.
  [[nodiscard]] long long integer() const;
  [[nodiscard]] bool boolean() const;        ///< true or false
  [[nodiscard]] std::string string() const;  ///< a non-empty scalar (quoted or not)
  /// One of the named choices (with a did-you-mean for typos).
  template <class E>
  [[nodiscard]] E choice(std::initializer_list<std::pair<std::string_view, E>> choices) const {
    const std::string word = string();
    std::vector<std::string> names;
    for (const auto& [name, value] : choices) {
      if (word == name) return value;
      names.emplace_back(name);
    }
    fail("unknown value '" + word + "'" + suggestion(word, names));
  }
  /// Elements of a list (an error if this is not a list).
  [[nodiscard]] std::vector<Node> items() const;

 private:
  friend class Map;
  YAML::Node node_;
  std::string path_;
  std::string file_;
  YAML::Mark fallback_;
  const Substitution* substitution_ = nullptr;
  /// The value of this expression scalar (errors located inside it).
  [[nodiscard]] double evaluated() const;
};

/// A mapping with a fixed set of allowed keys, checked when constructed.
class Map {
 public:
  Map(const Node& node, std::initializer_list<std::string_view> allowed);
  Map(const Node& node, const std::vector<std::string>& allowed);
  /// A mapping whose keys are names chosen by the user (like materials): any key, no duplicates.
  static Map any_keys(const Node& node);

  [[nodiscard]] bool has(std::string_view key) const;
  [[nodiscard]] std::optional<Node> optional(std::string_view key) const;
  [[nodiscard]] Node required(std::string_view key) const;  ///< missing: error at the mapping
  [[nodiscard]] const Node& node() const { return node_; }
  /// Every (key, value) pair in file order (for maps with free keys, like materials).
  [[nodiscard]] const std::vector<std::pair<Node, Node>>& entries() const { return entries_; }

 private:
  Map(const Node& node, const std::vector<std::string>* allowed);

  Node node_;
  std::vector<std::pair<Node, Node>> entries_;
};

}  // namespace gratingsim::io::yaml
