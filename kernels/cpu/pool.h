// Fast CPU pooling (float32): MaxPool and AveragePool over 1-D/2-D windows with per-row valid
// ranges (no bounds checks in the inner loops, a dedicated 2x2 stride-2 max path), global pools
// as vectorisable plane reductions; planes spread over threads when the work is large. MaxPool
// with an Indices output, 3-D and wider windows, and other dtypes use the reference kernels.
#pragma once

#include <memory>

#include "kernels/kernel.h"
#include "kernels/reference/pool.h"

namespace whittle {

StatusOr<std::unique_ptr<OpKernel>> CreatePoolCpuKernel(PoolKind kind, const KernelInit& init);

}  // namespace whittle
