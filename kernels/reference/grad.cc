#include "kernels/reference/grad.h"

#include <algorithm>
#include <vector>

#include "kernels/common/grad_shape.h"
#include "kernels/common/index.h"

namespace whittle {
namespace {

// offs[kp] = the offset (row-major over g.in) of tap kp (row-major kernel order) of output
// position op's window, or -1 where the tap lies in the padding.
void WindowTaps(const WindowGeometry& g, int64_t op, std::vector<int64_t>* offs) {
  int64_t o_idx[kMaxSpatialDims], k_idx[kMaxSpatialDims];
  UnravelIndex(op, g.out, g.spatial, o_idx);
  for (int64_t kp = 0; kp < g.KernelSize(); ++kp) {
    UnravelIndex(kp, g.kernel, g.spatial, k_idx);
    int64_t off = 0;
    (*offs)[static_cast<size_t>(kp)] = TapOffset(g, o_idx, k_idx, &off) ? off : -1;
  }
}

// body(dy_at, w_at, x_at) for every product of the forward Conv: dY[n, m, op] (flat dy_at) took
// W[m, c, kp] (w_at) times X[n, group(m)'s channel c, tap kp of window op] (x_at), taps in X only.
template <class Body>
void ForEachConvProduct(const ConvShape& s, const Body& body) {
  const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  const int64_t k_size = s.geo.KernelSize(), p_size = s.geo.OutSize(), in_size = s.geo.InSize();
  std::vector<int64_t> taps(static_cast<size_t>(k_size));
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t op = 0; op < p_size; ++op) {
      WindowTaps(s.geo, op, &taps);
      for (int64_t m = 0; m < s.out_channels; ++m) {
        const int64_t dy_at = (n * s.out_channels + m) * p_size + op;
        for (int64_t c = 0; c < cg; ++c) {
          const int64_t x_base = (n * s.in_channels + (m / mg) * cg + c) * in_size;
          for (int64_t kp = 0; kp < k_size; ++kp)
            if (taps[static_cast<size_t>(kp)] >= 0)
              body(dy_at, (m * cg + c) * k_size + kp, x_base + taps[static_cast<size_t>(kp)]);
        }
      }
    }
  }
}

// The Conv grads: each product dY * W added into dX at the X element it multiplied (into_x), or
// each product dY * X into dW at the weight it multiplied; the sums in double, then stored.
void AddConvProducts(const ConvShape& s, const float* dy, const float* other, bool into_x, Tensor* out) {
  std::vector<double> acc(static_cast<size_t>(out->numel()), 0.0);
  ForEachConvProduct(s, [&](int64_t dy_at, int64_t w_at, int64_t x_at) {
    const int64_t to = into_x ? x_at : w_at, from = into_x ? w_at : x_at;
    acc[static_cast<size_t>(to)] += static_cast<double>(other[from]) * static_cast<double>(dy[dy_at]);
  });
  std::transform(acc.begin(), acc.end(), out->data<float>(), [](double v) { return static_cast<float>(v); });
}

// body(p, op, at): MaxPool's choice for window op of plane p, the flat offset into X of the
// first tap inside X (row-major tap order) replaced only by a strictly greater one; no call for a
// window wholly in the padding.
template <class Body>
void ForEachWindowMax(const WindowGeometry& g, int64_t planes, const float* x, const Body& body) {
  const int64_t in_size = g.InSize(), out_size = g.OutSize();
  std::vector<int64_t> taps(static_cast<size_t>(g.KernelSize()));
  for (int64_t op = 0; op < out_size; ++op) {
    WindowTaps(g, op, &taps);
    for (int64_t p = 0; p < planes; ++p) {
      const float* xp = x + p * in_size;
      int64_t best_at = -1;
      for (int64_t off : taps)
        if (off >= 0 && (best_at < 0 || xp[off] > xp[best_at])) best_at = off;
      if (best_at >= 0) body(p, op, p * in_size + best_at);
    }
  }
}

}  // namespace

Status ConvGradInputReference(const ConvGradAttrs& a, const Tensor& dy, const Tensor& w, const Tensor& x,
                              Tensor* dx, int /*num_threads*/) {
  ConvShape s;
  WH_RETURN_IF_ERROR(ResolveConvGradInput(a, dy, w, x, *dx, &s));
  AddConvProducts(s, dy.data<float>(), w.data<float>(), /*into_x=*/true, dx);
  return Status::Ok();
}

