// The runtime's QDQ fusion: turns the QuantizeLinear/DequantizeLinear patterns of a QDQ model
// into real int8 kernels (ai.whittle QConv / QGemm: int32 accumulation, requantized or float
// output), so a quantized model runs in int8 instead of float emulation. Runs before constant
// folding (which would fold DequantizeLinear(int8 weight) into a float weight). Matches first,
// then applies; a pattern whose preconditions fail (non-constant weight, per-channel parameters
// on the wrong axis, alpha != 1, ...) is left alone and keeps running as float emulation.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

struct QdqFusionCounts {
  int fused = 0;        // Conv/Gemm/MatMul nodes now running as QConv/QGemm
  int passthrough = 0;  // MaxPool/Flatten/Reshape moved onto int8 data (their Q/DQ pair dropped)
};

// 1. DequantizeLinear -> MaxPool|Flatten|Reshape|Transpose|Squeeze|Unsqueeze|Gather (of the
//    data) -> QuantizeLinear with equal scalar parameters becomes the op on the quantized data
//    (exact: these ops move or select elements, MaxPool commutes with monotonic quantization).
// 2. DequantizeLinear(x_q) -> Conv|Gemm|MatMul with DequantizeLinear(const int8|uint8 weight) and
//    bias none | const float | DequantizeLinear(const int32) (a MatMul's: a following Add of a
//    constant float [N]) -> [Relu] -> [QuantizeLinear] becomes
//    one QConv/QGemm (quantized output with the trailing QuantizeLinear, float output without).
//    A Clip with constant bounds in the Relu's place is fused when a QuantizeLinear follows it:
//    Q(Clip(v, lo, hi)) = clamp(Q(v), Q(lo), Q(hi)), the epilogue's integer clamp narrowed.
// Dequantize nodes that nothing reads any more are left for Graph::Compact() to drop. Adds the
// "ai.whittle" opset import when it introduces an op. Does not Compact or re-infer shapes.
Status FuseQdq(Graph& g, QdqFusionCounts* counts);

}  // namespace whittle
