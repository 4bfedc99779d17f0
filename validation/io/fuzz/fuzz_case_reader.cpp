// libFuzzer target for the case reader (optional: CMake -DGRATINGSIM_FUZZ=ON with clang; see
// validation/io/fuzz/README.md). CI replays the saved corpus through the same entry point instead.
#include "validation/io/fuzz/case_reader_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return gratingsim::fuzz::read_case_input(data, size);
}
