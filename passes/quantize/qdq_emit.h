// QDQ emission (--int8 format=qdq, the default), in ONNX Runtime's style: every quantized
// activation gets a QuantizeLinear -> DequantizeLinear pair with scalar scale/zero point;
// weights become int8 initializers read through DequantizeLinear (per-channel on the output
// axis, zero point 0); biases int32 through DequantizeLinear at scale a_scale*w_scale, axis 0.
// Layers and the ops between them keep their float types, so any ONNX runtime can run the file
// and Whittle's Session fuses the patterns into int8 kernels.
#pragma once

#include <map>

#include "lib/ir/graph.h"
#include "passes/quantize/emit_common.h"
#include "passes/quantize/int8_plan.h"

namespace whittle::quant {

// Rewrites g per the plan; params hold every quantized value. weights gets each layer's
// stored weight (by node name) for the report.
Status EmitQdq(Graph& g, const Int8Plan& plan, const ParamTable& params, std::map<std::string, EmittedWeight>* weights);

}  // namespace whittle::quant
