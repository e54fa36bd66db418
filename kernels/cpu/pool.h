// Fast CPU pooling (float32): MaxPool and AveragePool over 1-D/2-D windows with per-row valid
// ranges (no bounds checks in the inner loops, a dedicated 2x2 stride-2 max path), global pools
// as vectorisable plane reductions; planes spread over threads when the work is large. MaxPool
// with an Indices output and 3-D and wider windows run the reference kernel (built from the
// reference row the builder is handed); other dtypes get an ok null kernel (the reference).
#pragma once

#include <cstdint>

#include "kernels/common/window.h"

namespace whittle::cpu {

extern const PoolFns kPoolFns;

// The 2x2 stride-2 windows of n consecutive outputs of one row, each wholly inside X: r0/r1 are the
// windows' two input rows from the first window's first column, d0/d1 the same places of dX. The
// windows do not overlap, so each writes its own four dX cells: 0 + dY at the first maximum in
// tap order (a b / c d; strictly greater replaces, NaN never does), +0 elsewhere: the same values
// and signs of zero as the adds into zeros of the other paths. Where the CPU (capped by WHITTLE_ISA)
// runs no AVX2: false, nothing done.
bool MaxPoolGrad2x2Stride2Row(const float* r0, const float* r1, const float* dy, int64_t n, float* d0, float* d1);

}  // namespace whittle::cpu
