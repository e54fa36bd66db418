// The weight a matrix-product layer multiplies by, as the weight-rewriting passes (--cluster,
// --circulant, --binarize) need it: W [n, k] (output n, input k) read out of a Gemm (transA 0,
// alpha and beta 1, either transB) or a MatMul whose right operand is a constant float32 matrix,
// with the layer's bias when it has a constant float32 [N] or [1, N] one. A pass that also takes
// Conv layers fills the same struct for them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/ir/graph.h"

namespace whittle {

struct WeightMatch {
  int node = -1;
  int64_t n = 0, k = 0;
  std::vector<float> w;  // [n, k]
  int bias = -1;         // a float32 value of n elements, or -1
  bool conv = false;     // set by passes that match Conv layers themselves
};

// Node `index` as a Gemm/MatMul weight. false with *reason empty: not a Gemm/MatMul at all;
// false with a reason: one that does not qualify (the reason goes into the pass's report).
bool MatchGemmWeight(const Graph& g, int index, WeightMatch* m, std::string* reason);

// The bias at input `slot` of node `index` when it is a constant float32 of m->n elements ([N], or
// [1, N] when allow_row): sets m->bias; an absent input is fine. false with *reason otherwise.
bool MatchBias(const Graph& g, int index, size_t slot, bool allow_row, WeightMatch* m, std::string* reason);

}  // namespace whittle
