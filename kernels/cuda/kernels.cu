// Device code of the CUDA backend: grid-stride elementwise kernels, the GEMM/Conv epilogues, a
// warp-per-row softmax, im2col and the pools. Launchers declared in kernels_impl.h.
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "kernels/cuda/im2col_body.h"
#include "kernels/cuda/softmax_body.h"
#include "kernels/cuda/unary_body.h"
#include "kernels/cuda/kernels_impl.h"
#include "kernels/cuda/launch.cuh"

namespace whittle::cuda {
namespace {

struct ByteChunk {
  unsigned char b[kWriteBytesChunk];
};

__global__ void WriteBytesKernel(unsigned char* dst, ByteChunk chunk, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) dst[i] = chunk.b[i];
}

__global__ void UnaryKernel(Unary op, const float* x, float* y, int64_t n, float alpha, float beta) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    y[i] = Apply(op, x[i], alpha, beta);
}

__global__ void BinaryKernel(Binary op, const float* a, const float* b, float* y, BroadcastShape s, int64_t n,
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
    y[i] = Apply(act, BinaryOf(op, a[ai], b[bi]), 0.01f);
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

// The sum of v over the block (kThreads threads, a multiple of 32), for every thread.
__device__ float BlockSum(float v, float* shared) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // shared may still be read by the previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : 0.f;
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A block per row: the mean, then the variance of the deviations (two passes, as the CPU), then y.
__global__ void LayerNormKernel(const float* x, const float* scale, const float* bias, float* y, int64_t rows,
                                int64_t cols, float eps, int64_t row_channels) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) s += xr[k];
    const float mean = BlockSum(s, shared) / static_cast<float>(cols);
    float v = 0.f;
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) {
      const float d = xr[k] - mean;
      v += d * d;
    }
    const float inv = 1.f / sqrtf(BlockSum(v, shared) / static_cast<float>(cols) + eps);
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x)
      yr[k] = NormAffine((xr[k] - mean) * inv, scale, bias, row_channels, r, k);
  }
}

// One warp per row of scale * x (+ the mask; scale: one device float, or null for 1): max, sum
// of exp, then the outputs.
__global__ void SoftmaxKernel(const float* x, float* y, int64_t rows, int64_t cols, bool log, const float* scale,
                              SoftmaxMask mask) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float c = scale ? *scale : 1.f;
  float* yr = y + row * cols;
  float m = -FLT_MAX;
  for (int64_t k = lane; k < cols; k += 32) m = fmaxf(m, SoftmaxInput(x, c, mask, cols, row, k));
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.f;
  for (int64_t k = lane; k < cols; k += 32) s += expf(SoftmaxInput(x, c, mask, cols, row, k) - m);
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  const float ls = logf(s);
  for (int64_t k = lane; k < cols; k += 32) {
    const float v = SoftmaxInput(x, c, mask, cols, row, k);
    yr[k] = log ? v - m - ls : expf(v - m) / s;
  }
}

template <class I>
__global__ void Im2colWindowsKernel(const float* x, int64_t x_stride, float* col, int64_t col_stride,
                                    int64_t row_stride, I images, I channels, I hw, Window2d w) {
  const I n = images * channels * hw;
  for (I i = static_cast<I>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += static_cast<I>(blockDim.x * gridDim.x)) {
    const I p = i % hw, t = i / hw, c = t % channels, img = t / channels;
    Im2colWindowAt<I>(x + img * x_stride, col + img * col_stride, row_stride, w, c, p);
  }
}

template <class I>
__global__ void ChannelMajorBiasActKernel(const float* t, float* y, I n, I c, I hw, const float* bias,
                                          const float* residual, Unary act) {
  const I total = n * c * hw;
  for (I o = static_cast<I>(blockIdx.x * blockDim.x + threadIdx.x); o < total; o += static_cast<I>(blockDim.x * gridDim.x))
    y[o] = Apply(act, ChannelMajorAt<I>(t, n, c, hw, bias, residual, o), 0.01f);
}

template <class I>
__global__ void PoolKernel(const float* x, float* y, int64_t planes, Window2d w, int mode, bool count_include_pad) {
  const I n = static_cast<I>(planes * w.out_h * w.out_w), out_w = static_cast<I>(w.out_w), out_h = static_cast<I>(w.out_h);
  for (I i = static_cast<I>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += static_cast<I>(blockDim.x * gridDim.x)) {
    const I q = i / out_w, ow = i - q * out_w, p = q / out_h, oh = q - p * out_h;
    const float* xp = x + p * w.in_h * w.in_w;
    float acc = mode == 0 ? -FLT_MAX : 0.f;
    int64_t count = 0;
    for (int64_t kh = 0; kh < w.k_h; ++kh)
      for (int64_t kw = 0; kw < w.k_w; ++kw) {
        const int64_t ih = oh * w.stride_h - w.pad_top + kh * w.dil_h, iw = ow * w.stride_w - w.pad_left + kw * w.dil_w;
        const bool inside = ih >= 0 && ih < w.in_h && iw >= 0 && iw < w.in_w;
        if (mode == 0) {
          if (inside) acc = fmaxf(acc, xp[ih * w.in_w + iw]);
        } else if (inside) {
          acc += xp[ih * w.in_w + iw];
          ++count;
        } else if (count_include_pad && ih < w.in_h + w.pad_bottom && iw < w.in_w + w.pad_right) {
          ++count;  // a padded tap (not one past the padded input, which ceil_mode can reach)
        }
      }
    y[i] = mode == 0 ? acc : (count ? acc / static_cast<float>(count) : 0.f);
  }
}

