#include "kernels/reference/quant.h"

#include <cmath>
#include <limits>
#include <string>

#include "kernels/common/int4.h"

namespace whittle {

namespace {

template <class X, class Q>
void Quantize(const X* x, const QuantLayout& l, const float* scale, const Tensor* zp, Q* y) {
  constexpr double qmin = std::numeric_limits<Q>::min(), qmax = std::numeric_limits<Q>::max();
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t c = 0; c < l.channels; ++c) {
      const int64_t zero = ZeroPointAt(zp, c);
      for (int64_t i = 0; i < l.inner; ++i) {
        const int64_t k = (o * l.channels + c) * l.inner + i;
        const float v = static_cast<float>(x[k]) / scale[c];
        if (std::isnan(v)) {
          y[k] = static_cast<Q>(zero);
          continue;
        }
        double q = static_cast<double>(std::nearbyint(v)) + static_cast<double>(zero);  // half to even
        q = q < qmin ? qmin : (q > qmax ? qmax : q);
        y[k] = static_cast<Q>(q);
      }
    }
}

template <class X>
void Dequantize(const X* x, const QuantLayout& l, const float* scale, const Tensor* zp, float* y) {
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t c = 0; c < l.channels; ++c) {
      const int64_t zero = ZeroPointAt(zp, c);
      for (int64_t i = 0; i < l.inner; ++i) {
        const int64_t k = (o * l.channels + c) * l.inner + i;
        y[k] = static_cast<float>(static_cast<int64_t>(x[k]) - zero) * scale[c];
      }
    }
}

template <class X>
Status QuantizeTo(const Tensor& x, const QuantLayout& l, const Tensor& scale, const Tensor* zp, Tensor* y) {
  const X* px = x.data<X>();
  if (y->dtype() == DType::kUInt8) Quantize(px, l, scale.data<float>(), zp, y->data<uint8_t>());
  else if (y->dtype() == DType::kInt8) Quantize(px, l, scale.data<float>(), zp, y->data<int8_t>());
  else return InvalidArgument(std::string("QuantizeLinear output must be uint8 or int8, got ") + DTypeName(y->dtype()));
  return Status::Ok();
}

}  // namespace

Status QuantizeLinearReference(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y) {
  WH_ASSIGN_OR_RETURN(QuantLayout l, ResolveQuantLayout(x, scale, zp, axis));
  if (zp && zp->dtype() != y->dtype()) return InvalidArgument("zero_point type differs from the output type");
  if (x.dtype() == DType::kFloat32) return QuantizeTo<float>(x, l, scale, zp, y);
  if (x.dtype() == DType::kInt32) return QuantizeTo<int32_t>(x, l, scale, zp, y);
  return InvalidArgument(std::string("QuantizeLinear input must be float32 or int32, got ") + DTypeName(x.dtype()));
}

Status DequantizeLinearReference(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y) {
  WH_ASSIGN_OR_RETURN(QuantLayout l, ResolveQuantLayout(x, scale, zp, axis));
  if (zp && zp->dtype() != x.dtype()) return InvalidArgument("zero_point type differs from the input type");
  float* py = y->data<float>();
  switch (x.dtype()) {
    case DType::kUInt8: Dequantize(x.data<uint8_t>(), l, scale.data<float>(), zp, py); break;
    case DType::kInt8: Dequantize(x.data<int8_t>(), l, scale.data<float>(), zp, py); break;
    case DType::kInt32: Dequantize(x.data<int32_t>(), l, scale.data<float>(), zp, py); break;
    default:
      return InvalidArgument(std::string("DequantizeLinear input must be uint8, int8 or int32, got ") +
                             DTypeName(x.dtype()));
  }
  return Status::Ok();
}

namespace {

// Element i of x (any DequantizeLinear input type) as an integer.
int64_t QuantElement(const Tensor& x, int64_t i) {
  switch (x.dtype()) {
    case DType::kUInt8: return x.data<uint8_t>()[i];
    case DType::kInt8: return x.data<int8_t>()[i];
    case DType::kInt32: return x.data<int32_t>()[i];
    case DType::kUInt4: return int4::UInt4At(static_cast<const uint8_t*>(x.raw_data()), i);
    case DType::kInt4: return int4::Int4At(static_cast<const uint8_t*>(x.raw_data()), i);
    default: return 0;
  }
}

}  // namespace

