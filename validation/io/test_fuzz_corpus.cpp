// Replays the case reader's saved fuzz corpus (validation/io/fuzz_corpus/: configs/, the malformed
// cases of validation/io/cases, and every crash, hang or sanitizer report the libFuzzer target
// validation/io/fuzz/ found, as a regression case) through the fuzz target's own entry point. Under
// the AddressSanitizer build of CI this is the fuzz test: every input must be read or refused
// (gratingsim::Error), without another exception, a crash or a sanitizer report.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "validation/io/fuzz/case_reader_entry.hpp"
#include "validation/support/catch.hpp"

TEST_CASE("every saved fuzz input is read or refused, never crashes", "[io][fuzz]") {
  const auto corpus = std::filesystem::path(__FILE__).parent_path() / "fuzz_corpus";
  std::size_t inputs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    INFO(entry.path().filename().string());
    CHECK(gratingsim::fuzz::read_case_input(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()) == 0);
    ++inputs;
  }
  CHECK(inputs >= 90);  // the seeds: configs/ and validation/io/cases
}

TEST_CASE("a case that is not UTF-8 text is refused at the offending byte", "[io][fuzz]") {
  using gratingsim::io::CaseError;
  CHECK_THROWS_WITH(gratingsim::io::parse_case(std::string("wavelength: 500\nunits: n\0m\n", 27), "x.yaml"),
                    Catch::Contains("x.yaml:2:9") && Catch::Contains("NUL byte"));
  CHECK_THROWS_WITH(gratingsim::io::parse_case("description: 45\xb0 lines\n", "x.yaml"),
                    Catch::Contains("x.yaml:1:16") && Catch::Contains("0xb0 is not UTF-8"));
  CHECK_THROWS_AS(gratingsim::io::parse_case("\xff\xfew\0a\0", "x.yaml"), CaseError);
}
