// Reference kernels of ai.whittle BinaryMatMul and BinaryConv (lib/ops/binary.cc; the bit layout
// is in lib/ir/binary_format.h): plain loops that read one bit per weight, sums in double. For
// BinaryConv the geometry is 2-D only (X [N, C, H, W]); a tap in the padding adds 0.
#pragma once

#include <vector>

#include "kernels/common/window.h"
#include "kernels/kernel.h"
#include "lib/ir/binary_format.h"

namespace whittle {

struct BinaryConvAttrs {
  BinaryAttrs b;              // b.n = output channels M, b.k = in_channels / group * kh * kw
  int64_t in_channels = 0;    // C
  int64_t group = 1;
  WindowAttrs window;         // kernel_shape always has 2 entries
};

// Rows of x are its last dim (a.k values); y [..., a.n]. bias may be null. Tensors checked by the
// caller (CheckBinaryTensors).
Status BinaryMatMulReference(const BinaryAttrs& a, const Tensor& x, const Tensor& bits, const Tensor& alpha,
                             const Tensor* bias, Tensor* y);
// x [N, C, H, W] (C checked here), y [N, M, OH, OW] as shape inference gave it.
Status BinaryConvReference(const BinaryConvAttrs& a, const Tensor& x, const Tensor& bits, const Tensor& alpha,
                           const Tensor* bias, Tensor* y);
// Resolves the 2-D geometry of one call (X's channel count against the attributes).
Status ResolveBinaryConv(const BinaryConvAttrs& a, const Tensor& x, ConvShape* s);

// A backend's builders; null, or an ok null kernel, where it has no fast path (the reference runs).
// init's constant bits/alpha/bias, when constant, are already checked.
struct BinaryFns {
  KernelOr (*matmul)(const BinaryAttrs& a, const KernelInit& init);
  KernelOr (*conv)(const BinaryConvAttrs& a, const KernelInit& init);
};

namespace reference {
extern const BinaryFns kBinaryFns;
}  // namespace reference
namespace cpu {
extern const BinaryFns kBinaryFns;
}  // namespace cpu

}  // namespace whittle