Status DequantizeBlockedReference(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, int64_t block,
                                  Tensor* y) {
  const DType dt = x.dtype();
  if (dt != DType::kUInt8 && dt != DType::kInt8 && dt != DType::kInt32 && !IsPacked4Bit(dt))
    return InvalidArgument(std::string("DequantizeLinear input must be int4, uint4, int8, uint8 or int32, got ") +
                           DTypeName(dt));
  if (zp && zp->dtype() != dt) return InvalidArgument("zero_point type differs from the input type");
  if (scale.dtype() != DType::kFloat32)
    return InvalidArgument(std::string("scale must be float32, got ") + DTypeName(scale.dtype()));
  // A one-element zero point of rank <= 1 goes with a scalar or one-element scale (per tensor;
  // the onnx package's int4/uint4 cases pair a [1] zero point with a scalar scale).
  const bool single = scale.numel() == 1 && scale.rank() <= 1 && zp && zp->numel() == 1 && zp->rank() <= 1;
  if (zp && zp->dims() != scale.dims() && !single)
    return InvalidArgument("zero_point " + DimsToString(zp->dims()) + " and scale " + DimsToString(scale.dims()) +
                           " differ");
  const int64_t r = x.rank();
  // x as [outer, d, inner] along axis; parameters as [outer, groups, inner] (per-tensor: 1 x 1 x 1).
  int64_t outer = 1, d = 1, inner = 1, groups = 1, g = 1;
  const bool per_tensor = block == 0 && scale.numel() == 1 && scale.rank() <= 1;
  if (per_tensor) inner = x.numel();  // every element takes parameter 0
  if (!per_tensor) {
    if (axis < -r || axis >= r)
      return InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
    if (axis < 0) axis += r;
    for (int k = 0; k < axis; ++k) outer *= x.dim(k);
    for (int k = static_cast<int>(axis) + 1; k < r; ++k) inner *= x.dim(k);
    d = x.dim(static_cast<int>(axis));
    g = block > 0 ? block : 1;
    groups = block > 0 ? (d == 0 ? 0 : (d - 1) / block + 1) : d;  // ceil, without overflow
    const bool fits = block > 0 ? scale.rank() == r && scale.numel() == outer * groups * inner
                                : scale.rank() == 1 && scale.numel() == d;
    if (!fits)
      return InvalidArgument("scale " + DimsToString(scale.dims()) + " does not fit x " + DimsToString(x.dims()) +
                             " along axis " + std::to_string(axis) +
                             (block > 0 ? " with block_size " + std::to_string(block) : std::string(" per axis")));
  }
  const float* s = scale.data<float>();
  for (int64_t i = 0; i < scale.numel(); ++i)
    if (!(s[i] > 0.f) || !std::isfinite(s[i]))
      return InvalidArgument("scale[" + std::to_string(i) + "] = " + std::to_string(s[i]) +
                             " is invalid: scales must be positive and finite");
  float* py = y->data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < d; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * d + c) * inner + i;
        const int64_t p = per_tensor ? 0 : (o * groups + c / g) * inner + i;
        const int64_t zero = zp ? QuantElement(*zp, p) : 0;
        py[k] = static_cast<float>(QuantElement(x, k) - zero) * s[p];
      }
  return Status::Ok();
}

namespace reference {
namespace {
// The table's signature carries a thread budget that plain loops do not use.
Status QuantizeRow(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y, int) {
  return QuantizeLinearReference(x, scale, zp, axis, y);
}
Status DequantizeRow(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y, int) {
  return DequantizeLinearReference(x, scale, zp, axis, y);
}
}  // namespace

const QuantFns kQuantFns{QuantizeRow, DequantizeRow};
}  // namespace reference

Status LookupReference(const Tensor& x, const Tensor& table, Tensor* y) {
  const uint8_t* xb = static_cast<const uint8_t*>(x.raw_data());
  const size_t width = DTypeSize(table.dtype());
  if (width != 1 && table.dtype() != DType::kFloat32)
    return InvalidArgument(std::string("Lookup table type ") + DTypeName(table.dtype()) + " is not supported");
  const uint8_t* t = static_cast<const uint8_t*>(table.raw_data());
  uint8_t* out = static_cast<uint8_t*>(y->raw_data());
  for (int64_t i = 0; i < x.numel(); ++i)
    for (size_t b = 0; b < width; ++b) out[static_cast<size_t>(i) * width + b] = t[xb[i] * width + b];
  return Status::Ok();
}

namespace reference {
}  // namespace reference

}  // namespace whittle
