// The CPU backend's row of ai.whittle BlockCirculantMatMul (kernels/cpu/circulant.cc: real FFTs
// with FFTW and a packed GEMM per bin). The glue (kernels/circulant_kernels.cc) picks it per
// backend; the contract is kernels/common/circulant_fns.h.
#pragma once

#include "kernels/common/circulant_fns.h"

namespace whittle::cpu {

extern const CirculantFns kCirculantFns;

}  // namespace whittle::cpu
