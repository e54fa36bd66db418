// Device drivers of the training graph's ops (kernels/cuda/grad_body.h): one thread per output
// element for col2im, the pool gradients, the broadcast copy, ReluGrad and BatchNormalization;
// one block per output for the long reductions (kThreads shares, a fixed tree), so a reduction over
// N*H*W elements into C outputs (a Conv bias's gradient) still fills the GPU, and one thread per
// output for the short ones (kSerialReduceMax elements or fewer).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/grad_body.h"
#include "kernels/cuda/kernels_impl.h"
#include "kernels/cuda/launch.cuh"

namespace whittle::cuda {
namespace {

__global__ void Col2imKernel(const float* col, float* x, Window2d w, int64_t n) { WH_GRID_STRIDE(i, n) Col2imAt(col, x, w, i); }

__global__ void PoolGradKernel(const float* x, const float* dy, float* dx, Window2d w, int mode, bool include_pad,
                               int64_t n) {
  WH_GRID_STRIDE(i, n) PoolGradAt(x, dy, dx, w, mode, include_pad, i);
}

__global__ void StridedCopyKernel(const float* x, float* y, BroadcastShape s, int64_t n) {
  WH_GRID_STRIDE(i, n) StridedCopyAt(x, y, s, i);
}

__global__ void ReluGradKernel(const float* y, const float* dy, float* dx, int64_t n) {
  WH_GRID_STRIDE(i, n) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

__global__ void __launch_bounds__(kThreads) ReduceKernel(const float* x, float* y, ReduceShape r) {
  __shared__ float s[kThreads];
  for (int64_t o = blockIdx.x; o < r.outputs; o += gridDim.x) {
    s[threadIdx.x] = ReduceShareAt(x, r, o, threadIdx.x, kThreads);
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) s[threadIdx.x] = ReduceCombine(r.op, s[threadIdx.x], s[threadIdx.x + w]);
      __syncthreads();
    }
    if (threadIdx.x == 0) y[o] = s[0] * r.scale;
    __syncthreads();  // s is rewritten for the next output
  }
}

// One thread per output, summing its elements in order: for short reductions, where a block per
// output left most of its threads idle behind a tree of barriers (the exported transformer's
// ReduceMean over 16 tokens into [1024, 192] outputs: 65535 blocks of 256 threads, 16 busy).
__global__ void ReduceSerialKernel(const float* x, float* y, ReduceShape r) {
  WH_GRID_STRIDE(o, r.outputs) y[o] = ReduceShareAt(x, r, o, 0, 1) * r.scale;
}

__global__ void BatchNormKernel(const float* x, const float* scale, const float* bias, const float* mean,
                                const float* var, float eps, int64_t channels, int64_t inner, float* y, int64_t n) {
  WH_GRID_STRIDE(i, n) BatchNormAt(x, scale, bias, mean, var, eps, channels, inner, y, i);
}

}  // namespace

void LaunchCol2im(const float* col, float* x, int64_t channels, const Window2d& w, void* stream) {
  const int64_t n = channels * w.in_h * w.in_w;
  if (n > 0) Col2imKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(col, x, w, n);
}

void LaunchPoolGrad2d(const float* x, const float* dy, float* dx, int64_t planes, const Window2d& w, bool max,
                      bool count_include_pad, void* stream) {
  const int64_t n = planes * w.in_h * w.in_w;
  if (n > 0) PoolGradKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(x, dy, dx, w, max ? 0 : 1, count_include_pad, n);
}

void LaunchStridedCopy(const float* x, float* y, const BroadcastShape& s, int64_t n, void* stream) {
  if (n > 0) StridedCopyKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(x, y, s, n);
}

void LaunchReluGrad(const float* y, const float* dy, float* dx, int64_t n, void* stream) {
  if (n > 0) ReluGradKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(y, dy, dx, n);
}

void LaunchReduce(const float* x, float* y, const ReduceShape& r, void* stream) {
  if (r.outputs <= 0) return;
  if (r.count <= kSerialReduceMax) {
    ReduceSerialKernel<<<Blocks(r.outputs), kThreads, 0, S(stream)>>>(x, y, r);
    return;
  }
  ReduceKernel<<<static_cast<unsigned>(r.outputs < 65535 ? r.outputs : 65535), kThreads, 0, S(stream)>>>(x, y, r);
}

void LaunchBatchNorm(const float* x, const float* scale, const float* bias, const float* mean, const float* var,
                     float eps, int64_t n, int64_t channels, int64_t inner, float* y, void* stream) {
  const int64_t total = n * channels * inner;
  if (total > 0)
    BatchNormKernel<<<Blocks(total), kThreads, 0, S(stream)>>>(x, scale, bias, mean, var, eps, channels, inner, y, total);
}

}  // namespace whittle::cuda
