// Device code of the CUDA recurrent cell (launcher: kernels/cuda/recurrent.h): one step of an LSTM
// or GRU direction, a thread per (batch, hidden) element of kernels/cuda/recurrent_body.h's
// RecurrentCellAt; kernels/cuda/recurrent_driver.h runs the steps.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/recurrent.h"
#include "kernels/cuda/recurrent_body.h"

namespace whittle::cuda {
namespace {

__global__ void RecurrentCellKernel(RecurrentStep s, int64_t n) { WH_GRID_STRIDE(i, n) RecurrentCellAt(s, i); }

}  // namespace

void LaunchRecurrentCell(const RecurrentStep& s, void* stream) {
  const int64_t n = s.batch * s.hidden;
  if (n > 0) RecurrentCellKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(s, n);
}

}  // namespace whittle::cuda
