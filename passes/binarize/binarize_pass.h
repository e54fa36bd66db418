// Binarization pass (`--binarize`, XNOR-Net): the weight of every Gemm/MatMul with a constant 2-D
// weight and every 2-D Conv with a constant weight becomes sign(W) * alpha, alpha per output
// channel the mean |W| of that channel (XNOR-Net's optimal scale), stored as 1 bit per weight in
// ai.whittle BinaryMatMul / BinaryConv (lib/ops/binary.cc; bit layout in lib/ir/binary_format.h);
// the float weights are dropped. activations=binary also binarizes each layer's input (sign with
// a scale beta = mean |x| per row, per sample for a Conv). The first and last such layers stay
// float unless include= names them. LowerBinary turns the ops back into standard ONNX.
#pragma once

#include <memory>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

StatusOr<std::unique_ptr<Pass>> MakeBinarizePass(PassOptions options);
const char* BinarizePassHelp();

// Replaces every ai.whittle BinaryMatMul/BinaryConv of g by standard ops computing the same
// outputs: an int8 +-1 sign tensor -> Cast -> Mul alpha as the weight of a MatMul/Conv; for
// activations=binary the input goes through Where(x < 0, -1, 1), the weight is the Cast signs,
// and the product is scaled by alpha and by ReduceMean(Abs(x)) over the row (Conv: over C, H, W),
// so that the sums are exact integers as in the kernel. Returns how many nodes it lowered.
StatusOr<int> LowerBinary(Graph& g);

}  // namespace whittle
