#include "io/strict_yaml.hpp"

#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <system_error>

namespace gratingsim::io::yaml {

void fail(const Location& where, const std::string& message) {
  throw CaseError(where.file, where.line, where.column, message);
}

void fail_expression_text(const Location& where, const std::string& message) {
  throw ExpressionTextError(where.file, where.line, where.column, message);
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// Optimal string alignment distance: insertions, deletions, substitutions, adjacent transpositions.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

Location location_of(const YAML::Mark& mark, const std::string& file) { return {file, mark.line + 1, mark.column + 1}; }

}  // namespace

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string w = lower(word);
  std::string best;
  std::size_t best_distance = 3;
  for (const auto& candidate : candidates) {
    const std::size_t d = edit_distance(w, lower(candidate));
    if (d < best_distance && 2 * d < candidate.size()) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

std::string suggestion(std::string_view word, const std::vector<std::string>& candidates) {
  std::string out;
  if (const std::string near = closest(word, candidates); !near.empty()) out += "; did you mean '" + near + "'?";
  out += candidates.size() == 1 ? " (expected: " : " (expected one of: ";
  for (std::size_t i = 0; i < candidates.size(); ++i) out += (i ? ", " : "") + candidates[i];
  return out + ")";
}

namespace {

/// yaml-cpp 0.7 ends a quoted scalar whose closing quote is missing at the end of the file, without
/// an error: the rest of the file becomes its text and the keys there go missing. Every quoted
/// scalar's closing quote is looked for in the text (from its opening quote, at its mark). An aliased
/// collection is visited once (`seen`: positions of visited collections), so aliases of aliases
/// ("billion laughs") cost no more than their text.
void refuse_unclosed_quotes(const YAML::Node& node, std::string_view text, const std::string& file,
                            std::set<int>& seen) {
  if ((node.IsMap() || node.IsSequence()) && !seen.insert(node.Mark().pos).second) return;
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      refuse_unclosed_quotes(it->first, text, file, seen);
      refuse_unclosed_quotes(it->second, text, file, seen);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) refuse_unclosed_quotes(item, text, file, seen);
  } else if (node.IsScalar() && node.Tag() == "!") {
    const YAML::Mark mark = node.Mark();
    if (mark.pos < 0 || std::size_t(mark.pos) >= text.size()) return;
    const char quote = text[std::size_t(mark.pos)];
    if (quote != '"' && quote != '\'') return;
    // Inside "...", a backslash escapes the next character; inside '...', '' is a quote.
    for (std::size_t i = std::size_t(mark.pos) + 1; i < text.size(); ++i) {
      if (quote == '"' && text[i] == '\\') {
        ++i;
      } else if (text[i] == quote) {
        if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
          ++i;
          continue;
        }
        return;
      }
    }
    fail(location_of(mark, file), std::string("unclosed quote: the text opened with ") + quote +
                                      " here runs to the end of the file; add the closing " + quote);
  }
}

}  // namespace

YAML::Node parse(std::string_view verbatim, const std::string& file) {
  // YAML counts a lone CR (old Mac line endings) as a line break; yaml-cpp does not always (0.8 on the GPU
  // host fails on a case with lone CRs, io.case "line endings" test). Each lone CR
  // is read as LF, byte for byte, so every position stays the text's own.
  std::string normalised(verbatim);
  for (std::size_t i = 0; i < normalised.size(); ++i)
    if (normalised[i] == '\r' && (i + 1 == normalised.size() || normalised[i + 1] != '\n')) normalised[i] = '\n';
  const std::string_view text = normalised;
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(normalised);
  } catch (const YAML::DeepRecursion& e) {
    fail(location_of(e.mark, file), "invalid YAML: lists and mappings nested " + std::to_string(e.depth()) +
                                        " deep here, beyond the YAML reader's limit (a case needs a few levels)");
  } catch (const YAML::Exception& e) {
    fail(location_of(e.mark, file), "invalid YAML: " + e.msg);
  }
  if (documents.size() > 1)
    fail({file, 1, 1},
         "the file holds " + std::to_string(documents.size()) + " YAML documents ('---'); a case is one document");
  if (documents.empty()) return YAML::Node();
  std::set<int> seen;
  refuse_unclosed_quotes(documents.front(), text, file, seen);
  return documents.front();
}

