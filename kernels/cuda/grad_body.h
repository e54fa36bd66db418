// The training graph's device arithmetic as bodies (kernels/cuda/hd.h), each computing one
// output element by gathering what reaches it — no atomics, so every run adds in one order:
//   Col2imAt:          element i of x [channels, in_h, in_w] = the sum of the col
//                      [channels * k_h * k_w, out_h * out_w] entries im2col read it into
//                      (ConvGradInput's second half)
//   MaxPoolGradAt:     element i of dx [planes, in_h, in_w] = the sum of dy over the windows whose
//                      first maximum (row-major taps, padding never wins) is element i
//   AveragePoolGradAt: element i of dx = the sum of dy / divisor over the windows holding it (the
//                      divisor as the forward pool counts it)
//   ReduceShareAt:     thread `share` of `shares`' part of reduction output o (ReduceSum/Mean)
//   BatchNormAt:       inference BatchNormalization of element i of x [N, C, inner]
//   StridedCopyAt:     element i of y read from x at strides (Expand: 0 along broadcast dims;
//                      Transpose: x's strides in the permuted order)
// The CUDA drivers are in each family's .cu (conv.cu, pool.cu, reduce.cu, norm.cu, movement.cu);
// tests/kernels/cuda_grad_body_test.cc runs these on the CPU against the reference kernels.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/hd.h"
#include "kernels/cuda/window.h"

namespace whittle::cuda {

// The output positions o along one axis whose window tap k lands on input position i:
// o * stride - pad + k * dil == i. Returns o, or -1 when none (not on the stride, or out of range).
WH_HD int64_t WindowOrigin(int64_t i, int64_t k, int64_t stride, int64_t pad, int64_t dil, int64_t out) {
  const int64_t t = i + pad - k * dil;
  if (t < 0 || t % stride != 0) return -1;
  const int64_t o = t / stride;
  return o < out ? o : -1;
}

WH_HD void Col2imAt(const float* col, float* x, const Window2d& w, int64_t i) {
  const int64_t iw = i % w.in_w, ih = (i / w.in_w) % w.in_h, c = i / (w.in_w * w.in_h);
  const int64_t hw = w.out_h * w.out_w;
  float s = 0.f;
  for (int64_t kh = 0; kh < w.k_h; ++kh) {
    const int64_t oh = WindowOrigin(ih, kh, w.stride_h, w.pad_top, w.dil_h, w.out_h);
    if (oh < 0) continue;
    for (int64_t kw = 0; kw < w.k_w; ++kw) {
      const int64_t ow = WindowOrigin(iw, kw, w.stride_w, w.pad_left, w.dil_w, w.out_w);
      if (ow < 0) continue;
      s += col[((c * w.k_h + kh) * w.k_w + kw) * hw + oh * w.out_w + ow];
    }
  }
  x[i] = s;
}

// The flat index (ih * in_w + iw) of the first maximum of output (oh, ow)'s window in plane xp,
// or -1 when the window holds no input element.
WH_HD int64_t WindowArgmax(const float* xp, const Window2d& w, int64_t oh, int64_t ow) {
  int64_t best = -1;
  float m = 0.f;
  for (int64_t kh = 0; kh < w.k_h; ++kh) {
    const int64_t ih = oh * w.stride_h - w.pad_top + kh * w.dil_h;
    if (ih < 0 || ih >= w.in_h) continue;
    for (int64_t kw = 0; kw < w.k_w; ++kw) {
      const int64_t iw = ow * w.stride_w - w.pad_left + kw * w.dil_w;
      if (iw < 0 || iw >= w.in_w) continue;
      const float v = xp[ih * w.in_w + iw];
      if (best < 0 || v > m) {
        m = v;
        best = ih * w.in_w + iw;
      }
    }
  }
  return best;
}

// AveragePool's divisor for output (oh, ow): the taps inside x, plus with count_include_pad the
// padded ones (inside the padded input; ceil_mode can reach past it).
WH_HD int64_t WindowCount(const Window2d& w, int64_t oh, int64_t ow, bool count_include_pad) {
  int64_t count = 0;
  for (int64_t kh = 0; kh < w.k_h; ++kh)
    for (int64_t kw = 0; kw < w.k_w; ++kw) {
      const int64_t ih = oh * w.stride_h - w.pad_top + kh * w.dil_h, iw = ow * w.stride_w - w.pad_left + kw * w.dil_w;
      const bool inside = ih >= 0 && ih < w.in_h && iw >= 0 && iw < w.in_w;
      if (inside || (count_include_pad && ih < w.in_h + w.pad_bottom && iw < w.in_w + w.pad_right)) ++count;
    }
  return count;
}

// mode 0: MaxPoolGrad (x read for the maxima); 1: AveragePoolGrad (x unused).
WH_HD void PoolGradAt(const float* x, const float* dy, float* dx, const Window2d& w, int mode, bool count_include_pad,
                      int64_t i) {
  const int64_t iw = i % w.in_w, ih = (i / w.in_w) % w.in_h, p = i / (w.in_w * w.in_h);
  const float* xp = x ? x + p * w.in_h * w.in_w : nullptr;
  const float* dyp = dy + p * w.out_h * w.out_w;
  float s = 0.f;
  // Every (oh, ow) whose window has a tap on (ih, iw), in row-major output order.
  for (int64_t kh = w.k_h - 1; kh >= 0; --kh) {
    const int64_t oh = WindowOrigin(ih, kh, w.stride_h, w.pad_top, w.dil_h, w.out_h);
    if (oh < 0) continue;
    for (int64_t kw = w.k_w - 1; kw >= 0; --kw) {
      const int64_t ow = WindowOrigin(iw, kw, w.stride_w, w.pad_left, w.dil_w, w.out_w);
      if (ow < 0) continue;
      if (mode == 0) {
        if (WindowArgmax(xp, w, oh, ow) == ih * w.in_w + iw) s += dyp[oh * w.out_w + ow];
      } else {
        const int64_t c = WindowCount(w, oh, ow, count_include_pad);
        if (c) s += dyp[oh * w.out_w + ow] / static_cast<float>(c);
      }
    }
  }
  dx[i] = s;
}

// A reduction of x over some of its axes, as (outer, reduced, inner) index arithmetic: output o
// sums the `count` elements at base(o) + r-th reduced offset. The reduced axes and the kept ones
// are given as dims and element strides of x (rank <= kMaxRank each).
struct ReduceShape {
  int op = 0;  // ReduceOpKind: what combines the elements
  int kept_rank = 0, reduced_rank = 0;
  int64_t kept_dims[kMaxRank] = {}, kept_strides[kMaxRank] = {};
  int64_t reduced_dims[kMaxRank] = {}, reduced_strides[kMaxRank] = {};
  int64_t outputs = 1, count = 1;  // output elements; elements summed per output
  float scale = 1.f;               // 1, or 1 / count for a mean
};

// The element offset of index k of a row-major walk over `rank` dims read at `strides`.
WH_HD int64_t StridedOffset(int rank, const int64_t* dims, const int64_t* strides, int64_t k) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (k % dims[d]) * strides[d];
    k /= dims[d];
  }
  return off;
}

