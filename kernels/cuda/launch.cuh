// What the CUDA backend's .cu files share to launch grid-stride kernels: the block size, the grid
// for n elements (capped; the kernels stride over the rest) and the stream behind a void*.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace whittle::cuda {

constexpr int kThreads = 256;

// for (i = this thread's first element; i < n; i += the grid's threads)
#define WH_GRID_STRIDE(i, n)                                                              \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

inline cudaStream_t S(void* s) { return static_cast<cudaStream_t>(s); }

inline unsigned Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b < 1 ? 1 : b) : 65535 * 16);
}

// Whether a grid-stride loop over n can count in int32_t: n and every step past it fit.
inline bool Fits32(int64_t n) { return n + static_cast<int64_t>(Blocks(n)) * kThreads < (int64_t{1} << 31); }

}  // namespace whittle::cuda
