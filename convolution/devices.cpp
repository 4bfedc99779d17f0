#include "convolution/devices.hpp"

#include <omp.h>

#include <fstream>
#include <string>

#include "core/error.hpp"
#include "core/config.hpp"

#if GRATINGSIM_HAVE_CUDA
#include "core/cuda_check.hpp"
#endif

namespace gratingsim::conv {

#if GRATINGSIM_HAVE_CUDA
namespace {
CudaDevice query_device(int index) {
  cudaDeviceProp p{};
  GS_CUDA_TRY(cudaGetDeviceProperties(&p, index));
  // Clock rates are device attributes (cudaDeviceProp lost its clock fields in CUDA 13), in kHz.
  int sm_khz = 0, memory_khz = 0;
  GS_CUDA_TRY(cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, index));
  GS_CUDA_TRY(cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, index));
  CudaDevice d;
  d.index = index;
  d.name = p.name;
  d.major = p.major;
  d.minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  d.global_memory_bytes = p.totalGlobalMem;
  d.l2_cache_bytes = static_cast<std::size_t>(p.l2CacheSize);
  d.sm_clock_mhz = sm_khz / 1000;
  d.memory_clock_mhz = memory_khz / 1000;
  d.memory_bus_bits = p.memoryBusWidth;
  return d;
}
}  // namespace

CudaReport cuda_report() {
  CudaReport r;
  r.built = true;
  cudaRuntimeGetVersion(&r.runtime_version);
  if (cudaDriverGetVersion(&r.driver_version) != cudaSuccess || r.driver_version == 0) {
    cudaGetLastError();
    r.problem = "no CUDA driver installed";
    return r;
  }
  int count = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
    cudaGetLastError();  // clear the error state of the failed query
    r.problem = std::string("no usable CUDA device: ") + cudaGetErrorString(status);
    return r;
  }
  if (count == 0) r.problem = "no CUDA device";
  for (int i = 0; i < count; ++i) r.devices.push_back(query_device(i));
  return r;
}

std::optional<int> current_cuda_device_index() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return std::nullopt;
  }
  int index = 0;
  GS_CUDA_TRY(cudaGetDevice(&index));
  return index;
}

std::optional<CudaDevice> current_cuda_device() {
  const std::optional<int> index = current_cuda_device_index();
  if (!index) return std::nullopt;
  return query_device(*index);
}

void use_cuda_device(int index) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) cudaGetLastError();
  GS_EXPECTS(index >= 0 && index < count,
          "CUDA device " + std::to_string(index) + " does not exist (" + std::to_string(count) + " visible)");
  GS_CUDA_TRY(cudaSetDevice(index));
}

std::string cufft_version() {
  int v = 0;
  GS_CUFFT_TRY(cufftGetVersion(&v));  // encoded 1000·major + 100·minor + patch
  return std::to_string(v / 1000) + '.' + std::to_string(v % 1000 / 100) + '.' + std::to_string(v % 100);
}
#else
CudaReport cuda_report() {
  CudaReport r;
  r.problem = "built without CUDA";
  return r;
}
std::optional<CudaDevice> current_cuda_device() { return std::nullopt; }
std::optional<int> current_cuda_device_index() { return std::nullopt; }
void use_cuda_device(int) { GS_SUPPORTS(false, "CUDA devices: this build has no CUDA backends"); }
std::string cufft_version() { return {}; }
#endif

std::string format_cuda_version(int version) {
  return std::to_string(version / 1000) + '.' + std::to_string(version % 1000 / 10);
}

HostCpu host_cpu() {
  HostCpu cpu{"unknown CPU", omp_get_max_threads()};
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    if (const auto colon = line.find(':'); colon != std::string::npos) {
      const auto begin = line.find_first_not_of(" \t", colon + 1);
      if (begin != std::string::npos) cpu.model = line.substr(begin);
    }
    break;
  }
  return cpu;
}

std::string describe(const HostCpu& cpu) {
  return cpu.model + " (" + std::to_string(cpu.threads) + (cpu.threads == 1 ? " thread)" : " threads)");
}

}  // namespace gratingsim::conv
