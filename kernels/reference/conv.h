// Reference Conv and ConvTranspose kernels (plain loops, any spatial rank, float and double). The window geometry it
// shares with the pooling, CPU and integer conv kernels lives in lib/ir/window.h (included with
// the parsed attributes of kernels/common/window.h, here for the integer kernels that use it
// through this header). Attributes are parsed and checked by the family's factory
// (kernels/conv_kernels.cc).
#pragma once

#include "kernels/common/window.h"

namespace whittle {

// Y[n, m, o...] = B[m] + sum over the group's channels and kernel taps; taps in the padding add 0.
template <class T>
void ConvReference(const ConvShape& s, const T* x, const T* w, const T* b, T* y);

// Y[n, m, o...] = B[m] + sum over the group's input channels c, X positions i and taps k with
// i*stride - pad_begin + k*dilation = o of X[n, c, i] * W[c, m % (M/group), k] (scatter form).
template <class T>
void ConvTransposeReference(const ConvTransposeShape& s, const T* x, const T* w, const T* b, T* y);

namespace reference {
extern const ConvFns kConvFns;
}  // namespace reference

}  // namespace whittle
