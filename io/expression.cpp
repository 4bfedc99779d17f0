// Parameter expressions: a hand-written recursive-descent parser and a tree evaluator (expression.hpp).
#include "io/expression.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <numbers>
#include <sstream>
#include <system_error>

namespace gratingsim::io {

ExpressionError::ExpressionError(std::size_t offset, std::string message)
    : InvalidArgument("at offset " + std::to_string(offset) + ": " + message),
      offset_(offset),
      message_(std::move(message)) {}

bool is_parameter_name(std::string_view name) {
  if (name.empty()) return false;
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!letter(name[0])) return false;
  for (const char c : name)
    if (!letter(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

namespace {

constexpr double degree = std::numbers::pi / 180;

enum class Op { number, parameter, add, subtract, multiply, divide, power, negate, function };

/// A function of the grammar: its name, its arity (−1: two or more) and its value.
struct Function {
  std::string_view name;
  int arity;
  double (*apply)(const std::vector<double>&);
};

const Function functions[] = {
    {"sin", 1, [](const std::vector<double>& a) { return std::sin(a[0]); }},
    {"cos", 1, [](const std::vector<double>& a) { return std::cos(a[0]); }},
    {"tan", 1, [](const std::vector<double>& a) { return std::tan(a[0]); }},
    {"asin", 1, [](const std::vector<double>& a) { return std::asin(a[0]); }},
    {"acos", 1, [](const std::vector<double>& a) { return std::acos(a[0]); }},
    {"atan", 1, [](const std::vector<double>& a) { return std::atan(a[0]); }},
    {"atan2", 2, [](const std::vector<double>& a) { return std::atan2(a[0], a[1]); }},
    {"sind", 1, [](const std::vector<double>& a) { return std::sin(a[0] * degree); }},
    {"cosd", 1, [](const std::vector<double>& a) { return std::cos(a[0] * degree); }},
    {"tand", 1, [](const std::vector<double>& a) { return std::tan(a[0] * degree); }},
    {"asind", 1, [](const std::vector<double>& a) { return std::asin(a[0]) / degree; }},
    {"acosd", 1, [](const std::vector<double>& a) { return std::acos(a[0]) / degree; }},
    {"atand", 1, [](const std::vector<double>& a) { return std::atan(a[0]) / degree; }},
    {"atan2d", 2, [](const std::vector<double>& a) { return std::atan2(a[0], a[1]) / degree; }},
    {"sqrt", 1, [](const std::vector<double>& a) { return std::sqrt(a[0]); }},
    {"exp", 1, [](const std::vector<double>& a) { return std::exp(a[0]); }},
    {"log", 1, [](const std::vector<double>& a) { return std::log(a[0]); }},
    {"abs", 1, [](const std::vector<double>& a) { return std::abs(a[0]); }},
    {"min", -1,
     [](const std::vector<double>& a) {
       double m = a[0];
       for (const double v : a) m = std::min(m, v);
       return m;
     }},
    {"max", -1,
     [](const std::vector<double>& a) {
       double m = a[0];
       for (const double v : a) m = std::max(m, v);
       return m;
     }},
};

std::string function_names() {
  std::string out;
  for (const auto& f : functions) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

}  // namespace

struct Expression::Node {
  Op op = Op::number;
  std::size_t offset = 0;  // where the operation is written (its operator, name or first character)
  double value = 0;        // number
  std::string name;        // parameter
  const Function* function = nullptr;
  std::vector<std::shared_ptr<const Node>> operands;
};

namespace {

using NodePtr = std::shared_ptr<const Expression::Node>;

class Parser {
 public:
  Parser(std::string_view text, std::vector<Expression::Reference>& references)
      : text_(text), references_(references) {}

  NodePtr parse() {
    skip_blanks();
    if (at_end()) throw ExpressionError(0, "empty expression");
    NodePtr root = expression();
    skip_blanks();
    if (!at_end()) throw ExpressionError(i_, "unexpected '" + std::string(1, text_[i_]) + "' after a complete expression");
    return root;
  }

 private:
  bool at_end() const { return i_ >= text_.size(); }
  void skip_blanks() {
    while (!at_end() && (text_[i_] == ' ' || text_[i_] == '\t')) ++i_;
  }
  /// Consumes `c` if it is the next token.
  bool accept(char c) {
    skip_blanks();
    if (!at_end() && text_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string next_description() const {
    return at_end() ? "the end of the expression" : "'" + std::string(1, text_[i_]) + "'";
  }

  static NodePtr binary(Op op, std::size_t offset, NodePtr a, NodePtr b) {
    auto n = std::make_shared<Expression::Node>();
    n->op = op;
    n->offset = offset;
    n->operands = {std::move(a), std::move(b)};
    return n;
  }

  NodePtr expression() {
    NodePtr left = term();
    for (;;) {
      skip_blanks();
      const std::size_t at = i_;
      if (accept('+')) left = binary(Op::add, at, left, term());
      else if (accept('-')) left = binary(Op::subtract, at, left, term());
      else return left;
    }
  }

  NodePtr term() {
    NodePtr left = unary();
    for (;;) {
      skip_blanks();
      const std::size_t at = i_;
      if (accept('*')) left = binary(Op::multiply, at, left, unary());
      else if (accept('/')) left = binary(Op::divide, at, left, unary());
      else return left;
    }
  }

  NodePtr unary() {
    skip_blanks();
    const std::size_t at = i_;
    if (accept('-')) {
      auto n = std::make_shared<Expression::Node>();
      n->op = Op::negate;
      n->offset = at;
      n->operands = {unary()};
      return n;
    }
    if (accept('+')) return unary();
    return power();
  }

  NodePtr power() {
    NodePtr base = primary();
    skip_blanks();
    const std::size_t at = i_;
    if (accept('^')) return binary(Op::power, at, base, unary());
    return base;
  }

  NodePtr primary() {
    skip_blanks();
    if (at_end()) throw ExpressionError(i_, "expected a number, ${name}, a function or '(', got the end of the expression");
    const std::size_t at = i_;
    const char c = text_[i_];
    if (c == '(') {
      ++i_;
      NodePtr inner = expression();
      if (!accept(')')) throw ExpressionError(i_, "expected ')' to close the '(' at offset " + std::to_string(at) + ", got " + next_description());
      return inner;
    }
    if (c == '$') return parameter();
    if ((c >= '0' && c <= '9') || c == '.') return number();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return named();
    throw ExpressionError(i_, "expected a number, ${name}, a function or '(', got " + next_description());
  }

  NodePtr parameter() {
    const std::size_t at = i_;
    ++i_;  // '$'
    if (at_end() || text_[i_] != '{') throw ExpressionError(at, "a parameter is written ${name}; '$' must be followed by '{'");
    ++i_;
    const std::size_t start = i_;
    while (!at_end() && text_[i_] != '}') ++i_;
    if (at_end()) throw ExpressionError(at, "unclosed '${': expected '}' after the parameter's name");
    const std::string name(text_.substr(start, i_ - start));
    if (!is_parameter_name(name))
      throw ExpressionError(start, "'" + name + "' is not a parameter name (letters, digits and '_', not starting with a digit)");
    ++i_;  // '}'
    auto n = std::make_shared<Expression::Node>();
    n->op = Op::parameter;
    n->offset = at;
    n->name = name;
    references_.push_back({name, at});
    return n;
  }

  NodePtr number() {
    const std::size_t at = i_;
    std::size_t j = i_;
    const auto digits = [&] {
      const std::size_t from = j;
      while (j < text_.size() && text_[j] >= '0' && text_[j] <= '9') ++j;
      return j - from;
    };
    std::size_t mantissa = digits();
    if (j < text_.size() && text_[j] == '.') ++j, mantissa += digits();
    if (mantissa == 0) throw ExpressionError(at, "expected a number, got '.'");
    if (j < text_.size() && (text_[j] == 'e' || text_[j] == 'E')) {
      ++j;
      if (j < text_.size() && (text_[j] == '+' || text_[j] == '-')) ++j;
      if (digits() == 0) throw ExpressionError(j, "expected the exponent's digits after 'e'");
    }
    double value = 0;
    const char* first = text_.data() + at;
    const auto [end, error] = std::from_chars(first, text_.data() + j, value);
    if (error != std::errc() || end != text_.data() + j || !std::isfinite(value))
      throw ExpressionError(at, "the number '" + std::string(text_.substr(at, j - at)) + "' is out of range");
    i_ = j;
    if (!at_end() && (std::isalpha(static_cast<unsigned char>(text_[i_])) || text_[i_] == '_'))
      throw ExpressionError(i_, "unexpected '" + std::string(1, text_[i_]) + "' after the number (write '*' to multiply)");
    auto n = std::make_shared<Expression::Node>();
    n->op = Op::number;
    n->offset = at;
    n->value = value;
    return n;
  }

  NodePtr named() {
    const std::size_t at = i_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(text_[i_])) || text_[i_] == '_')) ++i_;
    const std::string word(text_.substr(at, i_ - at));
    if (word == "pi") {
      auto n = std::make_shared<Expression::Node>();
      n->op = Op::number;
      n->offset = at;
      n->value = std::numbers::pi;
      return n;
    }
    const Function* function = nullptr;
    for (const auto& f : functions)
      if (f.name == word) function = &f;
    if (!function)
      throw ExpressionError(at, "unknown name '" + word + "': parameters are written ${" + word +
                                    "}; functions are " + function_names() + "; the constant is pi");
    if (!accept('(')) throw ExpressionError(i_, "expected '(' after the function " + word + ", got " + next_description());
    auto n = std::make_shared<Expression::Node>();
    n->op = Op::function;
    n->offset = at;
    n->function = function;
    n->operands.push_back(expression());
    while (accept(',')) n->operands.push_back(expression());
    if (!accept(')')) throw ExpressionError(i_, "expected ',' or ')' in the arguments of " + word + ", got " + next_description());
    const int count = int(n->operands.size());
    if (function->arity > 0 && count != function->arity)
      throw ExpressionError(at, word + " takes " + std::to_string(function->arity) + " argument" +
                                    (function->arity == 1 ? "" : "s") + ", got " + std::to_string(count));
    if (function->arity < 0 && count < 2)
      throw ExpressionError(at, word + " takes two or more arguments, got " + std::to_string(count));
    return n;
  }

  std::string_view text_;
  std::size_t i_ = 0;
  std::vector<Expression::Reference>& references_;
};

std::string format(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

double evaluate(const Expression::Node& n, const ParameterValues& values) {
  double result = 0;
  std::vector<double> a;
  for (const auto& operand : n.operands) a.push_back(evaluate(*operand, values));
  switch (n.op) {
    case Op::number:
      return n.value;
    case Op::parameter: {
      const auto it = values.find(n.name);
      if (it == values.end()) throw ExpressionError(n.offset, "unknown parameter '" + n.name + "'");
      return it->second;
    }
    case Op::add:
      result = a[0] + a[1];
      break;
    case Op::subtract:
      result = a[0] - a[1];
      break;
    case Op::multiply:
      result = a[0] * a[1];
      break;
    case Op::divide:
      if (a[1] == 0) throw ExpressionError(n.offset, "division by zero (" + format(a[0]) + " / 0)");
      result = a[0] / a[1];
      break;
    case Op::power:
      result = std::pow(a[0], a[1]);
      break;
    case Op::negate:
      result = -a[0];
      break;
    case Op::function:
      result = n.function->apply(a);
      break;
  }
  if (!std::isfinite(result)) {
    std::string args;
    for (const double v : a) args += (args.empty() ? "" : ", ") + format(v);
    throw ExpressionError(n.offset, "the result is not a finite number (" + format(result) + ", from " + args + ")");
  }
  return result;
}

}  // namespace

Expression Expression::parse(std::string_view text) {
  Expression e;
  e.root_ = Parser(text, e.references_).parse();
  return e;
}

double Expression::evaluate(const ParameterValues& values) const { return io::evaluate(*root_, values); }

}  // namespace gratingsim::io
