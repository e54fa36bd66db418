// The contract between the ai.whittle BinaryMatMul / BinaryConv glue (kernels/binary_kernels.cc)
// and its backends: BinaryConv's kernel-side attributes, the 2-D geometry every backend resolves
// from them (ResolveBinaryConv, defined in binary_fns.cc) and BinaryFns, one builder row per
// backend (the reference's in kernels/reference/binary.h).
#pragma once

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

// Resolves the 2-D geometry of one call (X's channel count against the attributes).
Status ResolveBinaryConv(const BinaryConvAttrs& a, const Tensor& x, ConvShape* s);

// A backend's builders; null, or an ok null kernel, where it has no fast path (the reference runs).
// init's constant bits/alpha/bias, when constant, are already checked.
struct BinaryFns {
  KernelOr (*matmul)(const BinaryAttrs& a, const KernelInit& init);
  KernelOr (*conv)(const BinaryConvAttrs& a, const KernelInit& init);
};

}  // namespace whittle