Status ConvGradWeightReference(const ConvGradAttrs& a, const Tensor& x, const Tensor& dy, Tensor* dw,
                               int /*num_threads*/) {
  ConvShape s;
  WH_RETURN_IF_ERROR(ResolveConvGradWeight(a, x, dy, *dw, &s));
  AddConvProducts(s, dy.data<float>(), x.data<float>(), /*into_x=*/false, dw);
  return Status::Ok();
}

Status MaxPoolGradReference(const WindowAttrs& a, const Tensor& x, const Tensor& dy, Tensor* dx,
                            int /*num_threads*/) {
  WindowGeometry g;
  WH_RETURN_IF_ERROR(ResolvePoolGrad("MaxPoolGrad", a, x, dy, *dx, &g));
  const int64_t out_size = g.OutSize();
  const float* dyd = dy.data<float>();
  float* dxd = dx->data<float>();
  std::fill(dxd, dxd + dx->numel(), 0.f);
  ForEachWindowMax(g, x.dim(0) * x.dim(1), x.data<float>(),
                   [&](int64_t p, int64_t op, int64_t at) { dxd[at] += dyd[p * out_size + op]; });
  return Status::Ok();
}

Status ReluGradReference(const Tensor& y, const Tensor& dy, Tensor* dx, int /*num_threads*/) {
  WH_RETURN_IF_ERROR(CheckReluGrad(y, dy, *dx));
  const float* yd = y.data<float>();
  const float* dyd = dy.data<float>();
  float* dxd = dx->data<float>();
  for (int64_t i = 0; i < dy.numel(); ++i) dxd[i] = yd[i] > 0.f ? dyd[i] : 0.f;  // NaN in Y gives 0
  return Status::Ok();
}

Status AveragePoolGradReference(const WindowAttrs& a, bool count_include_pad, const Tensor& x, const Tensor& dy,
                                Tensor* dx, int /*num_threads*/) {
  WindowGeometry g;
  WH_RETURN_IF_ERROR(ResolvePoolGrad("AveragePoolGrad", a, x, dy, *dx, &g));
  const int64_t planes = x.dim(0) * x.dim(1), in_size = g.InSize(), out_size = g.OutSize();
  const float* dyd = dy.data<float>();
  float* dxd = dx->data<float>();
  std::fill(dxd, dxd + dx->numel(), 0.f);
  std::vector<int64_t> taps(static_cast<size_t>(g.KernelSize()));
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t op = 0; op < out_size; ++op) {
      // The forward's divisor: taps inside X, or inside X and its explicit pads with
      // count_include_pad (never the ceil_mode overhang); per dim, then their product.
      int64_t o_idx[kMaxSpatialDims], count = 1;
      UnravelIndex(op, g.out, g.spatial, o_idx);
      for (int i = 0; i < g.spatial; ++i) {
        const int64_t lo = count_include_pad ? -g.pad_begin[i] : 0;
        const int64_t hi = count_include_pad ? g.in[i] + g.pad_end[i] : g.in[i];
        count *= TapsIn(o_idx[i] * g.stride[i] - g.pad_begin[i], g.kernel[i], g.dilation[i], lo, hi);
      }
      if (count == 0) continue;
      const float v = dyd[p * out_size + op] / static_cast<float>(count);
      WindowTaps(g, op, &taps);
      for (int64_t off : taps)
        if (off >= 0) dxd[p * in_size + off] += v;
    }
  }
  return Status::Ok();
}

Status GatherGradReference(int64_t axis, const Tensor& x, const Tensor& indices, const Tensor& dy, Tensor* dx,
                           int /*num_threads*/) {
  GatherGradShape s;
  WH_RETURN_IF_ERROR(ResolveGatherGrad(axis, x, indices, dy, *dx, &s));
  const int64_t ni = static_cast<int64_t>(s.idx.size());
  const float* dyd = dy.data<float>();
  float* dxd = dx->data<float>();
  std::fill(dxd, dxd + dx->numel(), 0.f);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < ni; ++j)
      for (int64_t k = 0; k < s.inner; ++k)
        dxd[(o * s.n + s.idx[static_cast<size_t>(j)]) * s.inner + k] += dyd[(o * ni + j) * s.inner + k];
  return Status::Ok();
}

namespace reference {
const GradFns kGradFns{ConvGradInputReference, ConvGradWeightReference, MaxPoolGradReference, ReluGradReference,
                       AveragePoolGradReference, GatherGradReference};
}  // namespace reference

}  // namespace whittle
