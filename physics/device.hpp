#pragma once
// The device (CUDA) path of the solver: Krylov vectors and the z-operator in GPU memory, used by
// DiscreteProblem when the convolution backend's memory() is device. Declared only in CUDA builds;
// no CUDA header here (the definitions live in the .cu files).
//
// Every operation enqueues on the stream it was given and returns without waiting, except those that
// bring data to the host: VectorSpace::dot(), dots(), norm() and download() wait for the stream (the per-rhs
// scalars and the downloaded vector are complete when they return), upload() waits for its copy.
#ifdef GRATINGSIM_HAVE_CUDA
#include <cstddef>
#include <memory>
#include <vector>

#include "convolution/convolution.hpp"
#include "physics/preconditioner.hpp"
#include "physics/vector_space.hpp"
#include "physics/z_operator.hpp"

namespace gratingsim::physics {

/// A non-blocking CUDA stream owned for the lifetime of a problem (cudaStreamNonBlocking: it does not
/// synchronise with the legacy default stream).
class DeviceStream {
 public:
  DeviceStream();
  ~DeviceStream();
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  [[nodiscard]] conv::Stream get() const { return stream_; }
  /// Waits for all work enqueued on the stream.
  void synchronize() const;

 private:
  conv::Stream stream_ = nullptr;
};

/// Free and total memory of the current device (cudaMemGetInfo).
struct DeviceMemoryInfo {
  std::size_t free_bytes = 0, total_bytes = 0;
};
DeviceMemoryInfo device_memory_info();

/// `count` batched vectors in device memory, all operations on `stream`. Per-rhs reductions run in
/// complex128: each thread block sums its part of one rhs in double, the partial sums are copied to
/// pinned host memory and added there in a fixed order (deterministic). All device and pinned
/// memory is allocated here; the operations allocate nothing.
template <class Real>
std::unique_ptr<VectorSpace<Real>> make_device_vector_space(const BatchLayout& layout, int count, conv::Stream stream);

/// The z-operator of z_operator.hpp on the device: one thread per (rhs, order) runs the upward and
/// downward sweeps over the slices in complex128 arithmetic exactly as the host version; the
/// coefficients are uploaded once here, transposed to [incidence][slice][order] so that the threads
/// of a warp (consecutive orders) read consecutive addresses. source_components as for
/// make_host_z_operator.
template <class Real>
std::unique_ptr<ZOperator<Real>> make_device_z_operator(const GreenCoefficients& coefficients,
                                                        std::vector<int> rhs_incidence, int source_components = 3);

/// The averaged preconditioner of preconditioner.hpp on the device: the host-assembled matrices are
/// uploaded and inverted on the device in complex128 (cuBLAS batched LU, the host's singularity test:
/// throws as expect_regular_* does), the inverses kept rounded to Real. Waits for the device before
/// returning (the set-up runs on the legacy default stream). Device memory while building: beside the
/// inverses, one part's matrices twice in complex128. The rhs must be grouped by incidence, one or two
/// per incidence (physics' s, p pairs).
template <class Real>
std::unique_ptr<Preconditioner<Real>> make_device_preconditioner(const AveragedMatrices& averaged,
                                                                 const LocalMatrices& local,
                                                                 std::vector<int> rhs_incidence);

}  // namespace gratingsim::physics
#endif
