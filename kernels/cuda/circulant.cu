// Device code of the CUDA block-circulant layer: the pad, bin-product and epilogue bodies of
// kernels/cuda/circulant_body.h as grid-stride kernels, and the batched real FFTs on cuFFT. Plans
// are made once per (B, count, direction) per thread (a plan holds its work area and is bound to
// the thread's stream, so threads never share one) and kept for the thread's life.
#include <cuda_runtime.h>
#include <cufft.h>

#include <map>
#include <tuple>

#include "kernels/cuda/circulant.h"
#include "kernels/cuda/circulant_body.h"
#include "kernels/cuda/launch.cuh"

namespace whittle::cuda {
namespace {

__global__ void CircPadKernel(const float* x, float* xp, CircShape c) {
  WH_GRID_STRIDE(i, c.M * c.Q * c.B) CircPadAt(x, xp, c, i);
}
__global__ void CircBinKernel(const float* cf, const float* xf, float* yf, CircShape c) {
  WH_GRID_STRIDE(i, c.M * c.P * c.H()) CircBinAt(cf, xf, yf, c, i);
}
__global__ void CircOutKernel(const float* yp, const float* bias, bool relu, float* y, CircShape c) {
  WH_GRID_STRIDE(i, c.M * c.N) CircOutAt(yp, bias, relu, y, c, i);
}

// This thread's plan for count transforms of length B (0 when cuFFT could not make one).
cufftHandle PlanFor(int64_t B, int64_t count, cufftType type) {
  struct Plans {
    std::map<std::tuple<int64_t, int64_t, int>, cufftHandle> by_shape;
    ~Plans() {
      for (auto& [key, plan] : by_shape) cufftDestroy(plan);
    }
  };
  thread_local Plans plans;
  const auto key = std::make_tuple(B, count, static_cast<int>(type));
  auto it = plans.by_shape.find(key);
  if (it != plans.by_shape.end()) return it->second;
  cufftHandle plan = 0;
  int n = static_cast<int>(B);
  if (B > (1 << 30) || count > (1 << 30) ||
      cufftPlanMany(&plan, 1, &n, nullptr, 1, 0, nullptr, 1, 0, type, static_cast<int>(count)) != CUFFT_SUCCESS)
    return 0;
  if (cufftSetStream(plan, cudaStreamPerThread) != CUFFT_SUCCESS) {
    cufftDestroy(plan);
    return 0;
  }
  plans.by_shape.emplace(key, plan);
  return plan;
}

class StreamCLaunches : public CLaunches {
 public:
  void Pad(const float* x, float* xp, const CircShape& c) override {
    const int64_t n = c.M * c.Q * c.B;
    if (n > 0) CircPadKernel<<<Blocks(n), kThreads, 0, s_>>>(x, xp, c);
  }
  bool R2C(const float* in, float* out, int64_t B, int64_t count) override {
    const cufftHandle p = PlanFor(B, count, CUFFT_R2C);
    return p && cufftExecR2C(p, const_cast<cufftReal*>(in), reinterpret_cast<cufftComplex*>(out)) == CUFFT_SUCCESS;
  }
  void Bins(const float* cf, const float* xf, float* yf, const CircShape& c) override {
    const int64_t n = c.M * c.P * c.H();
    if (n > 0) CircBinKernel<<<Blocks(n), kThreads, 0, s_>>>(cf, xf, yf, c);
  }
  bool C2R(float* in, float* out, int64_t B, int64_t count) override {
    const cufftHandle p = PlanFor(B, count, CUFFT_C2R);
    return p && cufftExecC2R(p, reinterpret_cast<cufftComplex*>(in), out) == CUFFT_SUCCESS;
  }
  void Out(const float* yp, const float* bias, bool relu, float* y, const CircShape& c) override {
    const int64_t n = c.M * c.N;
    if (n > 0) CircOutKernel<<<Blocks(n), kThreads, 0, s_>>>(yp, bias, relu, y, c);
  }

 private:
  cudaStream_t s_ = cudaStreamPerThread;
};

}  // namespace

CLaunches& CudaCLaunches() {
  static StreamCLaunches launches;
  return launches;
}

}  // namespace whittle::cuda
