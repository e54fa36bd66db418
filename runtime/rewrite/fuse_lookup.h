// Element-wise float math on dequantized int8 data as a 256-entry table. An int8 model keeps the
// activations it did not quantize around its int8 convs in float: EfficientNet's SiLU is
// DequantizeLinear -> Sigmoid, Mul(x, sigmoid) -> QuantizeLinear, four passes over the tensor for
// a function of one byte. Such a region becomes one ai.whittle Lookup node: y = table[x's byte],
// the table made at load by the reference kernels on all 256 bytes, so the values are the ones
// those kernels give the unfused graph, element for element.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

// A region is every node reachable from the DequantizeLinear of an int8/uint8 tensor x (scalar
// constant scale and zero point; other DequantizeLinears of x with the same values count as the
// same) through element-wise float ops (Sigmoid, Tanh, Relu, Clip, HardSwish, Mul, Add, ...) whose
// other operands are float scalar constants. It is replaced when it has exactly one value read
// outside it: with a sole QuantizeLinear reader (scalar constant parameters) the table holds that
// QuantizeLinear's bytes, else the float values (only for regions with an op that costs an exp or
// a division per element: a float table is read element by element). Adds the "ai.whittle" opset import when it
// introduces a node. Does not Compact or re-infer shapes.
Status FuseLookupTables(Graph& g, int* count);

}  // namespace whittle
