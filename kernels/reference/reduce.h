// Reference reduction kernels: Reduce* over a set of axes, ArgMax/ArgMin, and the normalisations
// Softmax/LogSoftmax/Hardmax. Plain loops, floats accumulated in double: the truth for the CPU
// kernels. `out` is preallocated by the runtime; since keepdims only inserts size-1 axes, the
// output layout is the same with or without it and kernels ignore keepdims.
// float16/bfloat16 are computed in float32 by the caller (ew::RunWithHalfAsFloat).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/index.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::reference {

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };
const char* ReduceOpName(ReduceOp op);

// Reduces x over `axes` (normalised, as NormalizeAxes returns them) into out.
Status Reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, Tensor& out);

// Index (int64) of the largest (is_max) or smallest value along axis; ties give the first index,
// or the last with select_last.
Status ArgReduce(bool is_max, const Tensor& x, int64_t axis, bool select_last, Tensor& out);

enum class SoftmaxOp { kSoftmax, kLogSoftmax, kHardmax };
Status Softmax(SoftmaxOp op, const Tensor& x, int64_t axis, bool coerce_2d, Tensor& out);

// The family's compute functions, one instance per backend (kernels/kernel.h BackendTable); a
// null member means "use the reference's". `threads` is the intra-op budget a backend may use.
using ReduceFn = Status (*)(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, Tensor& out, int threads);
using ArgReduceFn = Status (*)(bool is_max, const Tensor& x, int64_t axis, bool select_last, Tensor& out, int threads);
using SoftmaxFn = Status (*)(SoftmaxOp op, const Tensor& x, int64_t axis, bool coerce_2d, Tensor& out, int threads);
struct ReduceFns {
  ReduceFn reduce = nullptr;
  ArgReduceFn arg_reduce = nullptr;
  SoftmaxFn softmax = nullptr;
};
extern const ReduceFns kReduceFns;

}  // namespace whittle::reference
