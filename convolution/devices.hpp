#pragma once
// What this build and machine offer: CUDA devices, the host CPU, library versions. For `gratingsim
// info`, for labelling benchmark rows and for the autotune cache key. No CUDA or FFTW header here.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gratingsim::conv {

struct CudaDevice {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  ///< compute capability
  int multiprocessors = 0;
  std::size_t global_memory_bytes = 0;
  std::size_t l2_cache_bytes = 0;
  int sm_clock_mhz = 0;      ///< peak SM clock
  int memory_clock_mhz = 0;  ///< peak memory clock
  int memory_bus_bits = 0;
};

struct CudaReport {
  bool built = false;       ///< this build has the CUDA backends
  int runtime_version = 0;  ///< CUDA runtime linked in, encoded 1000·major + 10·minor (13000 = 13.0)
  int driver_version = 0;   ///< newest CUDA version the installed driver supports; 0 without a driver
  std::string problem;      ///< why no device is listed (not built, no driver, no device); else empty
  std::vector<CudaDevice> devices;
};

/// Queries the CUDA runtime; never throws for a missing driver or device (that is `problem`).
CudaReport cuda_report();

/// The device the GPU backends run on (the calling thread's current device); nullopt without one.
std::optional<CudaDevice> current_cuda_device();
/// The index of that device alone (no property query); nullopt without one.
std::optional<int> current_cuda_device_index();

/// Makes device `index` (0-based, among the devices CUDA_VISIBLE_DEVICES leaves visible) the calling
/// thread's current device, on which the GPU backends then plan and run (cudaSetDevice: per thread,
/// so a thread that solves on another device calls it first). InvalidArgument for an index out of
/// range; Unsupported in a build without CUDA.
void use_cuda_device(int index);

/// 13000 → "13.0", 12040 → "12.4".
std::string format_cuda_version(int version);

/// libfftw3's own version string, e.g. "fftw-3.3.10-sse2-avx" (defined in cpu_fftw.cpp, beside fftw3.h).
std::string fftw_version();

/// cuFFT's version, e.g. "12.0.0"; empty when built without CUDA.
std::string cufft_version();

struct HostCpu {
  std::string model;  ///< "model name" of /proc/cpuinfo, or "unknown CPU"
  int threads = 1;    ///< OpenMP threads a CPU backend uses (omp_get_max_threads)
};
HostCpu host_cpu();

/// "AMD EPYC 9654 (16 threads)": how CPU benchmark rows name their device.
std::string describe(const HostCpu& cpu);

}  // namespace gratingsim::conv
