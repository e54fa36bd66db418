// The CPU backend's row of ai.whittle CodebookMatMul (kernels/cpu/codebook.cc: indices packed in
// the packed GEMM's panel order, decoded per call). The glue (kernels/codebook_kernels.cc) picks
// it per backend; the contract is kernels/common/codebook_fns.h.
#pragma once

#include "kernels/common/codebook_fns.h"

namespace whittle::cpu {

extern const CodebookFns kCodebookFns;

}  // namespace whittle::cpu
