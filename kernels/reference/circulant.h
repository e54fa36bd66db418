// Reference kernel of ai.whittle BlockCirculantMatMul (lib/ops/circulant.cc): each output a plain
// O(B^2)-per-block sum of circulant entries times inputs, in double, then the bias — no FFT. The
// truth the CPU kernel (kernels/cpu/circulant.cc, FFTW) is tested against.
#pragma once

#include "kernels/common/circulant.h"
#include "kernels/kernel.h"

namespace whittle {

// y: A's dims with the last replaced by a.n; bias may be null. The tensors are checked by the
// caller (CheckCirculantTensors).
Status BlockCirculantMatMulReference(const CirculantAttrs& a, const Tensor& x, const Tensor& blocks, const Tensor* bias,
                                     Tensor* y);

// make: the kernel for one node; a backend returns null where it has no fast path (then the
// reference kernel runs). init's blocks and bias, when constant, are already checked.
struct CirculantFns {
  KernelOr (*make)(const CirculantAttrs& a, const KernelInit& init);
};

namespace reference {
extern const CirculantFns kCirculantFns;
}  // namespace reference
namespace cpu {
extern const CirculantFns kCirculantFns;
}  // namespace cpu

}  // namespace whittle
