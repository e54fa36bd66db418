// Reference kernels of ai.whittle BinaryMatMul and BinaryConv (lib/ops/binary.cc; the bit layout
// is in lib/ir/binary_format.h): plain loops that read one bit per weight, sums in double. For
// BinaryConv the geometry is 2-D only (X [N, C, H, W]); a tap in the padding adds 0.
#pragma once

#include <vector>

#include "kernels/common/binary_fns.h"
#include "kernels/common/window.h"
#include "kernels/kernel.h"
#include "lib/ir/binary_format.h"

namespace whittle {

// Rows of x are its last dim (a.k values); y [..., a.n]. bias may be null. Tensors checked by the
// caller (CheckBinaryTensors).
Status BinaryMatMulReference(const BinaryAttrs& a, const Tensor& x, const Tensor& bits, const Tensor& alpha,
                             const Tensor* bias, Tensor* y);
// x [N, C, H, W] (C checked here), y [N, M, OH, OW] as shape inference gave it.
Status BinaryConvReference(const BinaryConvAttrs& a, const Tensor& x, const Tensor& bits, const Tensor& alpha,
                           const Tensor* bias, Tensor* y);

namespace reference {
extern const BinaryFns kBinaryFns;
}  // namespace reference

}  // namespace whittle
