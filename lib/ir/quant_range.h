// Quantization arithmetic on stored parameters: a zero point's value per channel and an integer
// type's representable range, as DequantizeLinear and QuantizeLinear read them. Shared by the
// QuantizeLinear gradient rule (lib/ops/quant_grad.cc) and the training engine's lifting and
// export of quantized weights (runtime/training/lift.cc).
#pragma once

#include <cstdint>

#include "lib/ir/tensor.h"

namespace whittle {

// Zero point of channel c (0 when zp is undefined; a one-element zp serves every channel).
inline double ZeroPointAt(const Tensor& zp, int64_t c) {
  if (!zp.defined()) return 0;
  const int64_t k = zp.numel() <= 1 ? 0 : c;
  switch (zp.dtype()) {
    case DType::kUInt8: return zp.data<uint8_t>()[k];
    case DType::kInt8: return zp.data<int8_t>()[k];
    case DType::kInt32: return zp.data<int32_t>()[k];
    default: return 0;
  }
}

// The representable range of an integer type (uint8, int8; int32 otherwise).
inline void RangeOf(DType t, double* lo, double* hi) {
  if (t == DType::kUInt8) *lo = 0, *hi = 255;
  else if (t == DType::kInt8) *lo = -128, *hi = 127;
  else *lo = -2147483648.0, *hi = 2147483647.0;
}

}  // namespace whittle
