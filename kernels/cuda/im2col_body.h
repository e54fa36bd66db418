// The float im2col as a body (kernels/cuda/hd.h): col [channels * k_h * k_w, out_h * out_w] from
// x [channels, in_h, in_w], 0 in the padding, entry r = (c * k_h + kh) * k_w + kw. The GPU runs
// Im2colWindowAt (LaunchIm2col, LaunchIm2colWindows in kernels/cuda/conv.cu: the Conv,
// ConvGradWeight and the binary/codebook layers' float path); the tests run it on the CPU.
#pragma once

#include <cstdint>

#include "kernels/cuda/hd.h"
#include "kernels/cuda/window.h"

namespace whittle::cuda {

// One output position at a time: the k_h * k_w entries that position p of channel c reads, entry
// r at col[r * row_stride + p] (row_stride = out_h * out_w: one image's columns; images * out_h *
// out_w: the images side by side, the Conv's one wide product). Index arithmetic in I (int32_t
// where the launch's range fits): a thread divides once per window, not once per entry.
template <class I>
WH_HD void Im2colWindowAt(const float* x, float* col, int64_t row_stride, const Window2d& w, I c, I p) {
  const I out_w = static_cast<I>(w.out_w), in_h = static_cast<I>(w.in_h), in_w = static_cast<I>(w.in_w);
  const I k_h = static_cast<I>(w.k_h), k_w = static_cast<I>(w.k_w);
  const I oh = p / out_w, ow = p - oh * out_w;
  const I ih0 = oh * static_cast<I>(w.stride_h) - static_cast<I>(w.pad_top);
  const I iw0 = ow * static_cast<I>(w.stride_w) - static_cast<I>(w.pad_left);
  const float* xc = x + static_cast<int64_t>(c) * w.in_h * w.in_w;
  float* dst = col + static_cast<int64_t>(c) * k_h * k_w * row_stride + p;
  for (I a = 0; a < k_h; ++a) {
    const I ih = ih0 + a * static_cast<I>(w.dil_h);
    const bool row_in = ih >= 0 && ih < in_h;
    for (I b = 0; b < k_w; ++b, dst += row_stride) {
      const I iw = iw0 + b * static_cast<I>(w.dil_w);
      *dst = row_in && iw >= 0 && iw < in_w ? xc[static_cast<int64_t>(ih) * in_w + iw] : 0.f;
    }
  }
}

// Output element o of y [n, c, hw] from t [c, n, hw] (the wide product's channel-major result):
// y = act(t + bias[channel] + residual[o]) (bias, residual null: none).
template <class I>
WH_HD float ChannelMajorAt(const float* t, I n, I c, I hw, const float* bias, const float* residual, I o) {
  const I p = o % hw, q = o / hw, m = q % c, img = q / c;
  return t[(static_cast<int64_t>(m) * n + img) * hw + p] + (bias ? bias[m] : 0.f) + (residual ? residual[o] : 0.f);
}

}  // namespace whittle::cuda
