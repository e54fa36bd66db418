// The contract between the QuantizeLinear / DequantizeLinear glue (kernels/quant_kernels.cc) and
// its backends: QuantFns, one instance per backend (reference::kQuantFns in
// kernels/reference/quant.h, cpu::kQuantFns in kernels/cpu/quant.h).
#pragma once

#include <cstdint>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// The family's compute functions, one instance per backend (kernels/kernel.h BackendTable); a
// null member means "use the reference's". `threads` is the intra-op budget a backend may use.
using QuantizeLinearFn = Status (*)(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis, Tensor* y,
                                    int threads);
struct QuantFns {
  QuantizeLinearFn quantize = nullptr;
  QuantizeLinearFn dequantize = nullptr;
};

}  // namespace whittle
