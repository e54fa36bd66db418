// Numpy broadcasting as the CUDA factories lay it out for their kernels (element strides per
// output dim), in a header without CUDA so that the body tests compute strides the same way.
#pragma once

#include <cstdint>

#include "lib/ir/tensor.h"

namespace whittle::cuda {

// Strides of t's dims read as out's (right-aligned, 0 where t has 1 or no dim).
inline void BroadcastStrides(const Dims& t, const Dims& out, int64_t* strides) {
  const int r = static_cast<int>(out.size()), tr = static_cast<int>(t.size());
  int64_t s = 1;
  for (int d = r - 1; d >= 0; --d) {
    const int td = d - (r - tr);
    const int64_t dim = td >= 0 ? t[static_cast<size_t>(td)] : 1;
    strides[d] = dim == 1 ? 0 : s;
    s *= dim;
  }
}

}  // namespace whittle::cuda
