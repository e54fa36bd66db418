// `compress-model --portable`: every ai.whittle op a pass wrote (codebook, and when built binary
// and block-circulant layers) replaced by standard ONNX ops computing the same outputs, so that
// ONNX Runtime and other runtimes run the file. Whittle runs either form; the ai.whittle one is
// the smaller and faster.
#pragma once

#include <string>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

// Lowers every compressed ai.whittle op of g; returns a one-line summary ("" when none).
// Block-circulant layers go to ONNX's DFT op (opset 17, the FFT form and its size) unless
// circulant_dense asks for the expanded dense MatMul.
StatusOr<std::string> LowerCompressedOps(Graph& g, bool circulant_dense = false);

}  // namespace whittle
