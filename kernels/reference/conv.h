// Reference Conv kernel (plain loops, any spatial rank, float and double). The window geometry it
// shares with the pooling, CPU and integer conv kernels lives in kernels/common/window.h (included
// here for the integer kernels that use it through this header). Attributes are parsed and checked
// by the family's factory (kernels/conv_kernels.cc).
#pragma once

#include "kernels/common/window.h"

namespace whittle {

// Y[n, m, o...] = B[m] + sum over the group's channels and kernel taps; taps in the padding add 0.
template <class T>
void ConvReference(const ConvShape& s, const T* x, const T* w, const T* b, T* y);

namespace reference {
extern const ConvFns kConvFns;
}  // namespace reference

}  // namespace whittle
