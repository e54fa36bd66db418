#include "kernels/cpu/resample.h"

#include <algorithm>
#include <vector>

#include "kernels/reference/resample.h"

namespace whittle::cpu {
namespace {

// One axis' sampling table as float weights, n per output index.
struct Taps {
  int n = 1;
  std::vector<int64_t> idx;
  std::vector<float> w;
};

Taps ToFloat(const AxisTaps& t) {
  Taps f;
  f.n = t.n;
  f.idx = t.idx;
  f.w.assign(t.w.begin(), t.w.end());
  return f;
}

// y[x] = sum over t < n of w[t] * rows[t][x], x < len.
void WeightedRows(float* __restrict y, const float* const* rows, const float* w, int n, int64_t len) {
  const float* __restrict r0 = rows[0];
  const float w0 = w[0];
  for (int64_t x = 0; x < len; ++x) y[x] = w0 * r0[x];
  for (int t = 1; t < n; ++t) {
    const float* __restrict r = rows[t];
    const float wt = w[t];
    for (int64_t x = 0; x < len; ++x) y[x] += wt * r[x];
  }
}

Status ResizeCpu(const Tensor& in, const std::vector<double>& scales, const std::vector<double>& roi,
                 const ResizeParams& p, Tensor* out) {
  const int64_t r = in.rank();
  const bool shapes_ok = in.dtype() == DType::kFloat32 && out->dtype() == DType::kFloat32 && r >= 2 &&
                         out->rank() == r && scales.size() == static_cast<size_t>(r) &&
                         (roi.empty() || roi.size() == 2 * static_cast<size_t>(r)) &&
                         p.coord != ResizeCoord::kTfCropAndResize;
  if (!shapes_ok || out->numel() == 0) return ResizeReference(in, scales, roi, p, out);
  std::vector<AxisTaps> taps;
  for (int64_t d = 0; d < r; ++d) {
    const double rs = roi.empty() ? 0.0 : roi[static_cast<size_t>(d)];
    const double re = roi.empty() ? 1.0 : roi[static_cast<size_t>(d + r)];
    auto t = ResizeAxisTaps(p, in.dim(d), out->dim(d), scales[static_cast<size_t>(d)], rs, re);
    if (!t.ok()) return t.status();
    // Leading axes must be copied as they are.
    if (d < r - 2 && !t->identity) return ResizeReference(in, scales, roi, p, out);
    taps.push_back(std::move(*t));
  }
  const int64_t ih = in.dim(r - 2), iw = in.dim(r - 1), oh = out->dim(r - 2), ow = out->dim(r - 1);
  const int64_t planes = in.numel() / (ih * iw);
  const AxisTaps& th = taps[static_cast<size_t>(r - 2)];
  const AxisTaps& tw = taps[static_cast<size_t>(r - 1)];
  const Taps fy = ToFloat(th), fx = ToFloat(tw);
  std::vector<float> scratch(tw.identity ? 0 : static_cast<size_t>(ih * ow));
  std::vector<const float*> rows(static_cast<size_t>(std::max(fy.n, 1)));
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* x = in.data<float>() + pl * ih * iw;
    float* y = out->data<float>() + pl * oh * ow;
    // Along the width: every input row into the scratch plane [ih][ow].
    const float* src = x;
    if (!tw.identity) {
      for (int64_t i = 0; i < ih; ++i) {
        const float* xr = x + i * iw;
        float* sr = scratch.data() + i * ow;
        for (int64_t o = 0; o < ow; ++o) {
          const int64_t* k = fx.idx.data() + o * fx.n;
          const float* w = fx.w.data() + o * fx.n;
          float s = 0.f;
          for (int t = 0; t < fx.n; ++t) s += w[t] * xr[k[t]];
          sr[o] = s;
        }
      }
      src = scratch.data();
    }
    // Along the height: each output row a weighted sum of scratch rows.
    for (int64_t o = 0; o < oh; ++o) {
      if (th.identity) {
        std::copy(src + o * ow, src + (o + 1) * ow, y + o * ow);
        continue;
      }
      for (int t = 0; t < fy.n; ++t) rows[static_cast<size_t>(t)] = src + fy.idx[static_cast<size_t>(o * fy.n + t)] * ow;
      WeightedRows(y + o * ow, rows.data(), fy.w.data() + o * fy.n, fy.n, ow);
    }
  }
  return Status::Ok();
}

}  // namespace

const ResampleFns kResampleFns{&ResizeCpu};

}  // namespace whittle::cpu
