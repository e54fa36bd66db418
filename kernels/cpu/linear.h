// Fast CPU Gemm and MatMul (float32) on Sgemm: one GEMM call for Gemm and for MatMul whenever
// the batch folds into M (B shared by every batch), otherwise one GEMM per batch matrix with the
// batches spread over threads. Constant B is captured at factory time (in the model's layout)
// and a constant row-broadcast C is pre-scaled by beta; bias and the fused activation are applied
// per output row in one pass. Other dtypes: the builders return an ok null kernel and the
// family's BackendTable builds the reference one.
#pragma once

#include "kernels/common/linear_shape.h"

namespace whittle::cpu {

extern const LinearFns kLinearFns;

}  // namespace whittle::cpu
