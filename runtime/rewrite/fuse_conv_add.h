// Residual fusion: Conv -> Add(conv output, r) becomes one Conv that reads r as an internal fourth
// input (after X, W and an optional B) and computes act(conv(x) + b + r), so ResNet-style blocks
// stop writing and re-reading the conv output for the Add. Only float32 convs without a fused
// activation (an activation before the Add would change the result), whose output has the Add as
// its sole consumer and has the same known shape as r. Runs before activation fusion, so a Relu
// after the Add then fuses into the Conv as well. The fourth input exists only in the runtime's
// graph (the Conv kernels accept it); loaded models with four Conv inputs are still refused.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FuseConvAdd(Graph& g, int* count);

}  // namespace whittle
