// Size and cost accounting shared by every pass and the CLI: parameters (elements of constant
// initializers), their bytes, and multiply-accumulates per sample. MACs count the ops that
// dominate inference (Conv, Gemm, MatMul, ConvInteger/MatMulInteger/QLinear*); symbolic dims
// (the batch) count as 1, so MACs are per sample. Shapes must have been inferred; where they stay
// unknown, dims observed on one sample (ObserveShapes) are used when present.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "lib/ir/graph.h"
#include "passes/pass.h"

namespace whittle {

struct GraphCost {
  int64_t params = 0;       // elements of all initializers (packed 1-bit, index and 4-bit weights: per weight)
  int64_t param_bytes = 0;  // bytes of all initializers
  int64_t macs = 0;         // per sample
};

// MACs of one node per sample; 0 for ops not counted or when shapes are unknown.
int64_t NodeMacs(const Graph& g, const Node& n);
// Elements of the node's constant inputs (its weights and biases).
int64_t NodeParams(const Graph& g, const Node& n);
// The report row of a layer a pass left alone: action "skipped", the reason, and its unchanged
// params and MACs.
LayerReport SkippedLayer(const Graph& g, const Node& n, const std::string& reason);
GraphCost ComputeCost(const Graph& g);

// Runs one sample (feeds: every graph input, batch 1) through g and records every computed
// value's dims in Value::observed (nothing to run when inference already knows them all), which NodeMacs uses where inference left dims unknown (an
// exporter folding the batch into another dim, data-dependent shapes).
Status ObserveShapes(Graph& g, const std::map<std::string, Tensor>& feeds);

}  // namespace whittle
