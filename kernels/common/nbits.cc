#include "kernels/common/nbits.h"

#include <cmath>

namespace whittle {

NBitsAttrs NBitsAttrsOf(const AttributeMap& attrs) {
  NBitsAttrs a;
  a.K = attrs.GetInt("K", 0);
  a.N = attrs.GetInt("N", 0);
  a.bits = attrs.GetInt("bits", 4);
  a.block = attrs.GetInt("block_size", 32);
  a.accuracy_level = attrs.GetInt("accuracy_level", 0);
  return a;
}

StatusOr<NBitsWeights> CheckNBitsOperands(const NBitsAttrs& a, const Tensor& b, const Tensor& scales,
                                          const Tensor* zero_points, const Tensor* g_idx, const Tensor* bias) {
  if (g_idx) return Unimplemented("MatMulNBits: g_idx (act-order GPTQ) is not supported");
  const int64_t nb = a.blocks();
  if (b.dtype() != DType::kUInt8 || b.numel() != a.N * a.row_bytes())
    return InvalidArgument("MatMulNBits: B must be uint8 [" + std::to_string(a.N) + ", " + std::to_string(nb) + ", " +
                           std::to_string(a.blob()) + "], got " + DTypeName(b.dtype()) + " " + DimsToString(b.dims()));
  if (scales.dtype() != DType::kFloat32 || scales.numel() != a.N * nb)
    return InvalidArgument("MatMulNBits: scales must be " + std::to_string(a.N * nb) + " float32 values, got " +
                           DTypeName(scales.dtype()) + " " + DimsToString(scales.dims()));
  NBitsWeights w;
  w.b = b.data<uint8_t>();
  w.scales = scales.data<float>();
  for (int64_t i = 0; i < scales.numel(); ++i)
    if (!std::isfinite(w.scales[i]))
      return InvalidArgument("MatMulNBits: scales[" + std::to_string(i) + "] is not finite");
  if (zero_points) {
    if (zero_points->dtype() == DType::kUInt8 && zero_points->numel() == a.N * a.zp_row_bytes()) {
      w.zp_packed = zero_points->data<uint8_t>();
    } else if (zero_points->dtype() == DType::kFloat32 && zero_points->numel() == a.N * nb) {
      w.zp_float = zero_points->data<float>();
    } else {
      return InvalidArgument("MatMulNBits: zero_points must be uint8 [" + std::to_string(a.N * a.zp_row_bytes()) +
                             "] or float32 [" + std::to_string(a.N * nb) + "], got " +
                             DTypeName(zero_points->dtype()) + " " + DimsToString(zero_points->dims()));
    }
  }
  if (bias) {
    if (bias->dtype() != DType::kFloat32 || bias->numel() != a.N)
      return InvalidArgument("MatMulNBits: bias must be float32 [" + std::to_string(a.N) + "]");
    w.bias = bias->data<float>();
  }
  return w;
}

}  // namespace whittle
