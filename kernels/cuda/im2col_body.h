// The float im2col of one (image, channel slice) as a body (kernels/cuda/hd.h): element i of
// col [channels * k_h * k_w, out_h * out_w] from x [channels, in_h, in_w], 0 in the padding. The
// Conv kernel (kernels/cuda/kernels.cu) and the binary/codebook layers' float path
// (kernels/cuda/binary_body.h) launch it; the tests run it on the CPU.
#pragma once

#include <cstdint>

#include "kernels/cuda/hd.h"
#include "kernels/cuda/kernels_impl.h"

namespace whittle::cuda {

WH_HD void Im2colAt(const float* x, float* col, const Window2d& w, int64_t i) {
  const int64_t hw = w.out_h * w.out_w;
  const int64_t p = i % hw, r = i / hw;  // r = (c * k_h + kh) * k_w + kw
  const int64_t kw = r % w.k_w, kh = (r / w.k_w) % w.k_h, c = r / (w.k_w * w.k_h);
  const int64_t oh = p / w.out_w, ow = p % w.out_w;
  const int64_t ih = oh * w.stride_h - w.pad_top + kh * w.dil_h, iw = ow * w.stride_w - w.pad_left + kw * w.dil_w;
  col[i] = ih >= 0 && ih < w.in_h && iw >= 0 && iw < w.in_w ? x[(c * w.in_h + ih) * w.in_w + iw] : 0.f;
}

}  // namespace whittle::cuda
