// Fuses layer normalization as exporters write it out before opset 17 (PyTorch's nn.LayerNorm at
// opsets 9-16, Keras/TF LayerNormalization through tf2onnx, Paddle's layer_norm) into one
// LayerNormalization node (opset 17 semantics; the runtime's graph is never saved, so older models
// get it too):
//   m = ReduceMean(x, axes=[-1]); d = Sub(x, m); v = ReduceMean(Pow(d, 2) or Mul(d, d), axes=[-1]);
//   n = Div(d, Sqrt(Add(v, eps))) [; Mul(n, gamma) [; Add(., beta)]]
// with eps a scalar constant and gamma/beta constants of one value per last-dim element (either
// operand order). ReduceMean's axes may be the attribute or (opset 18) a constant input, -1 or the
// last axis, keepdims 1. Every intermediate must be read only inside the pattern (d by exactly the
// square and the Div).
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FuseLayerNorm(Graph& g, int* count);

// Fuses RMS normalization as exporters and ONNX Runtime's SimplifiedLayerNormalization expansion
// write it (Llama/T5/Gemma exports): s = Sqrt(Add(ReduceMean(Pow(x, 2) or Mul(x, x), axes=[-1]),
// eps)); n = Div(x, s) or Mul(x, Reciprocal(s) or Div(1, s)) [; Mul(n, gamma)] into one
// RMSNormalization node (opset 23 semantics, axis -1); x may have other readers (the residual),
// the intermediates may not; gamma a constant of one value per last-dim element.
Status FuseRmsNorm(Graph& g, int* count);

}  // namespace whittle
