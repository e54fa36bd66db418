// Device code of the CUDA normalizations (launchers: kernels/cuda/norm.h): LayerNormalization and
// InstanceNormalization a block per row (block sums over warp shuffles, two passes as the CPU), and
// inference-form BatchNormalization a thread per element (kernels/cuda/grad_body.h's BatchNormAt).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/grad_body.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/unary_body.h"

namespace whittle::cuda {
namespace {

// The sum of v over the block (kThreads threads, a multiple of 32), for every thread.
__device__ float BlockSum(float v, float* shared) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // shared may still be read by the previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : 0.f;
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A block per row: the mean, then the variance of the deviations (two passes, as the CPU), then y.
__global__ void LayerNormKernel(const float* x, const float* scale, const float* bias, float* y, int64_t rows,
                                int64_t cols, float eps, int64_t row_channels) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) s += xr[k];
    const float mean = BlockSum(s, shared) / static_cast<float>(cols);
    float v = 0.f;
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) {
      const float d = xr[k] - mean;
      v += d * d;
    }
    const float inv = 1.f / sqrtf(BlockSum(v, shared) / static_cast<float>(cols) + eps);
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x)
      yr[k] = NormAffine((xr[k] - mean) * inv, scale, bias, row_channels, r, k);
  }
}

__global__ void BatchNormKernel(const float* x, const float* scale, const float* bias, const float* mean,
                                const float* var, float eps, int64_t channels, int64_t inner, float* y, int64_t n) {
  WH_GRID_STRIDE(i, n) BatchNormAt(x, scale, bias, mean, var, eps, channels, inner, y, i);
}

}  // namespace

void LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t rows, int64_t cols,
                     float eps, void* stream, int64_t row_channels) {
  if (rows > 0 && cols > 0)
    LayerNormKernel<<<static_cast<unsigned>(std::min<int64_t>(rows, 65535)), kThreads, 0, S(stream)>>>(
        x, scale, bias, y, rows, cols, eps, row_channels);
}

void LaunchBatchNorm(const float* x, const float* scale, const float* bias, const float* mean, const float* var,
                     float eps, int64_t n, int64_t channels, int64_t inner, float* y, void* stream) {
  const int64_t total = n * channels * inner;
  if (total > 0)
    BatchNormKernel<<<Blocks(total), kThreads, 0, S(stream)>>>(x, scale, bias, mean, var, eps, channels, inner, y, total);
}

}  // namespace whittle::cuda
