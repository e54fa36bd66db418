#include "kernels/common/quant_params.h"

#include <string>
#include <cmath>

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

}  // namespace whittle
