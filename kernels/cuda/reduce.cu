// Device code of the CUDA reductions (launcher: kernels/cuda/reduce.h; bodies: kernels/cuda/
// grad_body.h's ReduceShareAt): one block per output for the long reductions (kThreads shares, a
// fixed tree), so a reduction over N*H*W elements into C outputs (a Conv bias's gradient) still
// fills the GPU, and one thread per output for the short ones (kSerialReduceMax elements or fewer).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/grad_body.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.h"

namespace whittle::cuda {
namespace {

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

}  // namespace

void LaunchReduce(const float* x, float* y, const ReduceShape& r, void* stream) {
  if (r.outputs <= 0) return;
  if (r.count <= kSerialReduceMax) {
    ReduceSerialKernel<<<Blocks(r.outputs), kThreads, 0, S(stream)>>>(x, y, r);
    return;
  }
  ReduceKernel<<<static_cast<unsigned>(r.outputs < 65535 ? r.outputs : 65535), kThreads, 0, S(stream)>>>(x, y, r);
}

}  // namespace whittle::cuda
