// Device code of the CUDA Resize (launcher: kernels/cuda/resize.h): one thread per output element
// of kernels/cuda/resize_body.h's ResizeAt over the geometry tables the host code uploaded.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/resize.h"
#include "kernels/cuda/resize_body.h"

namespace whittle::cuda {
namespace {

__global__ void ResizeKernel(const float* x, float* y, ResizeGeom g, int64_t n) {
  WH_GRID_STRIDE(i, n) ResizeAt(x, y, g, i);
}

}  // namespace

void LaunchResize(const float* x, float* y, const ResizeGeom& g, int64_t n, void* stream) {
  if (n > 0) ResizeKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(x, y, g, n);
}

}  // namespace whittle::cuda
