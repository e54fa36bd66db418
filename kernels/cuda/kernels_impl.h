// The CUDA backend's device code (kernels/cuda/kernels.cu) as plain launchers: pointers to device
// memory, sizes and a stream (a cudaStream_t passed as void*), no CUDA types, so the host side
// (kernels/cuda/*.cc) and no other header ever sees a CUDA header through this one. Every launcher
// queues its work on the stream and returns; errors surface at the next synchronizing call.
#pragma once

#include <cstdint>

namespace whittle::cuda {

constexpr int kMaxRank = 8;

// dst[0, bytes) = the host bytes at src, carried in the launches' parameters (kWriteBytesChunk
// per launch), not read from host memory when they run: how a graph capture records a small
// upload (kernels/cuda/runtime.cc), which then replays with the bytes it was captured with.
constexpr int kWriteBytesChunk = 1024;
void LaunchWriteBytes(void* dst, const void* src, int64_t bytes, void* stream);

// Elementwise ops (kernels.cu keeps the numbering).
enum class Unary : int { kRelu, kSigmoid, kTanh, kExp, kLog, kNeg, kAbs, kSqrt, kErf, kLeakyRelu, kIdentity, kReciprocal, kGelu, kGeluTanh, kHardSigmoid, kHardSwish,
                         kElu, kSelu, kSoftplus, kSoftsign, kFloor, kCeil, kRound, kClip, kThresholdedRelu, kSilu };
enum class Binary : int { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kPRelu };

// y[i] = f(x[i]) (alpha, beta: the op's parameters, kernels/cuda/unary_body.h).
void LaunchUnary(Unary op, const float* x, float* y, int64_t n, float alpha, void* stream, float beta = 0.f);

// Numpy-broadcast y = act(a op b): out_dims of `rank` (<= kMaxRank) dims, a and b read at
// element strides (0 along a broadcast dim).
struct BroadcastShape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};
void LaunchBinary(Binary op, const float* a, const float* b, float* y, const BroadcastShape& s, int64_t n, Unary act,
                  void* stream);

// GEMM epilogue on y [rows, cols]: y = act(y + beta * C) with C broadcast from c_rows x c_cols
// (each 1 or the full size; c null: no C).
void LaunchBiasAct(float* y, int64_t rows, int64_t cols, const float* c, int64_t c_rows, int64_t c_cols, float beta,
                   Unary act, void* stream);

// y = act(y + bias[channel] + residual) on y [n, c, hw] (bias, residual null: none).
void LaunchChannelBiasAct(float* y, int64_t n, int64_t c, int64_t hw, const float* bias, const float* residual,
                          Unary act, void* stream);

// Softmax (or LogSoftmax) over the last axis of scale * x [rows, cols] (+ mask, the fused
// Attention's additive mask: kernels/cuda/softmax_body.h); scale: one float in device memory, or
// null for 1; mask null for none.
struct SoftmaxMask;
void LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t cols, bool log, void* stream,
                   const float* scale = nullptr, const SoftmaxMask* mask = nullptr);
// LayerNormalization of x [rows, cols] over cols: y = (x - mean) / sqrt(var + eps) * scale + bias
// (scale and bias: cols values; bias may be null), a block per row, mean and variance in float.
// row_channels > 0: InstanceNormalization of [N*C] rows instead, scale and bias per row's channel
// (row % row_channels).
void LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t rows, int64_t cols,
                     float eps, void* stream, int64_t row_channels = 0);

