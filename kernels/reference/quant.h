// Reference kernels for QuantizeLinear and DequantizeLinear, per-tensor or per-axis:
//   quantize:   y = saturate(round_half_to_even(x / scale) + zero_point)   (NaN -> zero_point)
//   dequantize: y = float(x - zero_point) * scale
// ResolveQuantLayout validates the parameters against x (shared with the CPU kernels, which must
// be bit-identical) and describes x as [outer, channels, inner] blocks with one scale per channel.
#pragma once

#include <cstdint>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct QuantLayout {
  int64_t outer = 1, channels = 1, inner = 1;
};

// zp may be null (zero point 0). axis is only used when scale has more than one element.
StatusOr<QuantLayout> ResolveQuantLayout(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis);
// Zero point of channel c as int64 (0 when zp is null).
int64_t ZeroPointAt(const Tensor* zp, int64_t c);

// x: float32 or int32; y: uint8 or int8 (preallocated, x's dims).
Status QuantizeLinearReference(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y);
// x: uint8, int8 or int32; y: float32.
Status DequantizeLinearReference(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y);

}  // namespace whittle
