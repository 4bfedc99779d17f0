// gratingsim info: what this build is and what it can run on this machine.
#include <complex>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <vector>

#include "app/commands.hpp"
#include "app/ranks.hpp"
#include "convolution/convolution.hpp"
#include "convolution/devices.hpp"
#include "io/versions.hpp"
#include "core/config.hpp"

namespace gratingsim::app {
namespace {

/// "available", or why not: a backend can be missing from the build, lack a device, or decline to
/// plan (a backend still being written throws Unsupported too); probed with a 3×3 plan.
std::string availability(conv::Backend backend) {
  // N = 3 per axis: the smallest problem every backend serves (gpu-cufft-callbacks needs a transform).
  const conv::Problem problem{.n1 = 3, .n2 = 3};
  const std::vector<std::complex<double>> kernels(problem.kernel_size(), {1.0, 0.0});
  try {
    conv::make_convolution<float>(backend, problem, kernels);
    if (backend == conv::Backend::gpu_cufft_callbacks)
      return "available (" + conv::cufft_callbacks_route(Precision::single) + ")";
    return "available";
  } catch (const Error& e) {
    return "unavailable: " + user_message(e);
  }
}

std::string gib(std::size_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << double(bytes) / double(1ull << 30) << " GiB";
  return os.str();
}

int run_info(const Options&) {
  std::cout << "gratingsim " GRATINGSIM_VERSION "\n";
  std::cout << "build:     " GRATINGSIM_BUILD_TYPE ", C++ compiler " __VERSION__
#ifdef GRATINGSIM_SANITIZED
               ", AddressSanitizer + UndefinedBehaviorSanitizer"
#endif
               "\n";

  const conv::CudaReport cuda = conv::cuda_report();
  std::cout << "CUDA:      " << (cuda.built ? "backends built" : "backends not built");
  if (cuda.built) {
    std::cout << ", runtime " << conv::format_cuda_version(cuda.runtime_version) << ", driver "
              << (cuda.driver_version ? conv::format_cuda_version(cuda.driver_version) : std::string("none"));
  }
  std::cout << '\n';
  const conv::HostCpu cpu = conv::host_cpu();
  std::cout << "host CPU:  " << cpu.model << ", " << cpu.threads << " OpenMP thread" << (cpu.threads == 1 ? "" : "s") << "\n";
  const std::optional<std::string> mpi = mpi_library();
  std::cout << "MPI:       "
            << (mpi ? std::string("built in: mpirun -n K gratingsim run ... shares a sweep over K ranks")
                    : std::string("not built in (configure with -DGRATINGSIM_MPI=ON; Debian: libopenmpi-dev)"))
            << '\n';

  std::cout << "\nCUDA devices: " << cuda.devices.size();
  if (!cuda.problem.empty()) std::cout << " (" << cuda.problem << ")";
  std::cout << '\n';
  for (const auto& d : cuda.devices)
    std::cout << "  " << d.index << ": " << d.name << ", compute capability " << d.major << '.' << d.minor << ", "
              << d.multiprocessors << " SMs, " << gib(d.global_memory_bytes) << ", L2 " << (d.l2_cache_bytes >> 20)
              << " MiB, peak SM clock " << d.sm_clock_mhz << " MHz, peak memory clock " << d.memory_clock_mhz << " MHz, "
              << d.memory_bus_bits << "-bit bus\n";

  std::cout << "\nconvolution backends:\n";
  for (conv::Backend b : conv::all_backends)
    std::cout << "  " << std::left << std::setw(21) << conv::to_string(b) << availability(b) << '\n';

  std::cout << "\nlibraries:\n";
  std::cout << "  FFTW      " << conv::fftw_version() << '\n';
  if (cuda.built) std::cout << "  cuFFT     " << conv::cufft_version() << '\n';
  std::cout << "  OpenMP    " << _OPENMP << " (specification date)\n";
  const io::LibraryVersions io_libraries = io::library_versions();
  std::cout << "  HDF5      " << io_libraries.hdf5 << '\n';
  std::cout << "  yaml-cpp  " << io_libraries.yaml_cpp << '\n';
  std::cout << "  libpng    " << io_libraries.libpng << " (PNG raster masks)\n";
  std::cout << "  CLI11     " << command_line_library_version() << '\n';
  if (mpi) std::cout << "  MPI       " << *mpi << '\n';
  return 0;
}

}  // namespace

const Command gratingsim_info{
    .name = "info",
    .summary = "version, build, CUDA devices, available backends, library versions",
    .usage = "gratingsim info [--help]",
    .description = "Prints the version, the build, the CUDA devices, the convolution backends available here and the "
                   "versions of the libraries in use.",
    .run = run_info};

}  // namespace gratingsim::app
