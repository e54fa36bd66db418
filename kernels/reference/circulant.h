// Reference kernel of ai.whittle BlockCirculantMatMul (lib/ops/circulant.cc): each output a plain
// O(B^2)-per-block sum of circulant entries times inputs, in double, then the bias — no FFT. The
// truth the CPU kernel (kernels/cpu/circulant.cc, FFTW) is tested against.
#pragma once

#include "kernels/common/circulant_fns.h"
#include "kernels/kernel.h"
#include "lib/ir/circulant_format.h"

namespace whittle {

// y: A's dims with the last replaced by a.n; bias may be null. The tensors are checked by the
// caller (CheckCirculantTensors).
Status BlockCirculantMatMulReference(const CirculantAttrs& a, const Tensor& x, const Tensor& blocks, const Tensor* bias,
                                     Tensor* y);

// dblocks [P, Q, B] = d/dblocks sum(BlockCirculantMatMul(A, blocks) * dY): each entry the sum of
// dY[m, n] A[m, k] over the rows m and the (n, k) inside W on its block's wrapped diagonal, in
// double. dy and x checked by the caller (CheckCirculantGradWeightShapes).
void BlockCirculantGradWeightReference(const CirculantAttrs& a, const Tensor& dy, const Tensor& x, Tensor* dblocks);

namespace reference {
extern const CirculantFns kCirculantFns;
}  // namespace reference

}  // namespace whittle
