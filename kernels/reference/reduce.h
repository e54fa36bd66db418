// Reference reduction kernels: Reduce* over a set of axes, ArgMax/ArgMin, and the normalisations
// Softmax/LogSoftmax/Hardmax. Plain loops, floats accumulated in double: the truth for the CPU
// kernels. `out` is preallocated by the runtime; since keepdims only inserts size-1 axes, the
// output layout is the same with or without it and kernels ignore keepdims.
// float16/bfloat16 are computed in float32 by the caller (ew::RunWithHalfAsFloat).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/index.h"
#include "kernels/common/reduce_fns.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::reference {

const char* ReduceOpName(ReduceOp op);

// Reduces x over `axes` (normalised, as NormalizeAxes returns them) into out.
Status Reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, Tensor& out);

// Index (int64) of the largest (is_max) or smallest value along axis; ties give the first index,
// or the last with select_last.
Status ArgReduce(bool is_max, const Tensor& x, int64_t axis, bool select_last, Tensor& out);

Status Softmax(SoftmaxOp op, const Tensor& x, int64_t axis, bool coerce_2d, Tensor& out);

extern const ReduceFns kReduceFns;

}  // namespace whittle::reference
