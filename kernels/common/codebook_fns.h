// The contract between the ai.whittle CodebookMatMul glue (kernels/codebook_kernels.cc) and its
// backends: CodebookFns, one builder row per backend (the reference's in
// kernels/reference/codebook.h, the CPU's in kernels/cpu/codebook.h).
#pragma once

#include "kernels/kernel.h"
#include "lib/ir/codebook_format.h"

namespace whittle {

// make: the kernel for one node; a backend returns null where it has no fast path (then the
// reference kernel runs). init's codebook and indices, when constant, are already checked.
struct CodebookFns {
  KernelOr (*make)(const CodebookAttrs& a, const KernelInit& init);
};

}  // namespace whittle
