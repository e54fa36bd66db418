// Reference kernel of ai.whittle CodebookMatMul (lib/ops/codebook.cc): each output a plain sum over
// k of A times the codebook entry of W[n, k], in double, then the bias.
#pragma once

#include "kernels/common/codebook_fns.h"
#include "kernels/kernel.h"
#include "lib/ir/codebook_format.h"

namespace whittle {

// y: A's dims with the last replaced by a.n. bias may be null. The tensors are checked by the
// caller (CheckCodebookTensors).
Status CodebookMatMulReference(const CodebookAttrs& a, const Tensor& x, const Tensor& codebook, const Tensor& indices,
                               const Tensor* bias, Tensor* y);

namespace reference {
extern const CodebookFns kCodebookFns;
}  // namespace reference

}  // namespace whittle
