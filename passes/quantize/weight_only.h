// Weight-only 4-bit quantization (`--int4`): the weight of each Gemm/MatMul with a constant 2-D
// weight becomes 4-bit codes in blocks of `block` inputs per output, each block with a float
// scale (and a 4-bit zero point unless symmetric), by round-to-nearest or GPTQ
// (passes/quantize/gptq.h; needs --calibration-data). Activations stay float. Written as
// standard ONNX (opset 21 DequantizeLinear with block_size on an int4/uint4 initializer, then
// MatMul; the model's opset is raised to 21) or, with format=matmulnbits, as ONNX Runtime's
// com.microsoft MatMulNBits. Whittle runs both with a kernel that reads the codes in place.
#pragma once

#include <memory>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

StatusOr<std::unique_ptr<Pass>> MakeInt4Pass(PassOptions options);
const char* Int4PassHelp();

}  // namespace whittle
