#include "kernels/reference/conv.h"

#include <memory>
#include <utility>
#include <vector>

namespace whittle {

template <class T>
void ConvReference(const ConvShape& s, const T* x, const T* w, const T* b, T* y) {
  const WindowGeometry& g = s.geo;
  const int n = g.spatial;
  const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  const int64_t in_size = g.InSize(), out_size = g.OutSize(), k_size = g.KernelSize();
  int64_t o_idx[kMaxSpatialDims], k_idx[kMaxSpatialDims];
  for (int64_t bn = 0; bn < s.batch; ++bn) {
    for (int64_t m = 0; m < s.out_channels; ++m) {
      const int64_t grp = m / mg;
      for (int64_t op = 0; op < out_size; ++op) {
        UnravelIndex(op, g.out, n, o_idx);
        double acc = b ? static_cast<double>(b[m]) : 0.0;
        for (int64_t cc = 0; cc < cg; ++cc) {
          const T* xc = x + (bn * s.in_channels + grp * cg + cc) * in_size;
          const T* wc = w + (m * cg + cc) * k_size;
          for (int64_t kp = 0; kp < k_size; ++kp) {
            UnravelIndex(kp, g.kernel, n, k_idx);
            int64_t off;
            if (TapOffset(g, o_idx, k_idx, &off)) acc += static_cast<double>(xc[off]) * static_cast<double>(wc[kp]);
          }
        }
        y[(bn * s.out_channels + m) * out_size + op] = static_cast<T>(acc);
      }
    }
  }
}

template void ConvReference<float>(const ConvShape&, const float*, const float*, const float*, float*);
template void ConvReference<double>(const ConvShape&, const double*, const double*, const double*, double*);

template <class T>
void ConvTransposeReference(const ConvTransposeShape& s, const T* x, const T* w, const T* b, T* y) {
  const WindowGeometry& g = s.geo;
  const int n = g.spatial;
  const int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  const int64_t x_size = g.OutSize(), y_size = g.InSize(), k_size = g.KernelSize();
  int64_t x_idx[kMaxSpatialDims], k_idx[kMaxSpatialDims];
  std::vector<double> acc(static_cast<size_t>(y_size));
  for (int64_t bn = 0; bn < s.batch; ++bn) {
    for (int64_t m = 0; m < s.out_channels; ++m) {
      const int64_t grp = m / mg, mm = m % mg;
      for (double& v : acc) v = b ? static_cast<double>(b[m]) : 0.0;
      for (int64_t cc = 0; cc < cg; ++cc) {
        const int64_t c = grp * cg + cc;
        const T* xc = x + (bn * s.in_channels + c) * x_size;
        const T* wc = w + (c * mg + mm) * k_size;
        for (int64_t xp = 0; xp < x_size; ++xp) {
          UnravelIndex(xp, g.out, n, x_idx);
          const double xv = static_cast<double>(xc[xp]);
          for (int64_t kp = 0; kp < k_size; ++kp) {
            UnravelIndex(kp, g.kernel, n, k_idx);
            int64_t off;
            if (TapOffset(g, x_idx, k_idx, &off)) acc[static_cast<size_t>(off)] += xv * static_cast<double>(wc[kp]);
          }
        }
      }
      T* ym = y + (bn * s.out_channels + m) * y_size;
      for (int64_t i = 0; i < y_size; ++i) ym[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
    }
  }
}

template void ConvTransposeReference<float>(const ConvTransposeShape&, const float*, const float*, const float*,
                                            float*);
template void ConvTransposeReference<double>(const ConvTransposeShape&, const double*, const double*,
                                             const double*, double*);

namespace reference {
namespace {

class ConvReferenceKernel : public OpKernel {
 public:
  ConvReferenceKernel(WindowAttrs a, int64_t group, FusedActivation act)
      : attrs_(std::move(a)), group_(group), act_(act) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& w = *ctx.inputs[1];
    const Tensor* b = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    ConvShape s;
    WH_RETURN_IF_ERROR(ResolveConvShape(attrs_, group_, x, w, b, &s));
    Tensor& y = *ctx.outputs[0];
    if (x.dtype() == DType::kFloat32) {
      ConvReference<float>(s, x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>());
      // The residual fused by runtime/rewrite/fuse_conv_add, added before the activation.
      if (ctx.inputs.size() > 3 && ctx.inputs[3]) {
        const Tensor& sum = *ctx.inputs[3];
        if (sum.dtype() != DType::kFloat32 || sum.dims() != y.dims())
          return InvalidArgument("Conv's fused sum input must be float32 " + DimsToString(y.dims()) + ", got " +
                                 DimsToString(sum.dims()));
        float* yd = y.data<float>();
        const float* sd = sum.data<float>();
        for (int64_t i = 0; i < y.numel(); ++i) yd[i] += sd[i];
      }
      act_.Apply(y.data<float>(), y.numel());
    } else {
      ConvReference<double>(s, x.data<double>(), w.data<double>(), b ? b->data<double>() : nullptr,
                            y.data<double>());
    }
    return Status::Ok();
  }

 private:
  WindowAttrs attrs_;
  int64_t group_;
  FusedActivation act_;
};

KernelOr MakeConv(const ConvAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<ConvReferenceKernel>(a.window, a.group, a.act));
}

class ConvTransposeReferenceKernel : public ConvTransposeKernelBase {
 public:
  using ConvTransposeKernelBase::ConvTransposeKernelBase;

 protected:
  Status Run(const ConvTransposeShape& s, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
             int) const override {
    if (x.dtype() == DType::kFloat32) {
      ConvTransposeReference<float>(s, x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr,
                                    y.data<float>());
    } else {
      ConvTransposeReference<double>(s, x.data<double>(), w.data<double>(), b ? b->data<double>() : nullptr,
                                     y.data<double>());
    }
    return Status::Ok();
  }

};

KernelOr MakeConvTranspose(const ConvTransposeAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<ConvTransposeReferenceKernel>(a));
}

}  // namespace

const ConvFns kConvFns{&MakeConv, &MakeConvTranspose};

}  // namespace reference
}  // namespace whittle
