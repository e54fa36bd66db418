// Weight-only quantization (`--int4`, `--int8 mode=weight-only`): the weight of each Gemm/MatMul
// with a constant 2-D weight becomes 4- or 8-bit codes in blocks of `block` inputs per output,
// each block with a float scale (and a zero point unless symmetric), by round-to-nearest, GPTQ
// (passes/quantize/gptq.h) or AWQ (passes/quantize/awq.h; both need --calibration-data; AWQ adds
// a Mul by 1/s on the layer's input). Activations stay float. Written as standard ONNX (opset 21
// DequantizeLinear with block_size on an int4/uint4/int8/uint8 initializer, then MatMul; the
// model's opset is raised to 21) or, for 4 bits with format=matmulnbits, as ONNX Runtime's
// com.microsoft MatMulNBits. Whittle runs the 4-bit forms with a kernel that reads the codes in place.
#pragma once

#include <memory>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

StatusOr<std::unique_ptr<Pass>> MakeInt4Pass(PassOptions options);
const char* Int4PassHelp();

// The pass for bits 4 (--int4's options) or 8 (--int8 mode=weight-only: the same options less
// format=, plus the mode= key it was chosen by).
StatusOr<std::unique_ptr<Pass>> MakeWeightOnlyPass(PassOptions options, int bits);

}  // namespace whittle
