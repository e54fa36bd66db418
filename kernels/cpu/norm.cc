#include "kernels/cpu/norm.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace whittle::cpu {
namespace {

// Below this many elements a normalisation runs on one thread.
constexpr int64_t kMinParallelElems = 1 << 15;

class BatchNormCpuKernel : public OpKernel {
 public:
  // params: the four constant parameter tensors, or nullptrs (folded per call then).
  BatchNormCpuKernel(float eps, const Tensor* const params[4]) : eps_(eps) {
    if (!(params[0] && params[1] && params[2] && params[3])) return;
    const int64_t c = params[0]->numel();
    for (int i = 1; i < 4; ++i)
      if (params[i]->numel() != c) return;  // Compute reports the mismatch
    mul_.resize(static_cast<size_t>(c));
    add_.resize(static_cast<size_t>(c));
    Fold(params, 0, c, mul_.data(), add_.data());
  }

  Status Compute(KernelContext& ctx) const override {
    WH_RETURN_IF_ERROR(CheckBatchNormOutputs(ctx));
    const Tensor& x = *ctx.inputs[0];
    const Tensor* params[4] = {ctx.inputs[1], ctx.inputs[2], ctx.inputs[3], ctx.inputs[4]};
    BatchNormShape s;
    WH_RETURN_IF_ERROR(ResolveBatchNormShape(x, params, true, &s));
    const bool folded = static_cast<int64_t>(mul_.size()) == s.channels;
    const float* xp = x.data<float>();
    float* yp = ctx.outputs[0]->data<float>();
    const int64_t planes = s.batch * s.channels;
    const int threads = planes * s.inner >= kMinParallelElems ? std::max(1, ctx.num_threads) : 1;
    ParallelFor(planes, threads, [&](int64_t p) {
      const int64_t c = p % s.channels;
      float a, b;
      if (folded) {
        a = mul_[static_cast<size_t>(c)];
        b = add_[static_cast<size_t>(c)];
      } else {
        Fold(params, c, c + 1, &a, &b);
      }
      const float* xi = xp + p * s.inner;
      float* yi = yp + p * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) yi[i] = xi[i] * a + b;
    });
    return Status::Ok();
  }

 private:
  // a = scale / sqrt(var + eps), b = B - mean * a for channels [c0, c1).
  void Fold(const Tensor* const params[4], int64_t c0, int64_t c1, float* a, float* b) const {
    const float* scale = params[0]->data<float>();
    const float* bias = params[1]->data<float>();
    const float* mean = params[2]->data<float>();
    const float* var = params[3]->data<float>();
    for (int64_t c = c0; c < c1; ++c) {
      const double m = static_cast<double>(scale[c]) / std::sqrt(static_cast<double>(var[c]) + eps_);
      a[c - c0] = static_cast<float>(m);
      b[c - c0] = static_cast<float>(static_cast<double>(bias[c]) - static_cast<double>(mean[c]) * m);
    }
  }

  double eps_;
  std::vector<float> mul_, add_;
};

class LayerNormCpuKernel : public LayerNormKernelBase {
 public:
  using LayerNormKernelBase::LayerNormKernelBase;

 protected:
  Status Run(const LayerNormCall& call, Tensor& y, int num_threads) const override {
    const LayerNormShape& s = call.shape;
    float* mean_out = call.mean_out;
    float* inv_out = call.inv_out;
    const float* xp = call.x->data<float>();
    const float* sp = call.scale->data<float>();
    const float* bp = call.bias ? call.bias->data<float>() : nullptr;
    const bool scalar_scale = call.scale->numel() == 1 && s.inner != 1;
    const bool scalar_bias = call.bias && call.bias->numel() == 1 && s.inner != 1;
    const float eps = attrs_.epsilon;
    float* yp = y.data<float>();
    const int threads = s.outer * s.inner >= kMinParallelElems ? std::max(1, num_threads) : 1;
    const float inv_n = 1.f / static_cast<float>(s.inner);
    ParallelFor(s.outer, threads, [&](int64_t r) {
      const float* xr = xp + r * s.inner;
      float* yr = yp + r * s.inner;
      // Eigen's packet reductions: a plain `sum += x[i]` loop is one serial chain of adds
      // (no reassociation without -ffast-math), 4+ cycles per element.
      const Eigen::Map<const Eigen::ArrayXf> xa(xr, s.inner);
      const float mean = xa.sum() * inv_n;
      const float sq = (xa - mean).square().sum();
      const float inv = 1.f / std::sqrt(sq * inv_n + eps);
      if (!scalar_scale && !scalar_bias) {
        if (bp) {
          for (int64_t i = 0; i < s.inner; ++i) yr[i] = (xr[i] - mean) * inv * sp[i] + bp[i];
        } else {
          for (int64_t i = 0; i < s.inner; ++i) yr[i] = (xr[i] - mean) * inv * sp[i];
        }
      } else {
        for (int64_t i = 0; i < s.inner; ++i) {
          const float sc = sp[scalar_scale ? 0 : i];
          const float b = bp ? bp[scalar_bias ? 0 : i] : 0.f;
          yr[i] = (xr[i] - mean) * inv * sc + b;
        }
      }
      if (mean_out) mean_out[r] = mean;
      if (inv_out) inv_out[r] = inv;
    });
    return Status::Ok();
  }
};

KernelOr MakeBatchNorm(const BatchNormAttrs& a, const KernelInit& init) {
  if (!init.AllFloat32() || !a.spatial) return std::unique_ptr<OpKernel>();
  const Tensor* params[4] = {nullptr, nullptr, nullptr, nullptr};
  for (size_t i = 0; i < 4; ++i)
    if (i + 1 < init.const_inputs.size()) params[i] = init.const_inputs[i + 1];
  return std::unique_ptr<OpKernel>(std::make_unique<BatchNormCpuKernel>(a.epsilon, params));
}

KernelOr MakeLayerNorm(const LayerNormAttrs& a, const KernelInit& init) {
  if (!init.AllFloat32()) return std::unique_ptr<OpKernel>();
  return std::unique_ptr<OpKernel>(std::make_unique<LayerNormCpuKernel>(a));
}

}  // namespace

const NormFns kNormFns{&MakeBatchNorm, &MakeLayerNorm, nullptr, nullptr};

}  // namespace whittle::cpu
