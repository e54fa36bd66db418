// Device code of the CUDA element-wise family (launchers: kernels/cuda/elementwise.h): grid-stride
// unary and numpy-broadcast binary kernels, the GEMM and Conv bias/activation epilogues, and
// ReluGrad: the ops' formulas are kernels/common/elementwise_ops.h's, the epilogues' activations
// kernels/cuda/unary_body.h's Apply.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/unary_body.h"

namespace whittle::cuda {
namespace {

__global__ void UnaryKernel(Unary op, const float* x, float* y, int64_t n, float alpha, float beta) {
  WH_GRID_STRIDE(i, n) y[i] = Apply(op, x[i], alpha, beta);
}

__global__ void UnaryOpKernel(reference::UnaryOp op, reference::UnaryParams p, const float* x, float* y, int64_t n) {
  WH_GRID_STRIDE(i, n) y[i] = ew::UnaryValue(op, p, x[i]);
}

__global__ void BinaryKernel(reference::BinaryOp op, const float* a, const float* b, float* y, BroadcastShape s, int64_t n,
                             Unary act) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t rem = i, ai = 0, bi = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      const int64_t c = rem % s.dims[d];
      rem /= s.dims[d];
      ai += c * s.a_strides[d];
      bi += c * s.b_strides[d];
    }
    y[i] = Apply(act, ew::FloatBinaryValue(op, a[ai], b[bi]), 0.01f);
  }
}

__global__ void BiasActKernel(float* y, int64_t rows, int64_t cols, const float* c, int64_t c_rows, int64_t c_cols,
                              float beta, Unary act) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float v = y[i];
    if (c) {
      const int64_t r = i / cols, k = i % cols;
      v += beta * c[(c_rows == 1 ? 0 : r) * c_cols + (c_cols == 1 ? 0 : k)];
    }
    y[i] = Apply(act, v, 0.01f);
  }
}

__global__ void ChannelBiasActKernel(float* y, int64_t n, int64_t c, int64_t hw, const float* bias,
                                     const float* residual, Unary act) {
  const int64_t total = n * c * hw;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const float v = y[i] + (bias ? bias[(i / hw) % c] : 0.f) + (residual ? residual[i] : 0.f);
    y[i] = Apply(act, v, 0.01f);
  }
}

__global__ void ReluGradKernel(const float* y, const float* dy, float* dx, int64_t n) {
  WH_GRID_STRIDE(i, n) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

}  // namespace

void LaunchUnary(Unary op, const float* x, float* y, int64_t n, float alpha, void* stream, float beta) {
  if (n > 0) UnaryKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(op, x, y, n, alpha, beta);
}

void LaunchUnaryOp(reference::UnaryOp op, const reference::UnaryParams& p, const float* x, float* y, int64_t n,
                   void* stream) {
  if (n > 0) UnaryOpKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(op, p, x, y, n);
}

void LaunchBinary(reference::BinaryOp op, const float* a, const float* b, float* y, const BroadcastShape& s, int64_t n, Unary act,
                  void* stream) {
  if (n > 0) BinaryKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(op, a, b, y, s, n, act);
}

void LaunchBiasAct(float* y, int64_t rows, int64_t cols, const float* c, int64_t c_rows, int64_t c_cols, float beta,
                   Unary act, void* stream) {
  if (rows * cols > 0) BiasActKernel<<<Blocks(rows * cols), kThreads, 0, S(stream)>>>(y, rows, cols, c, c_rows, c_cols, beta, act);
}

void LaunchChannelBiasAct(float* y, int64_t n, int64_t c, int64_t hw, const float* bias, const float* residual,
                          Unary act, void* stream) {
  if (n * c * hw > 0)
    ChannelBiasActKernel<<<Blocks(n * c * hw), kThreads, 0, S(stream)>>>(y, n, c, hw, bias, residual, act);
}

void LaunchReluGrad(const float* y, const float* dy, float* dx, int64_t n, void* stream) {
  if (n > 0) ReluGradKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(y, dy, dx, n);
}

}  // namespace whittle::cuda
