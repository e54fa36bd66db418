// The CUDA convolution family's launchers (device code: kernels/cuda/conv.cu; bodies:
// kernels/cuda/im2col_body.h, grad_body.h's Col2imAt): im2col for the GEMM-based Conv, the wide
// product's channel-major epilogue, and col2im for ConvGradInput and ConvTranspose. Device
// pointers, sizes and a stream as void*, no CUDA types (kernels/cuda/elementwise.h says how every
// launcher behaves).
#pragma once

#include <cstdint>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/window.h"

namespace whittle::cuda {

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

// x [channels, in_h, in_w] = col2im of col [channels * k_h * k_w, out_h * out_w] (overwrites x).
void LaunchCol2im(const float* col, float* x, int64_t channels, const Window2d& w, void* stream);

}  // namespace whittle::cuda
