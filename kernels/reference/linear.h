// Reference Gemm, MatMul and Einsum (a loop over the full index space): plain loops over float/double/int32/int64/uint32/uint64 with a
// wide accumulator; fused activations (float32 only) are applied after bias. Shape resolution and
// attributes live in kernels/common/linear_shape.h.
#pragma once

#include "kernels/common/linear_shape.h"

namespace whittle::reference {

extern const LinearFns kLinearFns;

}  // namespace whittle::reference
