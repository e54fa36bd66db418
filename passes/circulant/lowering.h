// What both lowerings of ai.whittle BlockCirculantMatMul (the dense LowerCirculant and the DFT
// LowerCirculantDft) read off a node first: its attributes and constant block vectors, checked as
// the kernels check them, and whether it has a bias.
#pragma once

#include "lib/ir/circulant_format.h"
#include "lib/ir/domain.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

struct CirculantLayer {
  CirculantAttrs a;
  const Tensor* blocks = nullptr;  // float32 [P, Q, B], in g
  bool has_bias = false;           // input 2, a constant [N]
};

// An ai.whittle BlockCirculantMatMul node (what both lowerings replace).
inline bool IsCirculantNode(const Node& n) { return n.domain == kWhittleDomain && n.op_type == "BlockCirculantMatMul"; }

StatusOr<CirculantLayer> ReadCirculantLayer(const Graph& g, const Node& node);

}  // namespace whittle
