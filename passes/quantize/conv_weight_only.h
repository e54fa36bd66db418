// Weight-only int8 of Conv layers (--int8 mode=weight-only covers Conv as well as Gemm/MatMul):
// each Conv with a constant float32 weight keeps float activations, and its weight becomes int8
// codes, symmetric per output channel (scale = max|w| / 127 of the channel, no zero point), read
// through a standard DequantizeLinear(axis 0, opset >= 13) that any runtime runs. About 4x smaller
// weights for the rounding error of the weights alone (no activation ranges, no calibration).
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "passes/layer_selection.h"
#include "passes/pass.h"

namespace whittle {

// Rewrites every selected Conv of g; each one (or the reason it was left alone) goes to rep.
Status QuantizeConvWeightsInt8(Graph& g, const LayerSelection& select, PassReport* rep);

}  // namespace whittle
