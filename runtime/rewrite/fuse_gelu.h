// Fuses GELU as exporters write it out into one Gelu node (ONNX opset 20 semantics; the runtime's
// graph is never saved, so older models get it too):
//   erf form   x · ½ · (1 + erf(x / √2)), x/√2 as Div(x, √2) or Mul(x, 1/√2);
//   tanh form  x · ½ · (1 + tanh(√(2/π) · (x + 0.044715 · x³))), x³ as Pow(x, 3) or x·x·x;
// the final products in any of the orders PyTorch, Keras and Paddle exporters use:
// (x · t) · ½, (x · ½) · t, x · (t · ½) where t = 1 + erf(..) or 1 + tanh(..).
// Every intermediate must be read only inside the pattern.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FuseGelu(Graph& g, int* count);

}  // namespace whittle
