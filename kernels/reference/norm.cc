#include "kernels/reference/norm.h"

#include <cmath>
#include <vector>

namespace whittle::reference {
namespace {

template <class T>
void BatchNormRef(const BatchNormShape& s, const T* x, const T* scale, const T* bias, const T* mean, const T* var,
                  double eps, T* y) {
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t p = s.per_element ? c * s.inner + i : c;
        const int64_t at = (n * s.channels + c) * s.inner + i;
        const double norm = (static_cast<double>(x[at]) - static_cast<double>(mean[p])) /
                            std::sqrt(static_cast<double>(var[p]) + eps);
        y[at] = static_cast<T>(norm * static_cast<double>(scale[p]) + static_cast<double>(bias[p]));
      }
}

// Training: batch mean and biased batch variance per statistic (two passes in double), Y
// normalised with them, then the optional statistic outputs.
template <class T>
void BatchNormTrainingRef(const BatchNormCall& call, double eps, double momentum) {
  const BatchNormShape& s = call.shape;
  const T* x = call.x->data<T>();
  const int64_t stats = s.stats();
  std::vector<double> mean(static_cast<size_t>(stats), 0.0), var(static_cast<size_t>(stats), 0.0);
  auto stat = [&](int64_t c, int64_t i) { return static_cast<size_t>(s.per_element ? c * s.inner + i : c); };
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t i = 0; i < s.inner; ++i) mean[stat(c, i)] += static_cast<double>(x[(n * s.channels + c) * s.inner + i]);
  const double count = static_cast<double>(s.count());
  for (double& m : mean) m /= count;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t i = 0; i < s.inner; ++i) {
        const double d = static_cast<double>(x[(n * s.channels + c) * s.inner + i]) - mean[stat(c, i)];
        var[stat(c, i)] += d * d;
      }
  for (double& v : var) v /= count;
  const T* scale = call.params[0]->data<T>();
  const T* bias = call.params[1]->data<T>();
  T* y = call.y->data<T>();
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t i = 0; i < s.inner; ++i) {
        const size_t p = stat(c, i);
        const int64_t at = (n * s.channels + c) * s.inner + i;
        const double norm = (static_cast<double>(x[at]) - mean[p]) / std::sqrt(var[p] + eps);
        y[at] = static_cast<T>(norm * static_cast<double>(scale[p]) + static_cast<double>(bias[p]));
      }
  const T* in_mean = call.params[2]->data<T>();
  const T* in_var = call.params[3]->data<T>();
  for (int64_t p = 0; p < stats; ++p) {
    const size_t q = static_cast<size_t>(p);
    if (call.running_mean)
      call.running_mean->data<T>()[p] =
          static_cast<T>(static_cast<double>(in_mean[p]) * momentum + mean[q] * (1.0 - momentum));
    if (call.running_var)
      call.running_var->data<T>()[p] =
          static_cast<T>(static_cast<double>(in_var[p]) * momentum + var[q] * (1.0 - momentum));
    if (call.saved_mean) call.saved_mean->data<T>()[p] = static_cast<T>(mean[q]);
    if (call.saved_var) call.saved_var->data<T>()[p] = static_cast<T>(var[q]);
  }
}

class BatchNormReferenceKernel : public OpKernel {
 public:
  explicit BatchNormReferenceKernel(const BatchNormAttrs& a) : attrs_(a) {}

  Status Compute(KernelContext& ctx) const override {
    BatchNormCall call;
    WH_RETURN_IF_ERROR(ResolveBatchNormCall(ctx, attrs_, &call));
    const bool f32 = call.x->dtype() == DType::kFloat32;
    if (call.training) {
      if (f32) BatchNormTrainingRef<float>(call, attrs_.epsilon, attrs_.momentum);
      else BatchNormTrainingRef<double>(call, attrs_.epsilon, attrs_.momentum);
      return Status::Ok();
    }
    const Tensor* const* p = call.params;
    if (f32) {
      BatchNormRef<float>(call.shape, call.x->data<float>(), p[0]->data<float>(), p[1]->data<float>(),
                          p[2]->data<float>(), p[3]->data<float>(), attrs_.epsilon, call.y->data<float>());
    } else {
      BatchNormRef<double>(call.shape, call.x->data<double>(), p[0]->data<double>(), p[1]->data<double>(),
                           p[2]->data<double>(), p[3]->data<double>(), attrs_.epsilon, call.y->data<double>());
    }
    return Status::Ok();
  }

 private:
  BatchNormAttrs attrs_;
};

