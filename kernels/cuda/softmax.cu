// Device code of the CUDA Softmax (launcher: kernels/cuda/softmax.h): a warp per row of scale * x
// (+ the fused Attention's mask, kernels/cuda/softmax_body.h), max, sum of exp, then the outputs.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/softmax_body.h"

namespace whittle::cuda {
namespace {

// One warp per row of scale * x (+ the mask; scale: one device float, or null for 1): max, sum
// of exp, then the outputs.
__global__ void SoftmaxKernel(const float* x, float* y, int64_t rows, int64_t cols, bool log, const float* scale,
                              SoftmaxMask mask) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float c = scale ? *scale : 1.f;
  float* yr = y + row * cols;
  float m = -FLT_MAX;
  for (int64_t k = lane; k < cols; k += 32) m = fmaxf(m, SoftmaxInput(x, c, mask, cols, row, k));
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.f;
  for (int64_t k = lane; k < cols; k += 32) s += expf(SoftmaxInput(x, c, mask, cols, row, k) - m);
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  const float ls = logf(s);
  for (int64_t k = lane; k < cols; k += 32) {
    const float v = SoftmaxInput(x, c, mask, cols, row, k);
    yr[k] = log ? v - m - ls : expf(v - m) / s;
  }
}

}  // namespace

void LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t cols, bool log, void* stream, const float* scale,
                   const SoftmaxMask* mask) {
  const int64_t rows_per_block = kThreads / 32;
  if (rows > 0)
    SoftmaxKernel<<<static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block), kThreads, 0, S(stream)>>>(
        x, y, rows, cols, log, scale, mask ? *mask : SoftmaxMask{});
}

}  // namespace whittle::cuda
