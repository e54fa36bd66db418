#include "kernels/common/quant_params.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace whittle {

StatusOr<QuantLayout> ResolveQuantLayout(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis) {
  if (scale.dtype() != DType::kFloat32)
    return InvalidArgument(std::string("scale must be float32, got ") + DTypeName(scale.dtype()));
  if (scale.rank() > 1) return InvalidArgument("scale must be a scalar or 1-D, got " + DimsToString(scale.dims()));
  if (zp) {
    if (zp->dtype() != DType::kUInt8 && zp->dtype() != DType::kInt8 && zp->dtype() != DType::kInt32)
      return InvalidArgument(std::string("zero_point must be int8, uint8 or int32, got ") + DTypeName(zp->dtype()));
    if (zp->numel() != scale.numel())
      return InvalidArgument("zero_point " + DimsToString(zp->dims()) + " and scale " + DimsToString(scale.dims()) +
                             " differ in size");
  }
  const float* s = scale.data<float>();
  for (int64_t i = 0; i < scale.numel(); ++i)
    if (!(s[i] > 0.f) || !std::isfinite(s[i]))
      return InvalidArgument("scale[" + std::to_string(i) + "] = " + std::to_string(s[i]) +
                             " is invalid: scales must be positive and finite");
  QuantLayout l;
  if (scale.numel() == 1) {
    l.inner = x.numel();
    return l;
  }
  const int64_t r = x.rank();
  if (axis < -r || axis >= r)
    return InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  l.channels = x.dim(static_cast<int>(axis));
  if (l.channels != scale.numel())
    return InvalidArgument("per-axis scale has " + std::to_string(scale.numel()) + " entries but x has " +
                           std::to_string(l.channels) + " along axis " + std::to_string(axis));
  for (int k = 0; k < axis; ++k) l.outer *= x.dim(k);
  for (int k = static_cast<int>(axis) + 1; k < r; ++k) l.inner *= x.dim(k);
  return l;
}

int64_t ZeroPointAt(const Tensor* zp, int64_t c) {
  if (!zp) return 0;
  switch (zp->dtype()) {
    case DType::kUInt8: return static_cast<const uint8_t*>(zp->raw_data())[c];
    case DType::kInt8: return static_cast<const int8_t*>(zp->raw_data())[c];
    default: return static_cast<const int32_t*>(zp->raw_data())[c];
  }
}