__global__ void GlobalAveragePoolKernel(const float* x, float* y, int64_t planes, int64_t hw) {
  const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (p >= planes) return;
  float s = 0.f;
  for (int64_t k = lane; k < hw; k += 32) s += x[p * hw + k];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) y[p] = s / static_cast<float>(hw);
}

}  // namespace

void LaunchWriteBytes(void* dst, const void* src, int64_t bytes, void* stream) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* h = static_cast<const unsigned char*>(src);
  for (int64_t off = 0; off < bytes; off += kWriteBytesChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kWriteBytesChunk, bytes - off));
    ByteChunk c{};
    for (int i = 0; i < n; ++i) c.b[i] = h[off + i];
    WriteBytesKernel<<<1, 256, 0, static_cast<cudaStream_t>(stream)>>>(d + off, c, n);
  }
}

void LaunchUnary(Unary op, const float* x, float* y, int64_t n, float alpha, void* stream, float beta) {
  if (n > 0) UnaryKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(op, x, y, n, alpha, beta);
}

void LaunchBinary(Binary op, const float* a, const float* b, float* y, const BroadcastShape& s, int64_t n, Unary act,
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

void LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t rows, int64_t cols,
                     float eps, void* stream, int64_t row_channels) {
  if (rows > 0 && cols > 0)
    LayerNormKernel<<<static_cast<unsigned>(std::min<int64_t>(rows, 65535)), kThreads, 0, S(stream)>>>(
        x, scale, bias, y, rows, cols, eps, row_channels);
}

void LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t cols, bool log, void* stream, const float* scale,
                   const SoftmaxMask* mask) {
  const int64_t rows_per_block = kThreads / 32;
  if (rows > 0)
    SoftmaxKernel<<<static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block), kThreads, 0, S(stream)>>>(
        x, y, rows, cols, log, scale, mask ? *mask : SoftmaxMask{});
}

void LaunchIm2col(const float* x, int64_t x_stride, float* col, int64_t col_stride, int64_t images, int64_t channels,
                  const Window2d& w, void* stream) {
  LaunchIm2colWindows(x, x_stride, col, col_stride, w.out_h * w.out_w, images, channels, w, stream);
}

void LaunchIm2colWindows(const float* x, int64_t x_stride, float* col, int64_t col_stride, int64_t row_stride,
                         int64_t images, int64_t channels, const Window2d& w, void* stream) {
  const int64_t hw = w.out_h * w.out_w, n = images * channels * hw;
  if (n <= 0) return;
  if (Fits32(n) && w.in_h * w.in_w < (int64_t{1} << 31))
    Im2colWindowsKernel<int32_t><<<Blocks(n), kThreads, 0, S(stream)>>>(
        x, x_stride, col, col_stride, row_stride, static_cast<int32_t>(images), static_cast<int32_t>(channels),
        static_cast<int32_t>(hw), w);
  else
    Im2colWindowsKernel<int64_t><<<Blocks(n), kThreads, 0, S(stream)>>>(x, x_stride, col, col_stride, row_stride,
                                                                        images, channels, hw, w);
}

void LaunchChannelMajorBiasAct(const float* t, float* y, int64_t n, int64_t c, int64_t hw, const float* bias,
                               const float* residual, Unary act, void* stream) {
  const int64_t total = n * c * hw;
  if (total <= 0) return;
  if (Fits32(total))
    ChannelMajorBiasActKernel<int32_t><<<Blocks(total), kThreads, 0, S(stream)>>>(
        t, y, static_cast<int32_t>(n), static_cast<int32_t>(c), static_cast<int32_t>(hw), bias, residual, act);
  else
    ChannelMajorBiasActKernel<int64_t><<<Blocks(total), kThreads, 0, S(stream)>>>(t, y, n, c, hw, bias, residual, act);
}

// mode 0: max, 1: average.
void LaunchPool(const float* x, float* y, int64_t planes, const Window2d& w, int mode, bool count_include_pad,
                void* stream) {
  const int64_t n = planes * w.out_h * w.out_w;
  if (n <= 0) return;
  if (Fits32(n)) PoolKernel<int32_t><<<Blocks(n), kThreads, 0, S(stream)>>>(x, y, planes, w, mode, count_include_pad);
  else PoolKernel<int64_t><<<Blocks(n), kThreads, 0, S(stream)>>>(x, y, planes, w, mode, count_include_pad);
}

void LaunchMaxPool2d(const float* x, float* y, int64_t planes, const Window2d& w, void* stream) {
  LaunchPool(x, y, planes, w, 0, false, stream);
}

void LaunchAveragePool2d(const float* x, float* y, int64_t planes, const Window2d& w, bool count_include_pad,
                         void* stream) {
  LaunchPool(x, y, planes, w, 1, count_include_pad, stream);
}

void LaunchGlobalAveragePool(const float* x, float* y, int64_t planes, int64_t hw, void* stream) {
  const int64_t per_block = kThreads / 32;
  if (planes > 0) GlobalAveragePoolKernel<<<static_cast<unsigned>((planes + per_block - 1) / per_block), kThreads, 0, S(stream)>>>(x, y, planes, hw);
}

}  // namespace whittle::cuda
