// Device code of the CUDA convolution family (launchers: kernels/cuda/conv.h): the float im2col and
// the wide product's channel-major epilogue (kernels/cuda/im2col_body.h), int32 indices where they
// fit, and col2im for the data gradient (kernels/cuda/grad_body.h's Col2imAt), a thread per output
// element with no atomics.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/conv.h"
#include "kernels/cuda/grad_body.h"
#include "kernels/cuda/im2col_body.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/unary_body.h"

namespace whittle::cuda {
namespace {

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

__global__ void Col2imKernel(const float* col, float* x, Window2d w, int64_t n) { WH_GRID_STRIDE(i, n) Col2imAt(col, x, w, i); }

}  // namespace

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

void LaunchCol2im(const float* col, float* x, int64_t channels, const Window2d& w, void* stream) {
  const int64_t n = channels * w.in_h * w.in_w;
  if (n > 0) Col2imKernel<<<Blocks(n), kThreads, 0, S(stream)>>>(col, x, w, n);
}

}  // namespace whittle::cuda
