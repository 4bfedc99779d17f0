// gratingsim validate: the built-in set passes with the backends this machine has (the CPU ones at
// least), the table names every comparison, and a case file's errors are located.
#include <regex>
#include <string>

#include "validation/app/executable.hpp"
#include "validation/support/catch.hpp"

using gratingsim::test::contains;
using gratingsim::test::quoted;
using gratingsim::test::run_gratingsim;

TEST_CASE("validate with no argument passes on the built-in set", "[app][validate]") {
  const gratingsim::test::Execution r = run_gratingsim("validate");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "every comparison within tolerance"));
  for (const char* name : {"built-in 1d-lamellar", "built-in crossed", "built-in conical", "built-in lossy"})
    CHECK(contains(r.output, name));
  // Each case: the double-precision reference, then cpu-direct single and cpu-fftw in both precisions.
  const std::regex compared(
      R"(\n  cpu-(direct|fftw) +(single|double) +\d\.\d\de[-+]\d\d +\S+ +\d\.\d\de[-+]\d\d +\d\.00e-(05|10) .* ok\n)");
  std::size_t rows = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), compared); it != std::sregex_iterator(); ++it)
    ++rows;
  // Matches may share the newline between two rows: count every other row at least.
  CHECK(rows >= 4 * 3 / 2);
  CHECK(!contains(r.output, "FAILED"));
  if (contains(r.output, "GPU: none")) CHECK(contains(r.output, "checking the CPU backends against each other"));
}

TEST_CASE("validate: --help, case errors and wrong command lines", "[app][validate][cli]") {
  const gratingsim::test::Execution help = run_gratingsim("validate --help");
  CHECK(help.status == 0);
  CHECK(contains(help.output, "usage: gratingsim validate [CASE.yaml ...]"));

  const auto malformed = gratingsim::test::repository_root() / "validation" / "io" / "cases" / "unknown_top_key.yaml";
  const gratingsim::test::Execution bad = run_gratingsim("validate " + quoted(malformed));
  INFO(bad.output);
  CHECK(bad.status == 1);
  CHECK(contains(bad.output, "unknown_top_key.yaml:"));
  CHECK(contains(bad.output, ": error: "));

  const gratingsim::test::Execution option = run_gratingsim("validate --tolerance 1");
  CHECK(option.status == 2);
  CHECK(contains(option.output, "unknown option '--tolerance'"));
}
