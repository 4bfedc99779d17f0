// Probe (issue #16, not built by CMake): does cuFFT on this host plan a C2C transform with an LTO load
// callback whose LTO-IR NVRTC makes at run time (-dlto), rather than the offline nvcc fatbin the
// gpu-cufft-callbacks backend embeds? On the lent H100 (CUDA 13.0) it printed NVRTC_SUCCESS, 2004 bytes of
// LTO-IR, cufftXtSetJITCallback 0, and cufftMakePlanMany 5 (CUFFT_INTERNAL_ERROR). Build and run:
//   nvcc -std=c++17 -arch=sm_90 validation/convolution/cufft_lto_probe.cu -o /tmp/lto_probe -lcufft -lnvrtc && /tmp/lto_probe
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <cufft.h>
#include <cufftXt.h>
#include <nvrtc.h>
static const char* source = R"(
extern "C" __device__ float2 scale_load(void* in, unsigned long long offset, void* info, void* shared) {
  float2 v = static_cast<float2*>(in)[offset];
  v.x *= 2.0f; v.y *= 2.0f;
  return v;
})";
int main() {
  int dev = 0; cudaDeviceProp prop; cudaGetDeviceProperties(&prop, dev);
  char arch[64]; std::snprintf(arch, sizeof arch, "-arch=sm_%d%d", prop.major, prop.minor);
  nvrtcProgram prog; nvrtcCreateProgram(&prog, source, "cb.cu", 0, nullptr, nullptr);
  const char* opts[] = {arch, "-dlto", "-rdc=true"};
  nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
  size_t logn; nvrtcGetProgramLogSize(prog, &logn); std::vector<char> log(logn + 1); nvrtcGetProgramLog(prog, log.data());
  std::printf("nvrtc compile: %s %s\n", nvrtcGetErrorString(r), log.data());
  if (r != NVRTC_SUCCESS) return 1;
  size_t n; nvrtcGetLTOIRSize(prog, &n); std::vector<char> ltoir(n); nvrtcGetLTOIR(prog, ltoir.data());
  std::printf("LTO-IR bytes %zu\n", n);
  cufftHandle plan; cufftCreate(&plan);
  cufftResult c = cufftXtSetJITCallback(plan, "scale_load", ltoir.data(), n, CUFFT_CB_LD_COMPLEX, nullptr);
  std::printf("cufftXtSetJITCallback: %d\n", int(c));
  int lengths[2] = {64, 64}; size_t work = 0;
  c = cufftMakePlanMany(plan, 2, lengths, nullptr, 1, 4096, nullptr, 1, 4096, CUFFT_C2C, 4, &work);
  std::printf("cufftMakePlanMany with NVRTC LTO-IR callback: %d\n", int(c));
  if (c != CUFFT_SUCCESS) return 2;
  std::vector<cufftComplex> h(4 * 4096); for (size_t i = 0; i < h.size(); ++i) h[i] = {float(rand()) / RAND_MAX, float(rand()) / RAND_MAX};
  cufftComplex *d, *o; cudaMalloc(&d, h.size() * 8); cudaMalloc(&o, h.size() * 8);
  cudaMemcpy(d, h.data(), h.size() * 8, cudaMemcpyHostToDevice);
  c = cufftExecC2C(plan, d, o, CUFFT_FORWARD); cudaDeviceSynchronize();
  std::vector<cufftComplex> a(h.size()); cudaMemcpy(a.data(), o, a.size() * 8, cudaMemcpyDeviceToHost);
  double s = 0; for (int i = 0; i < 4096; ++i) s += h[i].x;
  std::printf("exec %d: out[0].x = %.6f, expected 2*sum = %.6f\n", int(c), a[0].x, 2 * s);
  return 0;
}
