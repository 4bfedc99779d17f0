// Parameter expressions (io/expression.hpp): values against hand-computed ones and against the same
// arithmetic written directly in C++ on random expressions; every error at its offset.
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <string>

#include "io/expression.hpp"
#include "validation/support/catch.hpp"

using namespace gratingsim;
using io::Expression;
using io::ExpressionError;

namespace {

double value_of(const std::string& text, const io::ParameterValues& values = {}) {
  return Expression::parse(text).evaluate(values);
}

/// The offset and message of the error `text` gives (parsing, then evaluating with `values`).
ExpressionError error_of(const std::string& text, const io::ParameterValues& values = {}) {
  try {
    (void)Expression::parse(text).evaluate(values);
  } catch (const ExpressionError& e) {
    return e;
  }
  FAIL("no error for '" << text << "'");
  return ExpressionError(0, "");
}

/// A random expression as text with its value computed by the same IEEE operations in C++, every
/// operation parenthesised; numbers are written with 17 significant digits (read back exactly).
struct Generated {
  std::string text;
  double value;
  bool divides_by_zero = false;  ///< somewhere x / 0, which the evaluator refuses (C++ gives ±inf or NaN)
};

Generated generate(std::mt19937_64& rng, const io::ParameterValues& values, int depth) {
  std::uniform_int_distribution<int> pick(0, depth > 0 ? 9 : 1);
  std::uniform_real_distribution<double> number(-50, 50);
  switch (pick(rng)) {
    case 0: {
      const double v = number(rng);
      char text[40];
      std::snprintf(text, sizeof text, "%.17g", v);
      // A negative literal is the negation of its magnitude (unary minus), the same value.
      return {std::string("(") + text + ")", v};
    }
    case 1: {
      auto it = values.begin();
      std::advance(it, std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(rng));
      return {"${" + it->first + "}", it->second};
    }
    case 2:
    case 3:
    case 4:
    case 5: {
      const Generated a = generate(rng, values, depth - 1), b = generate(rng, values, depth - 1);
      const char ops[] = "+-*/";
      const char op = ops[pick(rng) % 4];
      const double v = op == '+' ? a.value + b.value : op == '-' ? a.value - b.value : op == '*' ? a.value * b.value
                                                                                       : a.value / b.value;
      return {"(" + a.text + " " + op + " " + b.text + ")", v,
              a.divides_by_zero || b.divides_by_zero || (op == '/' && b.value == 0)};
    }
    case 6: {
      const Generated a = generate(rng, values, depth - 1);
      return {"-" + a.text, -a.value, a.divides_by_zero};
    }
    case 7: {
      const Generated a = generate(rng, values, depth - 1);
      return {"sind(" + a.text + ")", std::sin(a.value * (std::numbers::pi / 180)), a.divides_by_zero};
    }
    case 8: {
      const Generated a = generate(rng, values, depth - 1), b = generate(rng, values, depth - 1);
      return {"max(" + a.text + ", " + b.text + ")", std::max(a.value, b.value),
              a.divides_by_zero || b.divides_by_zero};
    }
    default: {
      const Generated a = generate(rng, values, depth - 1);
      return {"sqrt(abs(" + a.text + "))", std::sqrt(std::abs(a.value)), a.divides_by_zero};
    }
  }
}

}  // namespace

