// Device code of the CUDA QuantizeLinear and DequantizeLinear (launchers: kernels/cuda/quant.h):
// one thread per element of kernels/cuda/quant_body.h's bodies, which the CPU tests check against
// the reference kernels bit for bit.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/quant.h"
#include "kernels/cuda/quant_body.h"

namespace whittle::cuda {
namespace {

__global__ void QuantizeKernel(QuantizeArgs a, int64_t n) { WH_GRID_STRIDE(i, n) QuantizeAt(a, i); }
__global__ void DequantizeKernel(QuantizeArgs a, int64_t n) { WH_GRID_STRIDE(i, n) DequantizeAt(a, i); }

}  // namespace

void LaunchQuantize(const QuantizeArgs& a, int64_t n, void* stream) {
  if (n > 0) QuantizeKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(a, n);
}

void LaunchDequantize(const QuantizeArgs& a, int64_t n, void* stream) {
  if (n > 0) DequantizeKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(a, n);
}

}  // namespace whittle::cuda
