#pragma once
// Arithmetic expressions over a case's named parameters (io/SCHEMA.md §1.11), e.g.
//   "${cd} - 2*${height}/tand(${swa})"
// Grammar (whitespace between tokens is ignored):
//   expression := term (('+' | '-') term)*
//   term       := unary (('*' | '/') unary)*
//   unary      := ('-' | '+') unary | power
//   power      := primary ('^' unary)?            right-associative, binds tighter than unary minus:
//                                                  -2^2 = -4, 2^-1 = 0.5, 2^3^2 = 2^9
//   primary    := number | '${' name '}' | 'pi' | function '(' expression (',' expression)* ')'
//                 | '(' expression ')'
//   number     := digits ['.' digits] [('e' | 'E') ['+' | '-'] digits]   (also '.5' and '5.')
//   name       := [A-Za-z_][A-Za-z0-9_]*
// Functions: sin cos tan asin acos atan (radians), sind cosd tand asind acosd atand (degrees), sqrt exp
// log (natural) abs, min max (two or more arguments), atan2(y, x) (radians) and atan2d(y, x) (degrees).
// Parsing is strict: anything else is an ExpressionError at its offset. Evaluation refuses a result
// that is not a finite number (division by zero, sqrt of a negative, ...) at the offset of the
// operation that produced it. The library is vendor-free and knows nothing of YAML: the case reader
// adds the scalar's line and column.
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace gratingsim::io {

/// An error in an expression, at `offset` (0-based, in bytes) of its text.
class ExpressionError : public InvalidArgument {
 public:
  ExpressionError(std::size_t offset, std::string message);
  [[nodiscard]] std::size_t offset() const { return offset_; }
  [[nodiscard]] const std::string& message() const { return message_; }

 private:
  std::size_t offset_;
  std::string message_;
};

/// Values of parameters by name.
using ParameterValues = std::map<std::string, double, std::less<>>;

/// A parsed expression; cheap to copy (the tree is shared and immutable).
class Expression {
 public:
  /// Parses `text` (throws ExpressionError at the first offending character).
  static Expression parse(std::string_view text);

  /// A parameter reference `${name}`: the name and the offset of its '$'.
  struct Reference {
    std::string name;
    std::size_t offset = 0;
  };
  /// Every `${name}` in the text, in order (repeats included).
  [[nodiscard]] const std::vector<Reference>& references() const { return references_; }

  /// The value with the parameters' `values`; throws ExpressionError for a name without a value or a
  /// result (of any operation) that is not finite.
  [[nodiscard]] double evaluate(const ParameterValues& values) const;

  struct Node;  // the tree (expression.cpp)

 private:
  std::shared_ptr<const Node> root_;
  std::vector<Reference> references_;
};

/// Whether a YAML scalar is an expression rather than a literal: it holds a parameter reference "${".
inline bool is_expression(std::string_view text) { return text.find("${") != std::string_view::npos; }

/// Whether `name` is a valid parameter name ([A-Za-z_][A-Za-z0-9_]*).
bool is_parameter_name(std::string_view name);

}  // namespace gratingsim::io
