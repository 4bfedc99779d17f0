// GPU backends against cpu-direct (complex128) on every test geometry, both precisions.
// Built into a GPU test executable: skipped (exit 77) where no CUDA device exists.
#include "validation/convolution/backend_cases.hpp"

using namespace gratingsim;

TEMPLATE_TEST_CASE("GPU backends equal cpu-direct", "[convolution][backends][gpu]", float, double) {
  for (const auto& c : test::backend_test_geometries())
    for (auto backend : {conv::Backend::gpu_cufft, conv::Backend::gpu_cufft_callbacks, conv::Backend::gpu_fused,
                         conv::Backend::gpu_direct}) {
      if (!conv::backend_available(backend)) {  // gpu-cufft-callbacks where cuFFT cannot JIT-link callbacks
        WARN(conv::to_string(backend) << " not run: unavailable on this machine (gratingsim info says why)");
        continue;
      }
      test::check_backend_against_direct<TestType>(backend, c);
    }
}