// 2-D window geometry of Conv and the pools (pads begin/end, stride, dilation per spatial axis).
struct Window2d {
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t k_h = 0, k_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

// For each of `images` images (x_stride / col_stride floats apart), col [channels * k_h * k_w,
// out_h * out_w] from x [channels, in_h, in_w] (zero padding): one launch for the whole chunk
// (a launch per image cost the CNN at batch 1024 more than its GEMMs on an H100).
void LaunchIm2col(const float* x, int64_t x_stride, float* col, int64_t col_stride, int64_t images, int64_t channels,
                  const Window2d& w, void* stream);
// The same columns by Im2colWindowAt (kernels/cuda/im2col_body.h), a thread per output position:
// image z's entry r at col[z * col_stride + r * row_stride + p]. row_stride out_h * out_w and
// col_stride channels * k_h * k_w * out_h * out_w: LaunchIm2col's layout; col_stride out_h *
// out_w and row_stride images * out_h * out_w: the images side by side, [rows, images * hw].
void LaunchIm2colWindows(const float* x, int64_t x_stride, float* col, int64_t col_stride, int64_t row_stride,
                         int64_t images, int64_t channels, const Window2d& w, void* stream);
// y [n, c, hw] = act(t [c, n, hw] + bias[channel] + residual) (ChannelMajorAt; bias, residual
// null: none): the wide Conv product back to NCHW with its epilogue.
void LaunchChannelMajorBiasAct(const float* t, float* y, int64_t n, int64_t c, int64_t hw, const float* bias,
                               const float* residual, Unary act, void* stream);

// Pools over x [n*c, in_h, in_w] -> y [n*c, out_h, out_w]. Average: count_include_pad counts the
// padded taps (inside the padded input) in the divisor.
void LaunchMaxPool2d(const float* x, float* y, int64_t planes, const Window2d& w, void* stream);
void LaunchAveragePool2d(const float* x, float* y, int64_t planes, const Window2d& w, bool count_include_pad,
                         void* stream);
// y[p] = mean of x's plane p (planes of hw).
void LaunchGlobalAveragePool(const float* x, float* y, int64_t planes, int64_t hw, void* stream);

// --- the training graph's ops (kernels/cuda/grad_body.h, grad.cu) ---

// x [channels, in_h, in_w] = col2im of col [channels * k_h * k_w, out_h * out_w] (overwrites x).
void LaunchCol2im(const float* col, float* x, int64_t channels, const Window2d& w, void* stream);
// MaxPoolGrad (max; x read) or AveragePoolGrad over planes of x/dx [in_h, in_w], dy [out_h, out_w].
void LaunchPoolGrad2d(const float* x, const float* dy, float* dx, int64_t planes, const Window2d& w, bool max,
                      bool count_include_pad, void* stream);
// y [s.dims] read from x at s.a_strides (Expand: 0 along broadcast dims; Transpose: permuted).
void LaunchStridedCopy(const float* x, float* y, const BroadcastShape& s, int64_t n, void* stream);
// dx = y > 0 ? dy : 0.
void LaunchReluGrad(const float* y, const float* dy, float* dx, int64_t n, void* stream);
// y[o] = scale * the sum of x over the reduced axes (ReduceSum, ReduceMean); grad_body.h's ReduceShape.
struct ReduceShape;
void LaunchReduce(const float* x, float* y, const ReduceShape& r, void* stream);
// Inference BatchNormalization of x [N, C, inner] with per-channel scale, bias, mean, var.
void LaunchBatchNorm(const float* x, const float* scale, const float* bias, const float* mean, const float* var,
                     float eps, int64_t n, int64_t channels, int64_t inner, float* y, void* stream);

// Max pool of uint8 (is_uint8) or int8 planes, like LaunchMaxPool2d.
void LaunchMaxPool2dBytes(const void* x, void* y, bool is_uint8, int64_t planes, const Window2d& w, void* stream);

// QuantizeLinear / DequantizeLinear over x [outer, channels, inner] (kernels/cuda/quant_body.h).
struct QuantizeArgs;
void LaunchQuantize(const QuantizeArgs& a, int64_t n, void* stream);
// c [M][N] int32 = a8 [M][Kp] x bt [N][Kp]^T (int8, int32 accumulation) by cuBLAS on the calling
// thread's stream (runtime.cc); false when cuBLAS cannot run it (the caller uses its own kernel).
bool Int8GemmTN(const int8_t* bt, const int8_t* a8, int32_t* c, int64_t M, int64_t N, int64_t Kp);
void LaunchDequantize(const QuantizeArgs& a, int64_t n, void* stream);

// --- data movement (kernels/cuda/movement_body.h, movement.cu); elem_bytes 1, 2, 4 or 8 ---

// y [outer, n_idx, inner] = x [outer, axis_dim, inner] gathered at idx (int64, or int32 when
// !idx64; negative ones count from the end) along the middle axis; an index out of range gives
// zeros and, with a report (kernels/kernel.h's device check report), is reported there under tag
// as (index, position, axis, axis_dim).
struct GatherReport {
  int64_t* report = nullptr;
  int64_t tag = 0, axis = 0;
};
void LaunchGather(const void* x, const void* idx, bool idx64, void* y, int elem_bytes, int64_t outer, int64_t axis_dim,
                  int64_t n_idx, int64_t inner, const GatherReport& r, void* stream);
// One Concat input x [outer, piece_row] into y's rows of out_row elements, at element `offset`.
void LaunchConcatPiece(const void* x, void* y, int elem_bytes, int64_t outer, int64_t piece_row, int64_t out_row,
                       int64_t offset, void* stream);
// y[0..n) = the element whose bytes are the low elem_bytes bytes of bits.
void LaunchFill(void* y, int elem_bytes, uint64_t bits, int64_t n, void* stream);
// Pad of float x into y's n elements by g's tables (kernels/cuda/movement_body.h; device memory).
struct PadGeom;
void LaunchPad(const float* x, float* y, float value, const PadGeom& g, int64_t n, void* stream);
enum class CastType : int;
void LaunchCast(const void* x, CastType from, void* y, CastType to, int64_t n, void* stream);
struct WhereShape;
void LaunchWhere(const void* cond, const void* x, const void* y, void* out, int elem_bytes, const WhereShape& s,
                 int64_t n, void* stream);

// Resize of float x into y's n elements by the tables in g (kernels/cuda/resize_body.h; device
// pointers).
struct ResizeGeom;
void LaunchResize(const float* x, float* y, const ResizeGeom& g, int64_t n, void* stream);

// One step of an LSTM or GRU direction over the batch (kernels/cuda/recurrent_body.h).
struct RecurrentStep;
void LaunchRecurrentCell(const RecurrentStep& s, void* stream);

// The int8 GEMM's launches on the calling thread's stream (cudaStreamPerThread; kernels/cuda/
// qgemm_body.h, kernels/cuda/qlinear.cu): one stateless instance, no allocation per call.
struct QLaunches;
QLaunches& CudaQLaunches();

// The binarized and codebook layers' launches likewise (kernels/cuda/binary_body.h, binary.cu).
struct BLaunches;
BLaunches& CudaBLaunches();

// The block-circulant layer's launches and cuFFT transforms (kernels/cuda/circulant_body.h, .cu).
struct CLaunches;
CLaunches& CudaCLaunches();

}  // namespace whittle::cuda
