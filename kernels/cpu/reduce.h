// Fast CPU reductions and softmax for float32; same contracts as kernels/reference/reduce.h,
// which they fall back to for other types, ops (Prod, LogSumExp, Hardmax) and reduced axes that
// do not form one contiguous block. Reductions see x as [outer, reduced, inner]: inner == 1 is
// a per-row vector reduction, inner > 1 accumulates whole rows. Softmax over the last axis of
// [N, K] logits runs one vectorised row at a time, rows split across threads when large.
#pragma once

#include <vector>

#include "kernels/common/reduce_fns.h"

namespace whittle::cpu {

Status Reduce(reference::ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, Tensor& out, int threads);
Status Softmax(reference::SoftmaxOp op, const Tensor& x, int64_t axis, bool coerce_2d, Tensor& out, int threads);

// Reduce and Softmax; ArgMax/ArgMin take the reference's (rare and cheap).
extern const reference::ReduceFns kReduceFns;

}  // namespace whittle::cpu
