// Constant folding: a node whose inputs are all initializers (or a Shape of a statically known
// shape, or a Gather/Slice of constant positions that picks only static dims out of a Shape) is
// evaluated once with the reference kernels and its outputs become initializers.
// Only ai.onnx nodes are folded. Adds the number of folded nodes to *count.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FoldConstants(Graph& g, int* count);

}  // namespace whittle