// --- Node ------------------------------------------------------------------------------------

Node::Node(YAML::Node node, std::string path, std::string file, const YAML::Mark& fallback,
           const Substitution* substitution)
    : node_(std::move(node)),
      path_(std::move(path)),
      file_(std::move(file)),
      fallback_(fallback),
      substitution_(substitution) {}

Location Node::location() const {
  const YAML::Mark mark = node_.Mark();
  if (node_.IsNull() || mark.is_null()) return location_of(fallback_, file_);
  return location_of(mark, file_);
}

Location Node::location_at(std::size_t offset) const {
  Location at = location();
  if (!node_.IsScalar() || !substitution_ || node_.Mark().pos < 0) return at;
  const std::string_view text = substitution_->text;
  std::size_t start = std::size_t(node_.Mark().pos);
  if (start < text.size() && (text[start] == '"' || text[start] == '\'')) ++start;
  const std::string& scalar = node_.Scalar();
  // Columns inside the scalar only where the file holds its text verbatim on one line.
  if (text.substr(start, scalar.size()) != scalar || scalar.find('\n') != std::string::npos) return at;
  at.column += int(start - std::size_t(node_.Mark().pos) + std::min(offset, scalar.size()));
  return at;
}

bool Node::is_expression() const { return node_.IsScalar() && io::is_expression(node_.Scalar()); }

double Node::evaluated() const {
  const std::string prefix = path_.empty() ? "" : path_ + ": ";
  if (!substitution_ || !substitution_->enabled)
    fail_expression_text(location(), prefix + (substitution_ && !substitution_->refusal.empty()
                                                   ? substitution_->refusal
                                                   : "parameter expressions (${...}) may be used in lattice, "
                                                     "materials and layers only"));
  Expression e;
  try {
    e = Expression::parse(node_.Scalar());
  } catch (const ExpressionError& error) {
    fail_expression_text(location_at(error.offset()), prefix + error.message());
  }
  try {
    const ParameterValues& values = *substitution_->values;
    for (const auto& ref : e.references()) {
      if (values.count(ref.name)) continue;
      std::vector<std::string> names;
      for (const auto& [name, value] : values) names.push_back(name);
      fail_expression_text(location_at(ref.offset),
                 prefix + "unknown parameter '" + ref.name + "'" +
                     (names.empty() ? "; the case declares no parameters (give them under the top-level key "
                                      "'parameters', e.g. parameters: {" + ref.name + ": 90})"
                                    : suggestion(ref.name, names)));
    }
    for (const auto& ref : e.references()) substitution_->referenced.insert(ref.name);
    return e.evaluate(values);
  } catch (const ExpressionError& error) {  // a value the operations refuse (x / 0, sqrt(−1), ...)
    yaml::fail(location_at(error.offset()), prefix + error.message());
  }
}

void Node::fail(const std::string& message) const {
  yaml::fail(location(), (path_.empty() ? "" : path_ + ": ") + message);
}

namespace {
constexpr std::string_view core_tag = "tag:yaml.org,2002:";  // what yaml-cpp makes of `!!float` etc.

/// A plain scalar, or one tagged with one of the YAML core schema's `!!` tags `names` (`!!float 120`
/// is the number 120; `!!str 120` and "120" are text).
bool plain_or_tagged(const YAML::Node& node, std::initializer_list<std::string_view> names) {
  if (!node.IsScalar()) return false;
  const std::string& tag = node.Tag();
  if (tag == "?") return true;
  for (const std::string_view name : names)
    if (tag.size() == core_tag.size() + name.size() && tag.starts_with(core_tag) && tag.ends_with(name)) return true;
  return false;
}
}  // namespace

std::string Node::describe() const {
  if (!node_.IsDefined() || node_.IsNull()) return "nothing (null)";
  if (node_.IsMap()) return "a mapping";
  if (node_.IsSequence()) return "a list";
  const std::string& tag = node_.Tag();
  if (is_expression() && substitution_ && substitution_->enabled) {
    try {
      std::ostringstream os;
      os << "'" << node_.Scalar() << "' (= " << Expression::parse(node_.Scalar()).evaluate(*substitution_->values) << ")";
      return os.str();
    } catch (const ExpressionError&) {
      return "'" + node_.Scalar() + "'";
    }
  }
  if (tag == "!") return "the quoted text \"" + node_.Scalar() + "\"";
  if (tag != "?")
    return "'" + node_.Scalar() + "' tagged " +
           (tag.starts_with(core_tag) ? "!!" + tag.substr(core_tag.size()) : tag);
  return "'" + node_.Scalar() + "'";
}

