// Activation fusion: a Relu/LeakyRelu/Sigmoid/Tanh/Clip/HardSigmoid/HardSwish that is the single
// consumer of a float32 Conv/Gemm/MatMul output becomes the producer's "_activation" attribute
// (with "_alpha"/"_beta"/"_min"/"_max" parameters; Clip bounds must be constant scalars). A Relu
// after an ai.whittle BinaryMatMul / BinaryConv is fused the same way (their kernels take only
// Relu). The forms exporters write out are fused too: SiLU (y · Sigmoid(y)), HardSwish as
// y · HardSigmoid(y) (alpha 1/6, beta 1/2) and as Paddle2ONNX's Add(y, 3) -> Clip(0, 6) -> Mul(y, ·)
// -> Div(·, 6) (or Mul by 1/6). Underscore attributes live in the runtime's graph only: they are never saved.
// Adds the number of fused activations to *count.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FuseActivations(Graph& g, int* count);

}  // namespace whittle
