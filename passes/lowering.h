// `compress-model --portable`: every ai.whittle op a pass wrote (codebook, and when built binary
// and block-circulant layers) replaced by standard ONNX ops computing the same outputs, so that
// ONNX Runtime and other runtimes run the file. Whittle runs either form; the ai.whittle one is
// the smaller and faster.
#pragma once

#include <functional>
#include <string>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

// Lowers every compressed ai.whittle op of g; returns a one-line summary ("" when none).
// Block-circulant layers go to ONNX's DFT op (opset 17, the FFT form and its size) unless
// circulant_dense asks for the expanded dense MatMul.
StatusOr<std::string> LowerCompressedOps(Graph& g, bool circulant_dense = false);

// The loop every lowering shares: for each node of g that `match` accepts (by copy: lowering grows
// the graph), `lower` appends standard nodes computing its outputs; the last one appended takes
// over the node's name and output values, and the node goes. Returns how many were lowered.
StatusOr<int> LowerEachNode(Graph& g, const std::function<bool(const Node&)>& match,
                            const std::function<Status(const Node&)>& lower);

}  // namespace whittle
