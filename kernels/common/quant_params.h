// Quantization parameters, validated once and shared by every backend (which must be
// bit-identical). QuantizeLinear / DequantizeLinear: ResolveQuantLayout checks scale and zero
// point against x and describes x as [outer, channels, inner] blocks with one scale per channel.
// Integer linear ops: per-channel scales and zero points (ReadQParams), the int32 accumulator's
// fate (QOutput: int32, float or requantized) and the quantized matrix operand (QMatrix).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"
#include "kernels/common/fused_activation.h"

namespace whittle {

struct QuantLayout {
  int64_t outer = 1, channels = 1, inner = 1;
};

// zp may be null (zero point 0). axis is only used when scale has more than one element.
StatusOr<QuantLayout> ResolveQuantLayout(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis);
// Zero point of channel c as int64 (0 when zp is null).
int64_t ZeroPointAt(const Tensor* zp, int64_t c);

// Per-channel parameters of a quantized operand, read from (scale, zero point) tensors.
// zero_point holds 1 value (per-tensor) or one per channel; so does scale (empty when unused).
struct QChannelParams {
  std::vector<float> scale;
  std::vector<int32_t> zero_point{0};
  int32_t ZeroPointAt(int64_t c) const {
    return zero_point.size() == 1 ? zero_point[0] : zero_point[static_cast<size_t>(c)];
  }
  float ScaleAt(int64_t c) const { return scale.size() == 1 ? scale[0] : scale[static_cast<size_t>(c)]; }
};

// Validates and reads a scale (float32, > 0 and finite; scalar or 1-D of length 1 or `channels`)
// and its optional zero point (data_dtype, same length rule). `what` names the parameter in errors
// ("<node>: w_scale ..."). channels < 0 means "per-tensor only".
StatusOr<QChannelParams> ReadQParams(const std::string& node, const std::string& what, const Tensor* scale,
                                     const Tensor* zero_point, DType data_dtype, int64_t channels);
// A zero point alone (MatMulInteger / ConvInteger): int8/uint8 of data_dtype, 1 or `channels` values.
StatusOr<std::vector<int32_t>> ReadZeroPoints(const std::string& node, const std::string& what, const Tensor* zp,
                                              DType data_dtype, int64_t channels);

// What happens to the int32 accumulator of channel c.
struct QOutput {
  enum class Kind { kInt32, kFloat, kQuantized };
  Kind kind = Kind::kInt32;
  DType dtype = DType::kInt32;     // int32, float32, uint8 or int8
  std::vector<float> multiplier;   // 1 or per channel: S (kFloat) or M (kQuantized)
  std::vector<int32_t> bias;       // empty or per channel
  int32_t zero_point = 0;          // y_zp (kQuantized)
  bool relu = false;               // kFloat: max(y, 0)
  // kQuantized: the integer range y is clamped to: the dtype's, narrowed by a fused Relu to
  // [y_zp, ...] and by a fused Clip(lo, hi) to [Q(lo), Q(hi)] (Q = QuantizeLinear, monotone, so
  // Q(Clip(v)) = clamp(Q(v), Q(lo), Q(hi))).
  int32_t qmin = 0, qmax = 0;
  float MultiplierAt(int64_t c) const {
    return multiplier.size() == 1 ? multiplier[0] : multiplier[static_cast<size_t>(c)];
  }
  int32_t BiasAt(int64_t c) const { return bias.empty() ? 0 : bias[static_cast<size_t>(c)]; }
};

// Output of QGemm/QConv/QLinear*: float when y_scale is null, else quantized to y_zp's dtype
// (uint8 without y_zp). bias (int32, [channels]) is optional. Multipliers follow the contract.
// act: the activation the runtime fused ("_activation"): none, Relu, or Clip (quantized output
// only); others are refused.
StatusOr<QOutput> MakeQOutput(const std::string& node, const QChannelParams& x, const QChannelParams& w,
                              const Tensor* y_scale, const Tensor* y_zero_point, const Tensor* bias,
                              int64_t channels, const FusedActivation& act);
// int32 output (MatMulInteger / ConvInteger).
QOutput Int32QOutput();

// int32 addition that wraps like the SIMD kernels' vpaddd (no signed-overflow UB); only reachable
// with K beyond ~33000 at full range or extreme biases.
inline int32_t WrapAdd(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// One element of the epilogue (the fast kernels use the same formula, vectorized).
inline float QRequantize(int32_t acc, float mult) { return static_cast<float>(acc) * mult; }

// A quantized matrix operand: int8 or uint8 elements, row stride ld, zero point per row (A side)
// or per column (B side) as 1 or n values.
struct QMatrix {
  const void* data = nullptr;
  DType dtype = DType::kUInt8;
  int64_t ld = 0;
  const std::vector<int32_t>* zero_point = nullptr;  // null: 0
};
}  // namespace whittle
