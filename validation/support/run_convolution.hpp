#pragma once
// Runs a planned convolution on host vectors, staging through device memory for GPU backends.
#include <algorithm>
#include <complex>
#include <span>
#include <vector>

#include "convolution/convolution.hpp"
#include "core/config.hpp"
#if GRATINGSIM_HAVE_CUDA
#include "core/device_buffer.hpp"
#endif
#include "validation/support/catch.hpp"
#include "validation/support/compare.hpp"

namespace gratingsim::test {

/// out (problem().output_size() elements) is poisoned (NaN) first, on the host and on the device, so
/// unwritten elements are caught.
template <class Real>
void run_on_host(conv::Convolution<Real>& plan, const std::vector<std::complex<Real>>& in,
                 std::vector<std::complex<Real>>& out) {
  out.assign(plan.problem().output_size(), poison<Real>());
  if (plan.memory() == Memory::host) {
    plan.execute(in.data(), out.data());
    return;
  }
#if GRATINGSIM_HAVE_CUDA
  DeviceBuffer<std::complex<Real>> d_in(in.size()), d_out(out.size());
  d_in.upload(in);
  d_out.upload(out);
  plan.execute(d_in.data(), d_out.data(), nullptr);
  GS_CUDA_TRY(cudaDeviceSynchronize());
  d_out.download(out);
#endif
}

/// The worst output-block relative L2 error of `out` against `expect`.
template <class Real>
double worst_block_error(const conv::Problem& g, const std::vector<std::complex<Real>>& out,
                         const std::vector<std::complex<double>>& expect) {
  REQUIRE(out.size() == g.output_size());
  REQUIRE(expect.size() == g.output_size());
  const std::size_t n = g.field_size();
  double worst = 0;
  for (std::size_t b = 0; b < g.output_blocks(); ++b)
    worst = std::max(worst, relative_l2<Real, double>(std::span(out).subspan(b * n, n),
                                                      std::span(expect).subspan(b * n, n)));
  return worst;
}

}  // namespace gratingsim::test
