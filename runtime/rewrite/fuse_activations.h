// Activation fusion: a Relu/LeakyRelu/Sigmoid/Tanh/Clip/HardSigmoid/HardSwish that is the single
// consumer of a float32 Conv/Gemm/MatMul output becomes the producer's "_activation" attribute
// (with "_alpha"/"_beta"/"_min"/"_max" parameters; Clip bounds must be constant scalars). A Relu
// after an ai.whittle BinaryMatMul / BinaryConv is fused the same way (their kernels take only
// Relu). Underscore attributes live in the runtime's graph only: they are never saved.
// Adds the number of fused activations to *count.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FuseActivations(Graph& g, int* count);

}  // namespace whittle
