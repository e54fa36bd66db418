// Reference kernel of com.microsoft MatMulNBits: plain loops, W[n, k] = (code - zp) * scale formed
// per element, the truth the CPU kernel is tested against.
#pragma once

#include "kernels/common/nbits.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// A float32 [..., K]; y float32 [..., N] (preallocated); w checked (CheckNBitsOperands).
Status MatMulNBitsReference(const NBitsAttrs& a, const NBitsWeights& w, const Tensor& A, Tensor* y);

namespace reference {
extern const NBitsFns kNBitsFns;
}  // namespace reference

}  // namespace whittle