TEST_CASE("expressions evaluate to hand-computed values", "[io][expression]") {
  CHECK(value_of("2+3*4") == 14);
  CHECK(value_of("(2+3)*4") == 20);
  CHECK(value_of("10 - 4 - 3") == 3);   // left-associative
  CHECK(value_of("24 / 4 / 3") == 2);   // left-associative
  CHECK(value_of("2^3^2") == 512);      // right-associative: 2^9
  CHECK(value_of("-2^2") == -4);        // ^ binds tighter than unary minus
  CHECK(value_of("2^-1") == 0.5);
  CHECK(value_of("--3") == 3);
  CHECK(value_of("+3") == 3);
  CHECK(value_of(".5 + 5. + 1e3 + 2.5E-1") == 1005.75);
  CHECK(value_of("pi") == std::numbers::pi);
  CHECK(value_of("max(1, 3, 2)") == 3);
  CHECK(value_of("min(4, -1, 2)") == -1);
  CHECK(value_of("abs(-7)") == 7);
  CHECK(value_of("sqrt(16)") == 4);
  CHECK(value_of("log(exp(2))") == Approx(2).epsilon(1e-15));
  CHECK(value_of("cosd(60)") == Approx(0.5).epsilon(1e-15));
  CHECK(value_of("tand(45)") == Approx(1).epsilon(1e-15));
  CHECK(value_of("cos(pi)") == -1);
  CHECK(value_of("atand(1)") == Approx(45).epsilon(1e-15));
  CHECK(value_of("atan2d(1, -1)") == Approx(135).epsilon(1e-15));
  CHECK(value_of("asin(1)") == Approx(std::numbers::pi / 2).epsilon(1e-15));
  // The issue's example: a trapezoid's top width from its bottom width, height and sidewall angle.
  const io::ParameterValues p{{"cd", 90}, {"height", 120}, {"swa", 85}};
  const double top = 90 - 2 * 120 / std::tan(85 * (std::numbers::pi / 180));
  CHECK(value_of("${cd} - 2*${height}/tand(${swa})", p) == top);
  CHECK(value_of("  ${cd}\t", p) == 90);
  const Expression e = Expression::parse("${cd} + ${swa} * ${cd}");
  REQUIRE(e.references().size() == 3);
  CHECK(e.references()[0].name == "cd");
  CHECK(e.references()[1].name == "swa");
  CHECK(e.references()[1].offset == 8);
  CHECK(e.references()[2].offset == 17);
}

TEST_CASE("random expressions equal the same arithmetic in C++ bit for bit", "[io][expression]") {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> value(-100, 100);
  const io::ParameterValues p{{"a", value(rng)}, {"b_2", value(rng)}, {"Height", value(rng)}};
  int checked = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const Generated g = generate(rng, p, 5);
    if (g.divides_by_zero) {  // refused, located at a '/'
      CHECK_THROWS_AS(value_of(g.text, p), ExpressionError);
      continue;
    }
    if (!std::isfinite(g.value)) continue;
    double got = 0;
    try {
      got = value_of(g.text, p);
    } catch (const ExpressionError& e) {
      FAIL(g.text << ": " << e.what());
    }
    INFO(g.text);
    REQUIRE(got == g.value);
    ++checked;
  }
  CHECK(checked > 1000);
}

TEST_CASE("malformed expressions are refused at their offset", "[io][expression]") {
  const struct {
    const char* text;
    std::size_t offset;
    const char* fragment;
  } cases[] = {
      {"", 0, "empty expression"},
      {"1 +", 3, "got the end"},
      {"2 * (3 + 4", 10, "expected ')'"},
      {"foo(2)", 0, "unknown name 'foo'"},
      {"height + 1", 0, "${height}"},
      {"${cd", 0, "unclosed '${'"},
      {"${1x}", 2, "not a parameter name"},
      {"$cd", 0, "'$' must be followed by '{'"},
      {"3 4", 2, "after a complete expression"},
      {"2x", 1, "after the number"},
      {"min(1)", 0, "two or more"},
      {"sin(1, 2)", 0, "takes 1 argument"},
      {"sqrt 2", 5, "expected '('"},
      {"1 + * 2", 4, "expected a number"},
      {"1e", 2, "exponent"},
      {"(1, 2)", 2, "expected ')'"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    const ExpressionError e = error_of(c.text);
    CHECK(e.offset() == c.offset);
    CHECK(e.message().find(c.fragment) != std::string::npos);
  }
}

TEST_CASE("evaluation refuses unknown parameters and results that are not finite, at the operation", "[io][expression]") {
  const io::ParameterValues p{{"w", 0}, {"x", -4}};
  struct Case {
    const char* text;
    std::size_t offset;
    const char* fragment;
  };
  for (const Case& c : {Case{"1 + ${nope}", 4, "unknown parameter 'nope'"}, Case{"3 / ${w}", 2, "division by zero"},
                        Case{"1 + sqrt(${x})", 4, "not a finite number"}, Case{"log(${w})", 0, "not a finite number"},
                        Case{"10^400", 2, "not a finite number"}}) {
    INFO(c.text);
    const ExpressionError e = error_of(c.text, p);
    CHECK(e.offset() == c.offset);
    CHECK(e.message().find(c.fragment) != std::string::npos);
  }
}
