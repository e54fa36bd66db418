// Reference reduction kernels: Reduce* over a set of axes, ArgMax/ArgMin, and the normalisations
// Softmax/LogSoftmax/Hardmax. Plain loops, floats accumulated in double: the truth for the CPU
// kernels. `out` is preallocated by the runtime; since keepdims only inserts size-1 axes, the
// output layout is the same with or without it and kernels ignore keepdims.
// float16/bfloat16 are computed in float32 by the caller (ew::RunWithHalfAsFloat).
#pragma once

#include <cstdint>
#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::reference {

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };
const char* ReduceOpName(ReduceOp op);

// Sorted, de-duplicated axes in [0, rank); error on an axis out of [-rank, rank) or a repeat.
StatusOr<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int rank);

// Reduces x over `axes` (normalised, as NormalizeAxes returns them) into out.
Status Reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, Tensor& out);

// Index (int64) of the largest (is_max) or smallest value along axis; ties give the first index,
// or the last with select_last.
Status ArgReduce(bool is_max, const Tensor& x, int64_t axis, bool select_last, Tensor& out);

// dims viewed as [outer, n, inner] around axis (normalised). coerce_2d (Softmax family before
// opset 13) makes the normalised block everything from axis on: [outer, prod(dims[axis:]), 1].
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
StatusOr<AxisSplit> SplitAtAxis(const Dims& dims, int64_t axis, bool coerce_2d);

enum class SoftmaxOp { kSoftmax, kLogSoftmax, kHardmax };
Status Softmax(SoftmaxOp op, const Tensor& x, int64_t axis, bool coerce_2d, Tensor& out);

}  // namespace whittle::reference
