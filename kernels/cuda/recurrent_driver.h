// The CUDA LSTM/GRU's sequence of calls, behind RecurrentOps so that the CPU can run the same
// sequence (tests/kernels/cuda_recurrent_body_test.cc) with plain loops where the GPU has cuBLAS and
// kernel launches (kernels/cuda/recurrent.cc). Per direction: one GEMM for the input products of
// every step, the initial state, then per step one GEMM h R^T over the batch and the cell
// (kernels/cuda/recurrent_body.h; GRU without linear_before_reset: a second GEMM for the h gate
// between two phases of the cell). No CUDA here.
#pragma once

#include <cstdint>

#include "kernels/common/recurrent_attrs.h"
#include "kernels/cuda/recurrent_body.h"

namespace whittle::cuda {

class RecurrentOps {
 public:
  virtual ~RecurrentOps() = default;
  // c [M, N] = a [M, K] (rows lda apart) x bt [N, K]^T (rows ldb apart), c's rows ldc apart.
  virtual Status Gemm(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t M,
                      int64_t N, int64_t K) = 0;
  virtual Status Zero(float* p, int64_t n) = 0;
  // dst [rows, cols] (packed) = src's rows, src_stride floats apart.
  virtual Status Copy2d(const float* src, int64_t src_stride, float* dst, int64_t rows, int64_t cols) = 0;
  virtual Status Cell(const RecurrentStep& s) = 0;
};

// Scratch floats a call needs: the input products of every step, one step's h R^T, h, c and
// GRU's r * h.
inline int64_t RecurrentScratchFloats(const RecurrentDims& d) {
  const int64_t GH = d.gates * d.hidden;
  return d.seq * d.batch * GH + d.batch * GH + 3 * d.batch * d.hidden;
}

// The device (or emulated) tensors of one call; optional ones null. scratch: RecurrentScratchFloats.
struct RecurrentCall {
  const float *X = nullptr, *W = nullptr, *R = nullptr, *B = nullptr, *P = nullptr, *h0 = nullptr, *c0 = nullptr;
  const int32_t* lens = nullptr;
  float *Y = nullptr, *Yh = nullptr, *Yc = nullptr;
  float* scratch = nullptr;
};

inline Status RunRecurrent(const RecurrentAttrs& a, const RecurrentDims& d, const RecurrentCall& call,
                           RecurrentOps& ops) {
  const bool gru = a.op == RecurrentOp::kGru;
  const int64_t H = d.hidden, G = d.gates, GH = G * H, rows = d.seq * d.batch;
  float* xw = call.scratch;
  float* hr = xw + rows * GH;
  float* h = hr + d.batch * GH;
  float* c = h + d.batch * H;
  float* rh = c + d.batch * H;
  if (call.Y) WH_RETURN_IF_ERROR(ops.Zero(call.Y, d.seq * d.num_directions * d.batch * H));  // past a sequence's end
  if (d.seq == 0) {  // no step: zero final states
    if (call.Yh) WH_RETURN_IF_ERROR(ops.Zero(call.Yh, d.num_directions * d.batch * H));
    if (call.Yc) WH_RETURN_IF_ERROR(ops.Zero(call.Yc, d.num_directions * d.batch * H));
    return Status::Ok();
  }
  for (int dir = 0; dir < d.num_directions; ++dir) {
    WH_RETURN_IF_ERROR(ops.Gemm(call.X, d.input, call.W + dir * GH * d.input, d.input, xw, GH, rows, GH, d.input));
    // The initial state of this direction: [batch, H] rows of h0/c0 in the layout's order.
    const int64_t first = a.layout == 0 ? dir * d.batch * H : dir * H;
    const int64_t stride = a.layout == 0 ? H : d.num_directions * H;
    if (call.h0) WH_RETURN_IF_ERROR(ops.Copy2d(call.h0 + first, stride, h, d.batch, H));
    else WH_RETURN_IF_ERROR(ops.Zero(h, d.batch * H));
    if (!gru) {
      if (call.c0) WH_RETURN_IF_ERROR(ops.Copy2d(call.c0 + first, stride, c, d.batch, H));
      else WH_RETURN_IF_ERROR(ops.Zero(c, d.batch * H));
    }
    RecurrentStep s;
    s.gru = gru;
    s.seq = d.seq, s.batch = d.batch, s.hidden = H;
    s.layout = a.layout, s.dirs = d.num_directions, s.dir = dir, s.backward = a.Backward(dir);
    s.xw = xw, s.hr = hr;
    s.bias = call.B ? call.B + dir * 2 * GH : nullptr;
    s.peep = !gru && call.P ? call.P + dir * 3 * H : nullptr;
    s.lens = call.lens;
    s.h = h, s.c = gru ? nullptr : c;
    s.y = call.Y, s.yh = call.Yh, s.yc = gru ? nullptr : call.Yc;
    s.has_clip = a.has_clip, s.clip = a.clip, s.input_forget = a.input_forget;
    s.linear_before_reset = !gru || a.linear_before_reset;
    s.rh = rh;
    const float* Rd = call.R + dir * GH * H;
    for (int64_t step = 0; step < d.seq; ++step) {
      WH_RETURN_IF_ERROR(ops.Gemm(h, H, Rd, H, hr, GH, d.batch, GH, H));
      s.step = step;
      if (!s.linear_before_reset) {  // r * h first, then its product with R_h into hr's h columns
        s.phase = 1;
        WH_RETURN_IF_ERROR(ops.Cell(s));
        WH_RETURN_IF_ERROR(ops.Gemm(rh, H, Rd + 2 * H * H, H, hr + 2 * H, GH, d.batch, H, H));
        s.phase = 0;
      }
      WH_RETURN_IF_ERROR(ops.Cell(s));
    }
  }
  return Status::Ok();
}

// Whether the CUDA cell computes these attributes: LSTM and GRU with the default activations
// (LSTM sigmoid, tanh, tanh; GRU sigmoid, tanh).
inline bool CudaRecurrentSupports(const RecurrentAttrs& a) {
  if (a.op == RecurrentOp::kRnn || a.dtype != DType::kFloat32) return false;
  for (int dir = 0; dir < a.num_directions; ++dir) {
    if (a.act(dir, 0).kind != RnnActivation::kSigmoid || a.act(dir, 1).kind != RnnActivation::kTanh) return false;
    if (a.op == RecurrentOp::kLstm && a.act(dir, 2).kind != RnnActivation::kTanh) return false;
  }
  return true;
}

}  // namespace whittle::cuda
