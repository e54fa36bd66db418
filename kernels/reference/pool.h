// Reference pooling kernels over any spatial rank: MaxPool (float, double, int8, uint8; optional
// int64 Indices output flattened over the whole tensor, row-major or, with storage_order=1,
// column-major over the spatial dims), AveragePool (float, double; count_include_pad counts taps
// that fall in the explicit or auto padding, never beyond it), GlobalAveragePool, GlobalMaxPool.
// Window geometry comes from lib/ir/window.h, the parsed attributes from kernels/common/window.h.
#pragma once

#include "kernels/common/window.h"

namespace whittle::reference {

extern const PoolFns kPoolFns;

}  // namespace whittle::reference
