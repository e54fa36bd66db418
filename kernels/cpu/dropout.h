// Fast CPU Dropout in training mode (float32): the same MT19937 stream as the reference
// (kernels/reference/dropout.h), generated 624 words at a time with vectorisable twist and
// tempering loops, compared as 53-bit integers against DropoutKeepThreshold and applied in the
// same pass. One thread: the stream is inherently sequential and generating it is the cost, so
// splitting only the cheap multiply would buy nothing. The mask is bit-exact with the reference.
// Other element types: the builder returns an ok null kernel and the reference is built.
#pragma once

#include "kernels/common/dropout.h"

namespace whittle::cpu {

extern const DropoutFns kDropoutFns;

}  // namespace whittle::cpu