template <class T>
void LayerNormRef(const LayerNormShape& s, const T* x, const T* scale, int64_t scale_n, const T* bias,
                  int64_t bias_n, double eps, T* y, float* mean_out, float* inv_out) {
  for (int64_t r = 0; r < s.outer; ++r) {
    const T* xr = x + r * s.inner;
    T* yr = y + r * s.inner;
    double sum = 0;
    for (int64_t i = 0; i < s.inner; ++i) sum += static_cast<double>(xr[i]);
    const double mean = sum / static_cast<double>(s.inner);
    double sq = 0;
    for (int64_t i = 0; i < s.inner; ++i) {
      const double d = static_cast<double>(xr[i]) - mean;
      sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(s.inner) + eps);
    for (int64_t i = 0; i < s.inner; ++i) {
      const double sc = static_cast<double>(scale[scale_n == 1 ? 0 : i]);
      const double b = bias ? static_cast<double>(bias[bias_n == 1 ? 0 : i]) : 0.0;
      yr[i] = static_cast<T>((static_cast<double>(xr[i]) - mean) * inv * sc + b);
    }
    if (mean_out) mean_out[r] = static_cast<float>(mean);
    if (inv_out) inv_out[r] = static_cast<float>(inv);
  }
}

class LayerNormReferenceKernel : public LayerNormKernelBase {
 public:
  using LayerNormKernelBase::LayerNormKernelBase;

 protected:
  Status Run(const LayerNormCall& c, Tensor& y, int) const override {
    const Tensor* bias = c.bias;
    const double eps = attrs_.epsilon;
    if (c.x->dtype() == DType::kFloat32) {
      LayerNormRef<float>(c.shape, c.x->data<float>(), c.scale->data<float>(), c.scale->numel(),
                          bias ? bias->data<float>() : nullptr, bias ? bias->numel() : 0, eps, y.data<float>(),
                          c.mean_out, c.inv_out);
    } else {
      LayerNormRef<double>(c.shape, c.x->data<double>(), c.scale->data<double>(), c.scale->numel(),
                           bias ? bias->data<double>() : nullptr, bias ? bias->numel() : 0, eps, y.data<double>(),
                           c.mean_out, c.inv_out);
    }
    return Status::Ok();
  }
};

template <class T>
void ChannelNormRef(const ChannelNormShape& s, const T* x, const T* scale, const T* bias, double eps, T* y) {
  const int64_t cpg = s.channels / s.groups, group_size = cpg * s.inner;
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const int64_t base = (n * s.channels + g * cpg) * s.inner;
      double sum = 0;
      for (int64_t i = 0; i < group_size; ++i) sum += static_cast<double>(x[base + i]);
      const double mean = group_size > 0 ? sum / static_cast<double>(group_size) : 0.0;
      double sq = 0;
      for (int64_t i = 0; i < group_size; ++i) {
        const double d = static_cast<double>(x[base + i]) - mean;
        sq += d * d;
      }
      const double var = group_size > 0 ? sq / static_cast<double>(group_size) : 0.0;
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t cc = 0; cc < cpg; ++cc) {
        const int64_t p = s.per_channel ? g * cpg + cc : g;
        const double sc = static_cast<double>(scale[p]), b = static_cast<double>(bias[p]);
        for (int64_t i = 0; i < s.inner; ++i) {
          const int64_t at = base + cc * s.inner + i;
          y[at] = static_cast<T>((static_cast<double>(x[at]) - mean) * inv * sc + b);
        }
      }
    }
  }
}

class ChannelNormReferenceKernel : public OpKernel {
 public:
  explicit ChannelNormReferenceKernel(const ChannelNormAttrs& a) : attrs_(a) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[0];
    ChannelNormShape s;
    WH_RETURN_IF_ERROR(ResolveChannelNormShape(attrs_, x, *ctx.inputs[1], *ctx.inputs[2], &s));
    Tensor& y = *ctx.outputs[0];
    if (x.dtype() == DType::kFloat32) {
      ChannelNormRef<float>(s, x.data<float>(), ctx.inputs[1]->data<float>(), ctx.inputs[2]->data<float>(),
                            attrs_.epsilon, y.data<float>());
    } else {
      ChannelNormRef<double>(s, x.data<double>(), ctx.inputs[1]->data<double>(), ctx.inputs[2]->data<double>(),
                             attrs_.epsilon, y.data<double>());
    }
    return Status::Ok();
  }

 private:
  ChannelNormAttrs attrs_;
};

KernelOr MakeChannelNorm(const ChannelNormAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<ChannelNormReferenceKernel>(a));
}

KernelOr MakeBatchNorm(const BatchNormAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<BatchNormReferenceKernel>(a));
}

KernelOr MakeLayerNorm(const LayerNormAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(std::make_unique<LayerNormReferenceKernel>(a));
}

}  // namespace

const NormFns kNormFns{&MakeBatchNorm, &MakeLayerNorm, &MakeChannelNorm, &MakeChannelNorm};

}  // namespace whittle::reference
