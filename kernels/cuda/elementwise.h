// The CUDA element-wise family's launchers (device code: kernels/cuda/elementwise.cu; formulas:
// kernels/common/elementwise_ops.h, shared with the reference and CPU kernels): Unary and Binary ops with numpy broadcasting, the GEMM and Conv
// bias/activation epilogues, and ReluGrad. Like every launcher header here: pointers to device
// memory, sizes and a stream (a cudaStream_t passed as void*), no CUDA types, so host code never
// sees a CUDA header through it; a launcher queues its work and returns (errors surface at the
// next synchronizing call).
#pragma once

#include <cstdint>

#include "kernels/common/elementwise_ops.h"

namespace whittle::cuda {

constexpr int kMaxRank = 8;

// The activations the GEMM/Conv epilogues and a fused node's separate pass apply
// (kernels/cuda/unary_body.h's Apply; Clip's bounds travel as alpha and beta).
enum class Unary : int { kIdentity, kRelu, kLeakyRelu, kSigmoid, kTanh, kHardSigmoid, kHardSwish, kClip, kSilu };

// y[i] = act(x[i]) (alpha, beta: the activation's parameters).
void LaunchUnary(Unary act, const float* x, float* y, int64_t n, float alpha, void* stream, float beta = 0.f);

// y[i] = the op's formula of x[i] (kernels/common/elementwise_ops.h's UnaryValue: the one the
// reference and CPU kernels run).
void LaunchUnaryOp(reference::UnaryOp op, const reference::UnaryParams& p, const float* x, float* y, int64_t n,
                   void* stream);

// Numpy-broadcast y = act(a op b): out_dims of `rank` (<= kMaxRank) dims, a and b read at
// element strides (0 along a broadcast dim).
struct BroadcastShape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};
void LaunchBinary(reference::BinaryOp op, const float* a, const float* b, float* y, const BroadcastShape& s, int64_t n, Unary act,
                  void* stream);

// GEMM epilogue on y [rows, cols]: y = act(y + beta * C) with C broadcast from c_rows x c_cols
// (each 1 or the full size; c null: no C).
void LaunchBiasAct(float* y, int64_t rows, int64_t cols, const float* c, int64_t c_rows, int64_t c_cols, float beta,
                   Unary act, void* stream);

// y = act(y + bias[channel] + residual) on y [n, c, hw] (bias, residual null: none).
void LaunchChannelBiasAct(float* y, int64_t n, int64_t c, int64_t hw, const float* bias, const float* residual,
                          Unary act, void* stream);

// ReluGrad (ai.whittle, the training graph): dx = y > 0 ? dy : 0.
void LaunchReluGrad(const float* y, const float* dy, float* dx, int64_t n, void* stream);

}  // namespace whittle::cuda
