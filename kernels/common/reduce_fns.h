// The contract between the reduction glue (kernels/reduce_kernels.cc) and its backends: the op
// enums and ReduceFns with its function types, one instance per backend (reference::kReduceFns
// in kernels/reference/reduce.h, cpu::kReduceFns in kernels/cpu/reduce.h). The names keep their
// namespace (whittle::reference), where they were declared first.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::reference {

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

enum class SoftmaxOp { kSoftmax, kLogSoftmax, kHardmax };

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

}  // namespace whittle::reference
