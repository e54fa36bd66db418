// Device code of the CUDA int8 GEMM (launchers: kernels/cuda/qlinear.h): the dp4a tile GEMM
// (phases of kernels/cuda/qgemm_body.h with __syncthreads between them), the integer im2col and
// operand sums (QuantizeLinear / DequantizeLinear: quant.cu; the byte max pool: pool.cu). The
// drivers only map the grid onto the bodies, which tests/kernels/cuda_body_test.cc runs on the CPU
// against the reference kernels.
#include <cuda_runtime.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/qgemm_body.h"
#include "kernels/cuda/qlinear.h"

namespace whittle::cuda {
namespace {

__global__ void __launch_bounds__(kQTileThreads) QTileKernel(QTileArgs g, QEpi e) {
  __shared__ QTileSmem s;
  int32_t acc[4][4] = {};
  const QTileRange r = QTileRangeOf(g, blockIdx.z);
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kQTileM, n0 = static_cast<int64_t>(blockIdx.x) * kQTileN;
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t kw0 = r.kw_begin; kw0 < r.kw_end; kw0 += kQTileKw) {
    QTileLoad(g, r.z, m0, n0, kw0, tid, s);
    __syncthreads();
    QTileMac(s, tid, acc);
    __syncthreads();
  }
  QTileStore(g, e, r, m0, n0, tid, acc);
}

__global__ void QToInt8Kernel(const uint8_t* a, int64_t lda, uint32_t a_xor, int64_t K, int64_t Kp, int32_t pad,
                              int8_t* out, int64_t n) {
  WH_GRID_STRIDE(i, n) QToInt8At(a, lda, a_xor, K, Kp, pad, out, i);
}

template <class I>
__global__ void QSplitEpilogueKernel(QTileArgs g, QEpi e, int64_t splits) {
  const I n = static_cast<I>(g.M * g.N);
  for (I i = static_cast<I>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += static_cast<I>(blockDim.x * gridDim.x))
    QSplitEpilogueAt<I>(g, e, splits, i);
}

template <class I>
__global__ void QIm2colKernel(QIm2colArgs g, I n) {
  for (I i = static_cast<I>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += static_cast<I>(blockDim.x * gridDim.x))
    QIm2colAt<I>(g, i);
}

template <class I>
__global__ void QDirectConvKernel(QIm2colArgs g, const uint8_t* w, I Mg, I Kp, QEpi e, bool colsum, I images) {
  const I P = static_cast<I>(g.out_h * g.out_w), n = images * P;
  for (I i = static_cast<I>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += static_cast<I>(blockDim.x * gridDim.x)) {
    const I z = i / P;
    QDirectConvAt<I>(g, w, Mg, Kp, e, colsum, z, i - z * P);
  }
}

__global__ void QColumnSumKernel(const int32_t* words, int64_t Kw, int64_t n, int64_t batches, int32_t* sum) {
  WH_GRID_STRIDE(i, batches * n) QColumnSum(words, Kw, n, i / n, i % n, sum);
}

__global__ void QRowSumKernel(const uint8_t* a, int64_t lda, uint32_t a_xor, int64_t K, int64_t Kp, int32_t pad,
                              int64_t M, int32_t* sum) {
  WH_GRID_STRIDE(m, M) QRowSum(a, lda, a_xor, K, Kp, pad, m, sum);
}

class StreamQLaunches : public QLaunches {
 public:
  void Tile(const QTileArgs& g, const QEpi& e, int64_t grid_z) override {
    if (g.M <= 0 || g.N <= 0 || grid_z <= 0) return;
    const dim3 grid(static_cast<unsigned>(CeilDiv(g.N, kQTileN)), static_cast<unsigned>(CeilDiv(g.M, kQTileM)),
                    static_cast<unsigned>(grid_z));
    QTileKernel<<<grid, kQTileThreads, 0, s_>>>(g, e);
  }
  void SplitEpilogue(const QTileArgs& g, const QEpi& e, int64_t splits) override {
    const int64_t n = g.M * g.N;
    if (n <= 0) return;
    if (Fits32(n)) QSplitEpilogueKernel<int32_t><<<Blocks(n), kThreads, 0, s_>>>(g, e, splits);
    else QSplitEpilogueKernel<int64_t><<<Blocks(n), kThreads, 0, s_>>>(g, e, splits);
  }
  void ToInt8(const uint8_t* a, int64_t lda, uint32_t a_xor, int64_t K, int64_t Kp, int32_t pad, int64_t M,
              int8_t* out) override {
    const int64_t n = M * Kp;
    if (n > 0) QToInt8Kernel<<<Blocks(n), kThreads, 0, s_>>>(a, lda, a_xor, K, Kp, pad, out, n);
  }
  bool Int8Gemm(const int8_t* bt, const int8_t* a8, int32_t* c, int64_t M, int64_t N, int64_t Kp) override {
    return Int8GemmTN(bt, a8, c, M, N, Kp);
  }
  void Im2col(const QIm2colArgs& g, int64_t images) override {
    const int64_t n = QIm2colThreads(g, images);
    if (n <= 0) return;
    // int32 indices where every word's index fits (a run's last word index is below the words').
    if (Fits32(images * g.Kw * g.out_h * g.out_w) && g.in_h * g.in_w * g.channels < (int64_t{1} << 31))
      QIm2colKernel<int32_t><<<Blocks(n), kThreads, 0, s_>>>(g, static_cast<int32_t>(n));
    else QIm2colKernel<int64_t><<<Blocks(n), kThreads, 0, s_>>>(g, n);
  }
  void DirectConv(const QIm2colArgs& g, const uint8_t* w, int64_t Mg, int64_t Kp, const QEpi& e, bool colsum,
                  int64_t images) override {
    const int64_t n = images * g.out_h * g.out_w;
    if (n <= 0) return;
    if (Fits32(n) && g.in_h * g.in_w * g.channels < (int64_t{1} << 31))
      QDirectConvKernel<int32_t><<<Blocks(n), kThreads, 0, s_>>>(g, w, static_cast<int32_t>(Mg), static_cast<int32_t>(Kp),
                                                                 e, colsum, static_cast<int32_t>(images));
    else QDirectConvKernel<int64_t><<<Blocks(n), kThreads, 0, s_>>>(g, w, Mg, Kp, e, colsum, images);
  }
  void ColumnSum(const int32_t* words, int64_t Kw, int64_t n, int64_t batches, int32_t* sum) override {
    if (n * batches > 0) QColumnSumKernel<<<Blocks(n * batches), kThreads, 0, s_>>>(words, Kw, n, batches, sum);
  }
  void RowSum(const uint8_t* a, int64_t lda, uint32_t a_xor, int64_t K, int64_t Kp, int32_t pad, int64_t M,
              int32_t* sum) override {
    if (M > 0) QRowSumKernel<<<Blocks(M), kThreads, 0, s_>>>(a, lda, a_xor, K, Kp, pad, M, sum);
  }

 private:
  cudaStream_t s_ = cudaStreamPerThread;
};

}  // namespace

QLaunches& CudaQLaunches() {
  static StreamQLaunches launches;
  return launches;
}

}  // namespace whittle::cuda
