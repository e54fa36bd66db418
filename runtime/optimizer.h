// The runtime's own graph rewrites, applied by Session::Load before planning: constant folding
// of nodes whose inputs are all constant, Conv+BatchNormalization folding, and fusing a single
// consumer activation into Conv/Gemm/MatMul. Each rewrite matches first, then applies, and leaves
// the graph alone when a precondition fails (non-constant weights, several consumers, a graph
// output in the middle).
#pragma once

#include "lib/ir/graph.h"

namespace whittle {

struct OptimizeReport {
  int folded_constants = 0;
  int folded_batchnorms = 0;
  int fused_activations = 0;
  int fused_qdq = 0;          // Conv/Gemm/MatMul running as int8 QConv/QGemm
  int int8_passthrough = 0;   // MaxPool/Flatten/Reshape moved onto int8 data
};

Status FoldConstants(Graph& g, int* count);
Status FoldConvBatchNorm(Graph& g, int* count);
Status FuseActivations(Graph& g, int* count);
// QDQ fusion (runtime/qdq_fusion.h) first, then all of the above, then Compact() and
// InferShapes().
StatusOr<OptimizeReport> OptimizeForRuntime(Graph& g);

}  // namespace whittle
