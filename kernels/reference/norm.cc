#include "kernels/reference/norm.h"

#include <cmath>
#include <string>

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

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

class BatchNormReferenceKernel : public OpKernel {
 public:
  BatchNormReferenceKernel(float eps, bool spatial) : eps_(eps), spatial_(spatial) {}

  Status Compute(KernelContext& ctx) const override {
    for (size_t i = 1; i < ctx.outputs.size(); ++i)
      if (ctx.outputs[i]) return Unimplemented("BatchNormalization training outputs are not supported");
    const Tensor& x = *ctx.inputs[0];
    const Tensor* params[4] = {ctx.inputs[1], ctx.inputs[2], ctx.inputs[3], ctx.inputs[4]};
    BatchNormShape s;
    WH_RETURN_IF_ERROR(ResolveBatchNormShape(x, params, spatial_, &s));
    Tensor& y = *ctx.outputs[0];
    if (x.dtype() == DType::kFloat32) {
      BatchNormRef<float>(s, x.data<float>(), params[0]->data<float>(), params[1]->data<float>(),
                          params[2]->data<float>(), params[3]->data<float>(), eps_, y.data<float>());
    } else {
      BatchNormRef<double>(s, x.data<double>(), params[0]->data<double>(), params[1]->data<double>(),
                           params[2]->data<double>(), params[3]->data<double>(), eps_, y.data<double>());
    }
    return Status::Ok();
  }

 private:
  double eps_;
  bool spatial_;
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

class LayerNormReferenceKernel : public OpKernel {
 public:
  LayerNormReferenceKernel(int64_t axis, float eps) : axis_(axis), eps_(eps) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[0];
    const Tensor& scale = *ctx.inputs[1];
    const Tensor* bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    LayerNormShape s;
    WH_RETURN_IF_ERROR(ResolveLayerNormShape(x, axis_, scale, bias, &s));
    Tensor* mean = ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr;
    Tensor* inv = ctx.outputs.size() > 2 ? ctx.outputs[2] : nullptr;
    if ((mean && (mean->dtype() != DType::kFloat32 || mean->numel() != s.outer)) ||
        (inv && (inv->dtype() != DType::kFloat32 || inv->numel() != s.outer)))
      return Internal("LayerNormalization Mean/InvStdDev outputs must be float32 with one value per row");
    float* mp = mean ? mean->data<float>() : nullptr;
    float* ip = inv ? inv->data<float>() : nullptr;
    Tensor& y = *ctx.outputs[0];
    if (x.dtype() == DType::kFloat32) {
      LayerNormRef<float>(s, x.data<float>(), scale.data<float>(), scale.numel(),
                          bias ? bias->data<float>() : nullptr, bias ? bias->numel() : 0, eps_, y.data<float>(), mp,
                          ip);
    } else {
      LayerNormRef<double>(s, x.data<double>(), scale.data<double>(), scale.numel(),
                           bias ? bias->data<double>() : nullptr, bias ? bias->numel() : 0, eps_, y.data<double>(),
                           mp, ip);
    }
    return Status::Ok();
  }

 private:
  int64_t axis_;
  double eps_;
};

bool IsFloatType(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

}  // namespace

Status ResolveBatchNormShape(const Tensor& x, const Tensor* const params[4], bool spatial, BatchNormShape* s) {
  if (x.rank() < 2) return InvalidArgument("BatchNormalization X must have rank >= 2, got " + DimsToString(x.dims()));
  s->batch = x.dim(0);
  s->channels = x.dim(1);
  s->inner = 1;
  for (int i = 2; i < x.rank(); ++i) s->inner *= x.dim(i);
  s->per_element = !spatial;
  const int64_t want = spatial ? s->channels : s->channels * s->inner;
  static const char* kNames[4] = {"scale", "B", "mean", "var"};
  for (int i = 0; i < 4; ++i) {
    if (!params[i]) return InvalidArgument(std::string("BatchNormalization input ") + kNames[i] + " is missing");
    if (params[i]->dtype() != x.dtype())
      return InvalidArgument(std::string("BatchNormalization ") + kNames[i] + " must have X's element type");
    if (params[i]->numel() != want)
      return InvalidArgument(std::string("BatchNormalization ") + kNames[i] + " " +
                             DimsToString(params[i]->dims()) + " must have " + Str(want) + " values");
  }
  return Status::Ok();
}

Status CheckBatchNormInit(const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (!IsFloatType(dt))
    return Unimplemented(std::string("BatchNormalization supports float and double, got ") + DTypeName(dt));
  if (init.attrs.GetInt("training_mode", 0) != 0)
    return Unimplemented("BatchNormalization training_mode=1 is not supported (inference only)");
  if (init.opset < 7 && init.attrs.GetInt("is_test", 0) == 0)
    return Unimplemented("BatchNormalization with is_test=0 (training) is not supported");
  return Status::Ok();
}

Status ResolveLayerNormShape(const Tensor& x, int64_t axis, const Tensor& scale, const Tensor* bias,
                             LayerNormShape* s) {
  const int64_t r = x.rank();
  if (axis < -r || axis >= r)
    return InvalidArgument("LayerNormalization axis " + Str(axis) + " is out of range for rank " + Str(r));
  if (axis < 0) axis += r;
  s->outer = 1;
  s->inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? s->outer : s->inner) *= x.dim(static_cast<int>(i));
  for (const Tensor* t : {&scale, bias}) {
    if (!t) continue;
    if (t->dtype() != x.dtype())
      return InvalidArgument("LayerNormalization Scale and B must have X's element type");
    if (t->numel() == 1 && t->rank() <= r - axis) continue;
    // Same trailing dims as X.shape[axis:], with optional leading 1s.
    bool ok = t->numel() == s->inner && t->rank() <= r;
    for (int i = 0; ok && i < t->rank(); ++i) {
      const int64_t xi = r - t->rank() + i;
      ok = xi >= axis ? t->dim(i) == x.dim(static_cast<int>(xi)) : t->dim(i) == 1;
    }
    if (!ok)
      return Unimplemented("LayerNormalization Scale/B " + DimsToString(t->dims()) + " must have shape X.shape[axis:] " +
                           "or a single value (other broadcasts are not supported)");
  }
  return Status::Ok();
}

Status CheckLayerNormInit(const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (!IsFloatType(dt))
    return Unimplemented(std::string("LayerNormalization supports float and double, got ") + DTypeName(dt));
  const int64_t stash = init.attrs.GetInt("stash_type", 1);
  if (stash != 1) return Unimplemented("LayerNormalization stash_type " + Str(stash) + " is not supported (only 1)");
  return Status::Ok();
}

StatusOr<std::unique_ptr<OpKernel>> CreateBatchNormReferenceKernel(const KernelInit& init) {
  WH_RETURN_IF_ERROR(CheckBatchNormInit(init));
  const bool spatial = init.opset >= 9 || init.attrs.GetInt("spatial", 1) != 0;
  return std::unique_ptr<OpKernel>(
      std::make_unique<BatchNormReferenceKernel>(init.attrs.GetFloat("epsilon", 1e-5f), spatial));
}

StatusOr<std::unique_ptr<OpKernel>> CreateLayerNormReferenceKernel(const KernelInit& init) {
  WH_RETURN_IF_ERROR(CheckLayerNormInit(init));
  return std::unique_ptr<OpKernel>(std::make_unique<LayerNormReferenceKernel>(
      init.attrs.GetInt("axis", -1), init.attrs.GetFloat("epsilon", 1e-5f)));
}

}  // namespace whittle
