// One main for every test executable (Catch2 v2 and v3). Executables of GPU tests are built with
// GRATINGSIM_REQUIRES_GPU: without a CUDA device they print "SKIPPED" and return 77, which CTest
// reports as a skipped test (SKIP_RETURN_CODE), never as a pass; so do those built with
// GRATINGSIM_SKIP_REASON.
#define CATCH_CONFIG_RUNNER
#include <cstdio>
#include <string_view>

#include "convolution/convolution.hpp"
#include "validation/support/catch.hpp"

int main(int argc, char* argv[]) {
#ifdef GRATINGSIM_SKIP_REASON
  // An executable testing an optional part this build lacks (e.g. PNG images without libpng): it lists
  // its test cases, and every one reports skipped (77) with the reason.
  bool listing_only = false;
  for (int i = 1; i < argc; ++i) listing_only = listing_only || std::string_view(argv[i]).starts_with("--list");
  if (!listing_only) {
    std::printf("SKIPPED: %s\n", GRATINGSIM_SKIP_REASON);
    return 77;
  }
#endif
#ifdef GRATINGSIM_REQUIRES_GPU
  // Listing the test cases (catch_discover_tests does, after every build) needs no device.
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string_view(argv[i]).starts_with("--list");
  if (!listing && !gratingsim::conv::backend_available(gratingsim::conv::Backend::gpu_cufft)) {
    std::printf("SKIPPED: no CUDA device on this machine; GPU tests not run\n");
    return 77;
  }
#ifdef GRATINGSIM_REQUIRES_BACKEND
  // An executable that tests one backend only: skipped where that backend cannot run here (e.g.
  // gpu-cufft-callbacks where neither of its callback routes works), with the backend's own reason.
  if (!listing) {
    const auto backend = gratingsim::conv::parse_backend(GRATINGSIM_REQUIRES_BACKEND);
    const gratingsim::conv::Problem smallest{.n1 = 3, .n2 = 3};
    const auto support = gratingsim::conv::traits(backend).can_implement(smallest, gratingsim::Precision::single);
    if (!support) {
      std::printf("SKIPPED: %s unavailable here: %s\n", GRATINGSIM_REQUIRES_BACKEND, support.reason.c_str());
      return 77;
    }
  }
#endif
#endif
  return Catch::Session().run(argc, argv);
}
