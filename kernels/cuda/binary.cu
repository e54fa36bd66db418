// Device code of the CUDA binarized and weight-shared layers: the XNOR/popcount and the decoding
// tile products, sign packing, beta and the bit im2col (phases of kernels/cuda/binary_body.h,
// __syncthreads between them). The drivers only map the grid onto the bodies, which
// tests/kernels/cuda_body_test.cc runs on the CPU against the reference kernels.
#include <cuda_runtime.h>

#include "kernels/cuda/binary.h"
#include "kernels/cuda/binary_body.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/launch.cuh"

namespace whittle::cuda {
namespace {

__global__ void __launch_bounds__(kBThreads) XnorTileKernel(BTileArgs g, BOut o) {
  __shared__ BTileSmem s;
  int32_t acc[4][4] = {};
  const int64_t z = blockIdx.z, m0 = static_cast<int64_t>(blockIdx.y) * kBTileM,
                n0 = static_cast<int64_t>(blockIdx.x) * kBTileN;
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t kw0 = 0; kw0 < g.words; kw0 += kBTileKw) {
    BTileLoad(g, o.groups, z, m0, n0, kw0, tid, s);
    __syncthreads();
    BTileCount(s, tid, acc);
    __syncthreads();
  }
  BTileStore(g, o, z, m0, n0, tid, acc);
}

__global__ void __launch_bounds__(kBThreads) DecodeTileKernel(FTileArgs g, BOut o) {
  __shared__ FTileSmem s;
  float acc[4][4] = {};
  const int64_t z = blockIdx.z, m0 = static_cast<int64_t>(blockIdx.y) * kBTileM,
                n0 = static_cast<int64_t>(blockIdx.x) * kBTileN;
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t k0 = 0; k0 < g.K; k0 += kFTileK) {
    FTileLoad(g, o.groups, z, m0, n0, k0, tid, s);
    __syncthreads();
    FTileMac(s, tid, acc);
    __syncthreads();
  }
  FTileStore(g, o, z, m0, n0, tid, acc);
}

__global__ void PackKernel(const float* x, int64_t ld, int64_t rows, int64_t k, int64_t words, uint64_t* bits) {
  WH_GRID_STRIDE(i, rows * words) BPackWord(x, ld, k, words, i / words, i % words, bits);
}

// One block per row.
__global__ void __launch_bounds__(kBThreads) AbsMeanKernel(const float* x, int64_t len, float* beta) {
  __shared__ float shares[kBThreads];
  const int64_t r = blockIdx.x;
  shares[threadIdx.x] = BAbsShare(x + r * len, len, static_cast<int>(threadIdx.x));
  __syncthreads();
  if (threadIdx.x == 0) beta[r] = BAbsMean(shares, len);
}

__global__ void BitIm2colKernel(BConvGeometry g, const float* x, int64_t zs, uint64_t* a) {
  const int64_t per = g.P() * g.words;
  WH_GRID_STRIDE(i, zs * per) BIm2colWord(g, x, i / per, (i % per) / g.words, i % g.words, a);
}

__global__ void MaskKernel(BConvGeometry g, uint64_t* mask, int32_t* valid) {
  WH_GRID_STRIDE(p, g.P()) BMaskRow(g, p, mask, valid);
}

dim3 TileGrid(int64_t M, int64_t N, int64_t batches) {
  return dim3(static_cast<unsigned>(BCeil(N, kBTileN)), static_cast<unsigned>(BCeil(M, kBTileM)),
              static_cast<unsigned>(batches));
}

class StreamBLaunches : public BLaunches {
 public:
  void Pack(const float* x, int64_t ld, int64_t rows, int64_t k, uint64_t* bits) override {
    const int64_t words = BCeil(k, 64);
    if (rows * words > 0) PackKernel<<<Blocks(rows * words), kThreads, 0, s_>>>(x, ld, rows, k, words, bits);
  }
  void AbsMean(const float* x, int64_t rows, int64_t len, float* beta) override {
    if (rows > 0) AbsMeanKernel<<<static_cast<unsigned>(rows), kBThreads, 0, s_>>>(x, len, beta);
  }
  void BitIm2col(const BConvGeometry& g, const float* x, int64_t zs, uint64_t* a) override {
    const int64_t n = zs * g.P() * g.words;
    if (n > 0) BitIm2colKernel<<<Blocks(n), kThreads, 0, s_>>>(g, x, zs, a);
  }
  void Mask(const BConvGeometry& g, uint64_t* mask, int32_t* valid) override {
    if (g.P() > 0) MaskKernel<<<Blocks(g.P()), kThreads, 0, s_>>>(g, mask, valid);
  }
  void Im2col(const float* x, int64_t x_stride, float* col, int64_t col_stride, int64_t images, int64_t channels,
              const Window2d& w) override {
    LaunchIm2col(x, x_stride, col, col_stride, images, channels, w, s_);
  }
  void Xnor(const BTileArgs& g, const BOut& o, int64_t batches) override {
    if (g.M > 0 && g.N > 0 && batches > 0) XnorTileKernel<<<TileGrid(g.M, g.N, batches), kBThreads, 0, s_>>>(g, o);
  }
  void Decode(const FTileArgs& g, const BOut& o, int64_t batches) override {
    if (g.M > 0 && g.N > 0 && batches > 0) DecodeTileKernel<<<TileGrid(g.M, g.N, batches), kBThreads, 0, s_>>>(g, o);
  }

 private:
  cudaStream_t s_ = cudaStreamPerThread;
};

}  // namespace

BLaunches& CudaBLaunches() {
  static StreamBLaunches launches;
  return launches;
}

}  // namespace whittle::cuda
