// Reference kernels for QuantizeLinear and DequantizeLinear, per-tensor or per-axis, and Lookup:
//   quantize:   y = saturate(round_half_to_even(x / scale) + zero_point)   (NaN -> zero_point)
//   dequantize: y = float(x - zero_point) * scale
// The parameters arrive validated and laid out by kernels/common/quant_params.h (shared with the
// CPU kernels, which must be bit-identical).
#pragma once

#include <cstdint>

#include "kernels/common/quant_fns.h"
#include "kernels/common/quant_params.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// x: float32 or int32; y: uint8 or int8 (preallocated, x's dims).
Status QuantizeLinearReference(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y);
// x: uint8, int8 or int32; y: float32.
Status DequantizeLinearReference(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y);
// DequantizeLinear 21: x int4, uint4, int8, uint8 or int32 with per-tensor, per-axis (block 0) or
// blocked parameters (block > 0: one scale and zero point per `block` elements along axis; scale
// has x's rank, ceil(x[axis] / block) along axis). y float32 of x's dims.
Status DequantizeBlockedReference(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, int64_t block,
                                  Tensor* y);

// ai.whittle Lookup: y[i] = table[byte of x[i]] (x uint8 or int8, its byte read as unsigned; table
// 256 values of y's type, one byte wide or float32; checked by the caller).
Status LookupReference(const Tensor& x, const Tensor& table, Tensor* y);

namespace reference {
extern const QuantFns kQuantFns;
}  // namespace reference

}  // namespace whittle
