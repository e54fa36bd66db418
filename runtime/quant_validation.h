// Load-time checks of the quantization parameters a model carries. A QDQ or QOperator model
// whose constant scales or zero points are broken would otherwise run and print garbage (or
// saturate silently), so Session::Load rejects it with one line naming the node, the op, the
// input and the bad value: scales must be finite and > 0; a zero point must have the quantized
// data's type (and be 0 for int32 data); per-axis parameters must match the axis length; scale
// and zero point must have the same length. Only constant parameters are checked.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

// Checks every QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul, MatMulInteger,
// ConvInteger and ai.whittle QConv/QGemm node. Value shapes are used when known (call after
// InferShapes for the per-axis length checks on activations).
Status ValidateQuantParams(const Graph& g);

}  // namespace whittle
