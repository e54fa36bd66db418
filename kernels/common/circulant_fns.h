// The contract between the ai.whittle BlockCirculantMatMul glue (kernels/circulant_kernels.cc) and
// its backends: CirculantFns, one builder row per backend (the reference's in
// kernels/reference/circulant.h, the CPU's in kernels/cpu/circulant.h).
#pragma once

#include "kernels/kernel.h"
#include "lib/ir/circulant_format.h"

namespace whittle {

// make: the kernel for one node; a backend returns null where it has no fast path (then the
// reference kernel runs). init's blocks and bias, when constant, are already checked.
// grad_weight: the kernel of BlockCirculantMatMulGradWeight (shapes checked on every call).
struct CirculantFns {
  KernelOr (*make)(const CirculantAttrs& a, const KernelInit& init);
  KernelOr (*grad_weight)(const CirculantAttrs& a, const KernelInit& init);
};

}  // namespace whittle
