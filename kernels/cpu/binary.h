// The CPU backend's row of ai.whittle BinaryMatMul / BinaryConv (kernels/cpu/binary.cc: popcount
// and sign-mask GEMMs over the packed bits). The glue (kernels/binary_kernels.cc) picks it per
// backend; the contract is kernels/common/binary_fns.h.
#pragma once

#include "kernels/common/binary_fns.h"

namespace whittle::cpu {

extern const BinaryFns kBinaryFns;

}  // namespace whittle::cpu
