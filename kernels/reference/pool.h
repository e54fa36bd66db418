// Reference pooling kernels over any spatial rank: MaxPool (float, double, int8, uint8; optional
// int64 Indices output flattened over the whole tensor, row-major or, with storage_order=1,
// column-major over the spatial dims), AveragePool (float, double; count_include_pad counts taps
// that fall in the explicit or auto padding, never beyond it), GlobalAveragePool, GlobalMaxPool.
// Window geometry (pads, auto_pad, ceil_mode, dilations) comes from kernels/reference/conv.h.
#pragma once

#include <memory>

#include "kernels/kernel.h"

namespace whittle {

enum class PoolKind { kMax, kAverage, kGlobalMax, kGlobalAverage };

// Element types each pool supports.
bool PoolSupportsDType(PoolKind kind, DType t);

StatusOr<std::unique_ptr<OpKernel>> CreatePoolReferenceKernel(PoolKind kind, const KernelInit& init);

}  // namespace whittle