namespace {

std::string Str(int64_t v) { return std::to_string(v); }

bool IsByte(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

int32_t ByteAt(const void* p, DType dt, int64_t i) {
  return dt == DType::kUInt8 ? static_cast<int32_t>(static_cast<const uint8_t*>(p)[i])
                             : static_cast<int32_t>(static_cast<const int8_t*>(p)[i]);
}

// 1 value, or `channels` values (1-D) when channels >= 0.
Status CheckParamLength(const std::string& node, const std::string& what, const Tensor& t, int64_t channels) {
  if (t.rank() > 1) return InvalidArgument(node + ": " + what + " must be a scalar or 1-D, got " + DimsToString(t.dims()));
  const int64_t n = t.numel();
  if (n == 1) return Status::Ok();
  if (channels < 0)
    return InvalidArgument(node + ": " + what + " must be per-tensor (one value), got " + DimsToString(t.dims()));
  if (n != channels)
    return InvalidArgument(node + ": " + what + " has " + Str(n) + " values, expected 1 or " + Str(channels) +
                           " (one per channel)");
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<int32_t>> ReadZeroPoints(const std::string& node, const std::string& what, const Tensor* zp,
                                              DType data_dtype, int64_t channels) {
  if (!zp) return std::vector<int32_t>{0};
  if (zp->dtype() != data_dtype)
    return InvalidArgument(node + ": " + what + " must have its data's type " + DTypeName(data_dtype) + ", got " +
                           DTypeName(zp->dtype()));
  if (!IsByte(zp->dtype()))
    return InvalidArgument(node + ": " + what + " must be int8 or uint8, got " + DTypeName(zp->dtype()));
  WH_RETURN_IF_ERROR(CheckParamLength(node, what, *zp, channels));
  std::vector<int32_t> v(static_cast<size_t>(zp->numel()));
  for (int64_t i = 0; i < zp->numel(); ++i) v[static_cast<size_t>(i)] = ByteAt(zp->raw_data(), zp->dtype(), i);
  return v;
}

StatusOr<QChannelParams> ReadQParams(const std::string& node, const std::string& what, const Tensor* scale,
                                     const Tensor* zero_point, DType data_dtype, int64_t channels) {
  if (!scale) return InvalidArgument(node + ": " + what + " is missing");
  if (scale->dtype() != DType::kFloat32)
    return InvalidArgument(node + ": " + what + " must be float32, got " + DTypeName(scale->dtype()));
  WH_RETURN_IF_ERROR(CheckParamLength(node, what, *scale, channels));
  QChannelParams p;
  const float* s = scale->data<float>();
  for (int64_t i = 0; i < scale->numel(); ++i) {
    if (!(std::isfinite(s[i]) && s[i] > 0.f))
      return InvalidArgument(node + ": " + what + " must be finite and > 0, got " + std::to_string(s[i]) +
                             (scale->numel() > 1 ? " at index " + Str(i) : std::string()));
    p.scale.push_back(s[i]);
  }
  const std::string zp_what = what.size() > 5 && what.compare(what.size() - 5, 5, "scale") == 0
                                  ? what.substr(0, what.size() - 5) + "zero_point"
                                  : what + " zero point";
  WH_ASSIGN_OR_RETURN(p.zero_point, ReadZeroPoints(node, zp_what, zero_point, data_dtype, channels));
  if (p.zero_point.size() > 1 && p.scale.size() > 1 && p.zero_point.size() != p.scale.size())
    return InvalidArgument(node + ": " + what + " and " + zp_what + " have different lengths");
  return p;
}

QOutput Int32QOutput() { return QOutput{}; }

StatusOr<QOutput> MakeQOutput(const std::string& node, const QChannelParams& x, const QChannelParams& w,
                              const Tensor* y_scale, const Tensor* y_zero_point, const Tensor* bias,
                              int64_t channels, const FusedActivation& act) {
  QOutput out;
  if (act.kind != FusedActivation::kNone && act.kind != FusedActivation::kRelu && act.kind != FusedActivation::kClip)
    return InvalidArgument(node + ": only Relu or Clip can be fused into an integer linear op");
  const bool relu = act.kind == FusedActivation::kRelu;
  out.relu = relu;
  if (x.scale.size() != 1) return InvalidArgument(node + ": the input scale must be per-tensor");
  const int64_t n = static_cast<int64_t>(w.scale.size());
  if (n != 1 && n != channels)
    return InvalidArgument(node + ": weight scale has " + Str(n) + " values, expected 1 or " + Str(channels));
  if (bias) {
    if (bias->dtype() != DType::kInt32)
      return InvalidArgument(node + ": bias must be int32, got " + DTypeName(bias->dtype()));
    if (bias->rank() != 1 || bias->dim(0) != channels)
      return InvalidArgument(node + ": bias must have shape [" + Str(channels) + "], got " + DimsToString(bias->dims()));
    out.bias.assign(bias->data<int32_t>(), bias->data<int32_t>() + channels);
  }
  if (!y_scale) {
    if (y_zero_point) return InvalidArgument(node + ": y_zero_point given without y_scale");
    if (act.kind == FusedActivation::kClip) return InvalidArgument(node + ": a fused Clip needs a quantized output");
    out.kind = QOutput::Kind::kFloat;
    out.dtype = DType::kFloat32;
    for (int64_t c = 0; c < n; ++c) out.multiplier.push_back(x.scale[0] * w.ScaleAt(c));
    return out;
  }
  const DType ydt = y_zero_point ? y_zero_point->dtype() : DType::kUInt8;
  WH_ASSIGN_OR_RETURN(QChannelParams y, ReadQParams(node, "y_scale", y_scale, y_zero_point, ydt, -1));
  out.kind = QOutput::Kind::kQuantized;
  out.dtype = ydt;
  out.zero_point = y.zero_point[0];
  out.qmin = ydt == DType::kUInt8 ? 0 : -128;
  out.qmax = ydt == DType::kUInt8 ? 255 : 127;
  if (relu) out.qmin = std::max(out.qmin, out.zero_point);
  if (act.kind == FusedActivation::kClip) {
    if (!(act.min <= act.max)) return InvalidArgument(node + ": fused Clip has min > max");
    // QuantizeLinear of a bound: round half to even, then saturate (infinite bounds saturate).
    auto q = [&](float v) {
      const float r = std::nearbyint(v / y.scale[0]) + static_cast<float>(out.zero_point);
      return static_cast<int32_t>(std::min(std::max(r, static_cast<float>(out.qmin)), static_cast<float>(out.qmax)));
    };
    out.qmin = std::max(out.qmin, q(act.min));
    out.qmax = std::min(out.qmax, q(act.max));
  }
  for (int64_t c = 0; c < n; ++c) {
    const float s = x.scale[0] * w.ScaleAt(c);
    out.multiplier.push_back(s / y.scale[0]);
  }
  return out;
}

}  // namespace whittle
