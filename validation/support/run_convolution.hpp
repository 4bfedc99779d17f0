#pragma once
// Runs a planned convolution on host vectors, staging through device memory for GPU backends.
#include <complex>
#include <vector>

#include "convolution/convolution.hpp"
#ifdef GRATINGSIM_HAVE_CUDA
#include "convolution/device_buffer.hpp"
#endif
#include "validation/support/compare.hpp"

namespace gratingsim::test {

/// out (problem().output_size() elements) is poisoned (NaN) first, on the host and on the device, so
/// unwritten elements are caught.
template <class Real>
void run_on_host(conv::Convolution<Real>& plan, const std::vector<std::complex<Real>>& in,
                 std::vector<std::complex<Real>>& out) {
  out.assign(plan.problem().output_size(), poison<Real>());
  if (plan.memory() == conv::Memory::host) {
    plan.execute(in.data(), out.data());
    return;
  }
#ifdef GRATINGSIM_HAVE_CUDA
  conv::DeviceBuffer<std::complex<Real>> d_in(in.size()), d_out(out.size());
  d_in.upload(in);
  d_out.upload(out);
  plan.execute(d_in.data(), d_out.data(), nullptr);
  CUDA_TRY(cudaDeviceSynchronize());
  d_out.download(out);
#endif
}

}  // namespace gratingsim::test
