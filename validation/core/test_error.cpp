// core/error.hpp: the check macros throw the promised type with the message alone in what() and the
// check's own source position beside it.
#include <random>
#include <string>

#include "core/error.hpp"
#include "validation/support/catch.hpp"

namespace {
int checked_line = 0;
void require_positive(int value) {
  checked_line = __LINE__ + 1;
  GS_EXPECTS(value > 0, "value must be positive, got " + std::to_string(value));
}
void require_small(int value) {
  checked_line = __LINE__ + 1;
  GS_SUPPORTS(value < 10, "at most 9 supported, got " + std::to_string(value));
}
}  // namespace

TEST_CASE("GS_EXPECTS throws InvalidArgument with the message alone and the check's position", "core") {
  const int value = -1 - int(std::random_device{}() % 1000);
  try {
    require_positive(value);
    FAIL("no exception");
  } catch (const gratingsim::InvalidArgument& e) {
    CHECK(std::string(e.what()) == "value must be positive, got " + std::to_string(value));
    CHECK(e.where().line() == unsigned(checked_line));
    CHECK(gratingsim::source_position(e) == "validation/core/test_error.cpp:" + std::to_string(checked_line));
  }
  CHECK_NOTHROW(require_positive(1 + int(std::random_device{}() % 1000)));
}

TEST_CASE("GS_SUPPORTS throws Unsupported, an Error that is not an InvalidArgument", "core") {
  try {
    require_small(12);
    FAIL("no exception");
  } catch (const gratingsim::InvalidArgument&) {
    FAIL("Unsupported must not be an InvalidArgument");
  } catch (const gratingsim::Unsupported& e) {
    CHECK(std::string(e.what()) == "at most 9 supported, got 12");
    CHECK(e.where().line() == unsigned(checked_line));
  }
}

TEST_CASE("an error raised without a check macro has no position", "core") {
  const gratingsim::Error e("plain");
  CHECK(e.where().line() == 0);
  CHECK(gratingsim::source_position(e).empty());
}
