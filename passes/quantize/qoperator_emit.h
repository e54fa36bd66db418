// QOperator emission (--int8 format=qoperator) and the dynamic mode's integer-op pattern.
// QOperator: QuantizeLinear where a quantized region starts, QLinearConv (int32 bias at input
// 8), QLinearMatMul for MatMul and bias-free Gemm, and for Gemm with a bias MatMulInteger ->
// Add(int32 bias) -> Cast -> Mul(a_scale*w_scale) -> QuantizeLinear (QLinearMatMul has no bias
// input); MaxPool/Flatten/Reshape/... run on the uint8/int8 tensors; DequantizeLinear where a
// float consumer or a graph output reads a quantized value. Dynamic (ORT's quantize_dynamic
// pattern): DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(a_scale*w_scale) -> Add(bias).
#pragma once

#include <map>

#include "lib/ir/graph.h"
#include "passes/quantize/emit_common.h"
#include "passes/quantize/int8_plan.h"

namespace whittle::quant {

Status EmitQOperator(Graph& g, const Int8Plan& plan, const ParamTable& params,
                     std::map<std::string, EmittedWeight>* weights);
Status EmitDynamic(Graph& g, const Int8Plan& plan, std::map<std::string, EmittedWeight>* weights);

}  // namespace whittle::quant