double Node::number() const {
  if (is_expression()) return evaluated();
  if (!plain_or_tagged(node_, {"float", "int"})) fail("expected a number, got " + describe());
  std::string_view text = node_.Scalar();
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    fail("expected a finite number, got " + describe());
  return value;
}

long long Node::integer() const {
  if (is_expression()) {
    const double v = evaluated();
    // Integral and well inside long long (2^62), so that the conversion is exact.
    if (v != std::nearbyint(v) || std::abs(v) > 4.6e18) fail("expected an integer, got " + describe());
    return static_cast<long long>(v);
  }
  if (!plain_or_tagged(node_, {"int"})) fail("expected an integer, got " + describe());
  std::string_view text = node_.Scalar();
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range && end == text.data() + text.size())
    fail("the integer " + describe() + " is too large (at most " + std::to_string(std::numeric_limits<long long>::max()) +
         ")");
  if (error != std::errc() || end != text.data() + text.size()) fail("expected an integer, got " + describe());
  return value;
}

bool Node::boolean() const {
  if (plain_or_tagged(node_, {"bool"})) {
    const std::string text = lower(node_.Scalar());
    if (text == "true") return true;
    if (text == "false") return false;
  }
  fail("expected true or false, got " + describe());
}

std::string Node::string() const {
  if (!node_.IsScalar() || node_.Scalar().empty()) fail("expected text, got " + describe());
  return node_.Scalar();
}

std::vector<Node> Node::items() const {
  if (!node_.IsSequence()) fail("expected a list, got " + describe());
  std::vector<Node> out;
  const YAML::Mark own = node_.Mark();
  for (std::size_t i = 0; i < node_.size(); ++i)
    out.emplace_back(node_[i], path_ + "[" + std::to_string(i) + "]", file_, own, substitution_);
  return out;
}

// --- Map -------------------------------------------------------------------------------------

Map::Map(const Node& node, std::initializer_list<std::string_view> allowed)
    : Map(node, std::vector<std::string>(allowed.begin(), allowed.end())) {}

Map::Map(const Node& node, const std::vector<std::string>& allowed) : Map(node, &allowed) {}

Map Map::any_keys(const Node& node) { return Map(node, nullptr); }

Map::Map(const Node& node, const std::vector<std::string>* allowed) : node_(node) {
  if (!node.node_.IsMap()) node.fail("expected a mapping (key: value, ...), got " + node.describe());
  std::map<std::string, int> first_line;
  for (auto it = node.node_.begin(); it != node.node_.end(); ++it) {
    const YAML::Node key = it->first;
    const Node key_node(key, node.path_, node.file_, key.Mark());
    if (!key.IsScalar() || key.Scalar().empty()) key_node.fail("expected a plain key, got " + key_node.describe());
    const std::string name = key.Scalar();
    const std::string path = node.path_.empty() ? name : node.path_ + "." + name;
    if (const auto seen = first_line.find(name); seen != first_line.end())
      key_node.fail("duplicate key '" + name + "' (first given on line " + std::to_string(seen->second) + ")");
    if (allowed && std::find(allowed->begin(), allowed->end(), name) == allowed->end())
      key_node.fail("unknown key '" + name + "'" + suggestion(name, *allowed));
    first_line[name] = key.Mark().line + 1;
    entries_.emplace_back(Node(key, path, node.file_, key.Mark()),
                          Node(it->second, path, node.file_, key.Mark(), node.substitution_));
  }
}

bool Map::has(std::string_view key) const { return optional(key).has_value(); }

std::optional<Node> Map::optional(std::string_view key) const {
  for (const auto& [k, value] : entries_)
    if (k.node_.Scalar() == key) return value;
  return std::nullopt;
}

Node Map::required(std::string_view key) const {
  if (auto value = optional(key)) return *value;
  node_.fail("missing required key '" + std::string(key) + "'");
}

}  // namespace gratingsim::io::yaml
