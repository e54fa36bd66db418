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

// Training statistics are summed over work items of at most kStatChunk elements of one (n, c)
// plane: each item's float partial sum is vectorised, the partials are combined per channel in
// double in a fixed order, so the result does not depend on the thread count.
constexpr int64_t kStatChunk = 1 << 14;

class BatchNormCpuKernel : public OpKernel {
 public:
  // params: the four constant parameter tensors, or nullptrs (folded per call then).
  BatchNormCpuKernel(const BatchNormAttrs& a, const Tensor* const params[4]) : attrs_(a), eps_(a.epsilon) {
    if (a.training || !(params[0] && params[1] && params[2] && params[3])) return;
    const int64_t c = params[0]->numel();
    for (int i = 1; i < 4; ++i)
      if (params[i]->numel() != c) return;  // Compute reports the mismatch
    mul_.resize(static_cast<size_t>(c));
    add_.resize(static_cast<size_t>(c));
    Fold(params, 0, c, mul_.data(), add_.data());
  }

  Status Compute(KernelContext& ctx) const override {
    BatchNormCall call;
    WH_RETURN_IF_ERROR(ResolveBatchNormCall(ctx, attrs_, &call));
    if (call.training) return Train(call, ctx.num_threads);
    const BatchNormShape& s = call.shape;
    const Tensor* const* params = call.params;
    const bool folded = static_cast<int64_t>(mul_.size()) == s.channels;
    const float* xp = call.x->data<float>();
    float* yp = call.y->data<float>();
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

  // Three sweeps over X (sum, squared deviations, apply), each spread over (plane, chunk) items.
  Status Train(const BatchNormCall& call, int num_threads) const {
    const BatchNormShape& s = call.shape;
    const float* xp = call.x->data<float>();
    float* yp = call.y->data<float>();
    const int64_t planes = s.batch * s.channels;
    const int64_t chunks = std::max<int64_t>(1, (s.inner + kStatChunk - 1) / kStatChunk);
    const int64_t items = planes * chunks;
    const int threads = planes * s.inner >= kMinParallelElems ? std::max(1, num_threads) : 1;
    std::vector<double> partial(static_cast<size_t>(items));
    auto span = [&](int64_t item, int64_t* begin, int64_t* len) {
      const int64_t chunk = item % chunks;
      *begin = (item / chunks) * s.inner + chunk * kStatChunk;
      *len = std::max<int64_t>(0, std::min(kStatChunk, s.inner - chunk * kStatChunk));
    };
    // Per channel, in a fixed order: sum over n, then chunk.
    auto combine = [&](std::vector<double>* out) {
      out->assign(static_cast<size_t>(s.channels), 0.0);
      for (int64_t n = 0; n < s.batch; ++n)
        for (int64_t c = 0; c < s.channels; ++c)
          for (int64_t k = 0; k < chunks; ++k)
            (*out)[static_cast<size_t>(c)] += partial[static_cast<size_t>((n * s.channels + c) * chunks + k)];
    };
    const double count = static_cast<double>(s.count());
    ParallelFor(items, threads, [&](int64_t item) {
      int64_t b, len;
      span(item, &b, &len);
      partial[static_cast<size_t>(item)] = static_cast<double>(Eigen::Map<const Eigen::ArrayXf>(xp + b, len).sum());
    });
    std::vector<double> mean, var;
    combine(&mean);
    for (double& m : mean) m /= count;
    ParallelFor(items, threads, [&](int64_t item) {
      int64_t b, len;
      span(item, &b, &len);
      const float m = static_cast<float>(mean[static_cast<size_t>((item / chunks) % s.channels)]);
      partial[static_cast<size_t>(item)] =
          static_cast<double>((Eigen::Map<const Eigen::ArrayXf>(xp + b, len) - m).square().sum());
    });
    combine(&var);
    for (double& v : var) v /= count;
    const float* scale = call.params[0]->data<float>();
    const float* bias = call.params[1]->data<float>();
    std::vector<float> mul(static_cast<size_t>(s.channels)), add(static_cast<size_t>(s.channels));
    for (int64_t c = 0; c < s.channels; ++c) {
      const size_t q = static_cast<size_t>(c);
      const double a = static_cast<double>(scale[c]) / std::sqrt(var[q] + eps_);
      mul[q] = static_cast<float>(a);
      add[q] = static_cast<float>(static_cast<double>(bias[c]) - mean[q] * a);
    }
    ParallelFor(items, threads, [&](int64_t item) {
      int64_t b, len;
      span(item, &b, &len);
      const size_t c = static_cast<size_t>((item / chunks) % s.channels);
      const float a = mul[c], d = add[c];
      for (int64_t i = b; i < b + len; ++i) yp[i] = xp[i] * a + d;
    });
    const double mom = attrs_.momentum;
    const float* in_mean = call.params[2]->data<float>();
    const float* in_var = call.params[3]->data<float>();
    for (int64_t c = 0; c < s.channels; ++c) {
      const size_t q = static_cast<size_t>(c);
      if (call.running_mean)
        call.running_mean->data<float>()[c] = static_cast<float>(in_mean[c] * mom + mean[q] * (1.0 - mom));
      if (call.running_var)
        call.running_var->data<float>()[c] = static_cast<float>(in_var[c] * mom + var[q] * (1.0 - mom));
      if (call.saved_mean) call.saved_mean->data<float>()[c] = static_cast<float>(mean[q]);
      if (call.saved_var) call.saved_var->data<float>()[c] = static_cast<float>(var[q]);
    }
    return Status::Ok();
  }

  BatchNormAttrs attrs_;
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
  return std::unique_ptr<OpKernel>(std::make_unique<BatchNormCpuKernel>(a, params));
}

KernelOr MakeLayerNorm(const LayerNormAttrs& a, const KernelInit& init) {
  if (!init.AllFloat32()) return std::unique_ptr<OpKernel>();
  return std::unique_ptr<OpKernel>(std::make_unique<LayerNormCpuKernel>(a));
}

}  // namespace

const NormFns kNormFns{&MakeBatchNorm, &MakeLayerNorm, nullptr, nullptr};

}  // namespace whittle::cpu
