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
};

Status FoldConstants(Graph& g, int* count);
Status FoldConvBatchNorm(Graph& g, int* count);
Status FuseActivations(Graph& g, int* count);
// All of the above, then Compact() and InferShapes().
StatusOr<OptimizeReport> OptimizeForRuntime(Graph& g);

}  // namespace whittle
