// The complete case examples of io/SCHEMA.md (its ```yaml blocks with a `numerics` key) are valid cases.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/case.hpp"
#include "validation/support/catch.hpp"

namespace fs = std::filesystem;
using namespace gratingsim;

TEST_CASE("the schema page's complete examples parse", "[io][case]") {
  const fs::path page = fs::path(__FILE__).parent_path().parent_path().parent_path() / "io" / "SCHEMA.md";
  std::ifstream in(page);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  int examples = 0;
  for (std::size_t at = s.find("```yaml\n"); at != std::string::npos; at = s.find("```yaml\n", at + 1)) {
    const std::size_t begin = at + 8, end = s.find("```", begin);
    const std::string block = s.substr(begin, end - begin);
    if (block.find("numerics:") == std::string::npos) continue;  // a fragment, not a whole case
    INFO(block);
    const io::Case c = io::parse_case(block, "SCHEMA.md example");
    CHECK(c.points() > 0);
    ++examples;
  }
  CHECK(examples >= 1);
}
