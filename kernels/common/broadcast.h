// Numpy broadcasting and row-major index walks, shared by the reference and fast kernels of every
// family: strides of an input broadcast to the output dims (0 along broadcast axes), row-major
// strides of dims, and the multi-index odometer the plain loops iterate with. Pure functions of
// the dims; a shape that does not broadcast is reported as a Status.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// Row-major strides (in elements) of dims.
std::vector<int64_t> StridesOf(const Dims& dims);
// Advances a row-major multi-index over dims; false once it wraps around.
bool NextIndex(std::vector<int64_t>& idx, const Dims& dims);

// Element strides of an input of dims `in` broadcast to `out` (Expand: rank(in) <= rank(out),
// checked by the caller), 0 on broadcast axes; an Internal error when the dims do not broadcast
// (shape inference has already agreed on them).
StatusOr<std::vector<int64_t>> ExpandStrides(const Dims& in, const Dims& out);

namespace ew {

// Element strides of `in` broadcast (numpy rules) to out_dims: 0 along broadcast axes.
// Error when in's dims do not broadcast to out_dims.
StatusOr<std::vector<int64_t>> BroadcastStrides(const Tensor& in, const Dims& out_dims);

}  // namespace ew
}  // namespace whittle
