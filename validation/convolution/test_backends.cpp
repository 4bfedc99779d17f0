// CPU backends against cpu-direct (complex128) on every test geometry, both precisions.
#include "validation/convolution/backend_cases.hpp"

using namespace gratingsim;

TEMPLATE_TEST_CASE("CPU backends equal cpu-direct", "[convolution][backends]", float, double) {
  for (const auto& c : test::backend_test_geometries())
    for (auto backend : {conv::Backend::cpu_direct, conv::Backend::cpu_fftw})
      test::check_backend_against_direct<TestType>(backend, c);
}