// Reductions of at most this many elements per output run a thread per output (share 0 of 1);
// longer ones a block per output (kThreads shares and a fixed tree).
constexpr int64_t kSerialReduceMax = 256;

// ReduceShape::op: ReduceSum and ReduceMean add (the mean then scales), ReduceMax and ReduceMin
// keep the larger or smaller.
enum ReduceOpKind : int { kReduceAdd = 0, kReduceMax = 1, kReduceMin = 2 };

WH_HD float ReduceIdentity(int op) { return op == kReduceMax ? -INFINITY : op == kReduceMin ? INFINITY : 0.f; }
WH_HD float ReduceCombine(int op, float a, float b) {
  return op == kReduceMax ? (b > a ? b : a) : op == kReduceMin ? (b < a ? b : a) : a + b;
}

// The part of output o's result that share `share` of `shares` combines: reduced elements share,
// share + shares, ... (a block's threads, then combined by a fixed tree).
WH_HD float ReduceShareAt(const float* x, const ReduceShape& r, int64_t o, int64_t share, int64_t shares) {
  const float* base = x + StridedOffset(r.kept_rank, r.kept_dims, r.kept_strides, o);
  float s = ReduceIdentity(r.op);
  for (int64_t k = share; k < r.count; k += shares)
    s = ReduceCombine(r.op, s, base[StridedOffset(r.reduced_rank, r.reduced_dims, r.reduced_strides, k)]);
  return s;
}

// y[i] = x at the offset of y's index i under s.dims / s.a_strides.
WH_HD void StridedCopyAt(const float* x, float* y, const BroadcastShape& s, int64_t i) {
  y[i] = x[StridedOffset(s.rank, s.dims, s.a_strides, i)];
}

WH_HD void BatchNormAt(const float* x, const float* scale, const float* bias, const float* mean, const float* var,
                       float eps, int64_t channels, int64_t inner, float* y, int64_t i) {
  const int64_t c = (i / inner) % channels;
  y[i] = (x[i] - mean[c]) * (scale[c] / sqrtf(var[c] + eps)) + bias[c];
}

}  // namespace whittle::cuda
