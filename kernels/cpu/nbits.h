// The CPU backend's row of com.microsoft MatMulNBits (kernels/cpu/nbits.cc): 4-bit codes read in
// place, never expanded whole. The glue (kernels/nbits_kernels.cc) picks it per backend; the
// contract is kernels/common/nbits.h.
#pragma once

#include "kernels/common/nbits.h"

namespace whittle::cpu {

extern const NBitsFns kNBitsFns;

}  // namespace whittle::cpu
