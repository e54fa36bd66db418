// Device code of the CUDA MatMulNBits (launcher: kernels/cuda/nbits.h): the drivers map the grid
// onto kernels/cuda/nbits_body.h, which tests/kernels/cuda_nbits_body_test.cc runs on the CPU.
// Few rows: a warp per output column, each lane 16 codes per 8-byte load, a shuffle reduction.
// Many rows: a 64 x 64 tile per block, the codes decoded into shared memory once per tile.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/nbits.h"
#include "kernels/cuda/nbits_body.h"

namespace whittle::cuda {
namespace {

constexpr int64_t kMaxGridY = 65535;

// blockIdx.x: kNBitsWarps columns; blockIdx.y: kNBitsRows rows from m_base.
__global__ void __launch_bounds__(kNBitsWarps * kNBitsLanes) GemvKernel(NBitsArgs g) {
  const int lane = static_cast<int>(threadIdx.x) % kNBitsLanes, warp = static_cast<int>(threadIdx.x) / kNBitsLanes;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kNBitsWarps + warp;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kNBitsRows;
  if (n >= g.N) return;  // the whole warp leaves together: the shuffles below see full warps
  float acc[kNBitsRows] = {};
  NBitsLaneDot(g, n, m0, lane, acc);
  for (int r = 0; r < kNBitsRows; ++r)
    for (int off = kNBitsLanes / 2; off > 0; off /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
  if (lane == 0)
    for (int r = 0; r < kNBitsRows && m0 + r < g.M; ++r) NBitsStore(g, m0 + r, n, acc[r]);
}

__global__ void __launch_bounds__(kNBitsThreads) TileKernel(NBitsArgs g) {
  __shared__ NBitsTileSmem s;
  float acc[4][4] = {};
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kNBitsTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kNBitsTileN;
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t k0 = 0; k0 < g.K; k0 += kNBitsTileK) {
    NBitsTileLoad(g, m0, n0, k0, tid, s);
    __syncthreads();
    NBitsTileMac(s, tid, acc);
    __syncthreads();
  }
  NBitsTileStore(g, m0, n0, tid, acc);
}

}  // namespace

void LaunchMatMulNBits(const NBitsArgs& g, void* stream) {
  if (g.M <= 0 || g.N <= 0) return;
  if (NBitsUseGemv(g.M)) {
    const dim3 grid(static_cast<unsigned>((g.N + kNBitsWarps - 1) / kNBitsWarps),
                    static_cast<unsigned>((g.M + kNBitsRows - 1) / kNBitsRows));
    GemvKernel<<<grid, kNBitsWarps * kNBitsLanes, 0, S(stream)>>>(g);
    return;
  }
  // Slices of at most kMaxGridY row tiles (grid.y's limit), each its own launch on the stream.
  const int64_t slice = kMaxGridY * kNBitsTileM;
  for (int64_t m = 0; m < g.M; m += slice) {
    NBitsArgs s = g;
    s.M = std::min(slice, g.M - m);
    s.a = g.a + m * g.K;
    s.y = g.y + m * g.N;
    const dim3 grid(static_cast<unsigned>((g.N + kNBitsTileN - 1) / kNBitsTileN),
                    static_cast<unsigned>((s.M + kNBitsTileM - 1) / kNBitsTileM));
    TileKernel<<<grid, kNBitsThreads, 0, S(stream)>>>(s);
  }
}

}  // namespace whittle::cuda
