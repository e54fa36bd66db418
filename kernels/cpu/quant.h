// Fast CPU QuantizeLinear / DequantizeLinear: one branch-free, vectorizable loop per block of
// equal scale, split across OpenMP threads for large tensors. Bit-identical to
// kernels/reference/quant.h (clamping before rounding gives the same integer as rounding
// before saturating, because the clamp bounds are integers).
#pragma once

#include <cstdint>

#include "kernels/common/quant_fns.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

Status QuantizeLinearCpu(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y,
                         int threads);
Status DequantizeLinearCpu(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y,
                           int threads);

namespace cpu {
extern const QuantFns kQuantFns;
}  // namespace cpu

}  // namespace whittle
