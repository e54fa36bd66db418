// Reference Dropout for calls that may train (the inference-only ones alias their input, see
// kernels/shape_kernels.cc): in training, numpy's MT19937 uniform stream through std::mt19937,
// one double U = (a >> 5, b >> 6) / 2^53 per element, keep = U >= ratio, and
// Y = X * keep * scale in X's type (float16/bfloat16 through float); otherwise Y = X and the mask
// is all true. float, double, float16 and bfloat16.
#pragma once

#include "kernels/common/dropout.h"

namespace whittle::reference {

extern const DropoutFns kDropoutFns;

}  // namespace whittle::reference
