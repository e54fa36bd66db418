// The optimizer's element-wise work on the GPU (kernels/param_update.h): UpdateAt over a
// parameter tensor in one grid-stride kernel, and the gradient's squared norm as kSumBlocks x
// kThreads fixed shares (SquaresShare) reduced per block in a fixed tree and then on the host in
// block order — so the norm, and the clipping it decides, does not vary from run to run.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/launch.cuh"
#include "kernels/param_update.h"

namespace whittle::cuda {
namespace {

constexpr int kSumBlocks = 128;

__global__ void UpdateKernel(UpdateHyper h, float* p, const float* g, float* m, float* v, int64_t n) {
  WH_GRID_STRIDE(i, n) UpdateAt(h, p, g, m, v, i);
}

__global__ void __launch_bounds__(kThreads) SquaresKernel(const float* g, int64_t n, double* partial) {
  __shared__ double s[kThreads];
  const int64_t shares = static_cast<int64_t>(kSumBlocks) * kThreads;
  s[threadIdx.x] = SquaresShare(g, n, blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x, shares);
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

Status Fail(cudaError_t e, const char* what) {
  return Internal(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

Status SumSquares(const float* g, int64_t n, int, double* sum) {
  *sum = 0;
  if (n == 0) return Status::Ok();
  struct Partials {  // this thread's device buffer of block sums
    double* p = nullptr;
    ~Partials() {
      if (p) cudaFree(p);
    }
  };
  thread_local Partials part;
  if (!part.p)
    if (cudaError_t e = cudaMalloc(&part.p, sizeof(double) * kSumBlocks); e != cudaSuccess) return Fail(e, "cudaMalloc");
  SquaresKernel<<<kSumBlocks, kThreads, 0, cudaStreamPerThread>>>(g, n, part.p);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return Fail(e, "the squared-norm kernel");
  double host[kSumBlocks];
  if (cudaError_t e = cudaMemcpyAsync(host, part.p, sizeof(host), cudaMemcpyDeviceToHost, cudaStreamPerThread);
      e != cudaSuccess)
    return Fail(e, "cudaMemcpyAsync");
  if (cudaError_t e = cudaStreamSynchronize(cudaStreamPerThread); e != cudaSuccess) return Fail(e, "the squared norm");
  for (double v : host) *sum += v;
  return Status::Ok();
}

Status Update(const UpdateHyper& h, float* p, const float* g, float* m, float* v, int64_t n, int) {
  if (n == 0) return Status::Ok();
  UpdateKernel<<<Blocks(n), kThreads, 0, cudaStreamPerThread>>>(h, p, g, m, v, n);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return Fail(e, "the optimizer update kernel");
  return Status::Ok();
}

const ParamUpdates kUpdates = [] {
  ParamUpdates u;
  u.sum_squares = SumSquares;
  u.update = Update;
  return u;
}();

}  // namespace

const ParamUpdates& CudaParamUpdates() { return kUpdates; }

}  // namespace whittle::cuda
