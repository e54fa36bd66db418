// The --int8 pass: quantizes Conv/Gemm/MatMul to INT8 with symmetric int8 weights (per output
// channel by default) and, in static mode, uint8/int8 activations whose ranges come from
// calibration (minmax, percentile, entropy, mse); dynamic mode quantizes activations at run
// time. Emits standard ONNX: QDQ (default) or QOperator. (mode=weight-only is the weight-only
// pass of passes/quantize/weight_only.h with 8 bits.) Idempotent: layers already between
// DequantizeLinear/QuantizeLinear are left alone.
#pragma once

#include <memory>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

StatusOr<std::unique_ptr<Pass>> MakeInt8Pass(PassOptions options);
const char* Int8PassHelp();

}  // namespace whittle
