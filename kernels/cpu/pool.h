// Fast CPU pooling (float32): MaxPool and AveragePool over 1-D/2-D windows with per-row valid
// ranges (no bounds checks in the inner loops, a dedicated 2x2 stride-2 max path), global pools
// as vectorisable plane reductions; planes spread over threads when the work is large. MaxPool
// with an Indices output and 3-D and wider windows run the reference kernel (built from the
// reference row the builder is handed); other dtypes get an ok null kernel (the reference).
#pragma once

#include "kernels/common/window.h"

namespace whittle::cpu {

extern const PoolFns kPoolFns;

}  // namespace whittle::cpu
