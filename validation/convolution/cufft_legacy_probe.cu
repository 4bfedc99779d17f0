// Probe (issue #16, not built by CMake): does cuFFT on this host run a C2C transform with a legacy
// (separately compiled, non-LTO) load callback? Legacy callbacks need the static cuFFT (libcufft_static.a,
// still shipped with CUDA 13.0; only libcufft_static_nocallback.a was removed) and relocatable device code:
// the callback is a __device__ function whose address the host reads from a __device__ pointer variable and
// hands to cufftXtSetCallback after planning. Build and run:
//   nvcc -std=c++17 -rdc=true -arch=sm_90 validation/convolution/cufft_legacy_probe.cu -o /tmp/legacy_probe \
//        -lcufft_static -lculibos && /tmp/legacy_probe
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <cufft.h>
#include <cufftXt.h>

__device__ cufftComplex scale_load(void* in, size_t offset, void*, void*) {
  cufftComplex v = static_cast<cufftComplex*>(in)[offset];
  v.x *= 2.0f;
  v.y *= 2.0f;
  return v;
}
__device__ cufftCallbackLoadC scale_load_pointer = scale_load;

int main() {
  cufftHandle plan;
  cufftCreate(&plan);
  int lengths[2] = {64, 64};
  size_t work = 0;
  cufftResult c = cufftMakePlanMany(plan, 2, lengths, nullptr, 1, 4096, nullptr, 1, 4096, CUFFT_C2C, 4, &work);
  std::printf("cufftMakePlanMany: %d\n", int(c));
  cufftCallbackLoadC host_pointer = nullptr;
  cudaError_t e = cudaMemcpyFromSymbol(&host_pointer, scale_load_pointer, sizeof host_pointer);
  std::printf("cudaMemcpyFromSymbol: %s\n", cudaGetErrorString(e));
  c = cufftXtSetCallback(plan, reinterpret_cast<void**>(&host_pointer), CUFFT_CB_LD_COMPLEX, nullptr);
  std::printf("cufftXtSetCallback (legacy): %d\n", int(c));
  if (c != CUFFT_SUCCESS) return 2;
  std::vector<cufftComplex> h(4 * 4096);
  for (auto& v : h) v = {float(rand()) / RAND_MAX, float(rand()) / RAND_MAX};
  cufftComplex *d, *o;
  cudaMalloc(&d, h.size() * 8);
  cudaMalloc(&o, h.size() * 8);
  cudaMemcpy(d, h.data(), h.size() * 8, cudaMemcpyHostToDevice);
  c = cufftExecC2C(plan, d, o, CUFFT_FORWARD);
  cudaDeviceSynchronize();
  std::vector<cufftComplex> a(h.size());
  cudaMemcpy(a.data(), o, a.size() * 8, cudaMemcpyDeviceToHost);
  double s = 0;
  for (int i = 0; i < 4096; ++i) s += h[i].x;
  std::printf("exec %d: out[0].x = %.6f, expected 2*sum = %.6f\n", int(c), a[0].x, 2 * s);
  return 0;
}
