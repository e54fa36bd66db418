// Weight-sharing pass (`--cluster k=K`): the weight of every Gemm/MatMul with a constant 2-D weight
// is clustered by 1-D k-means (passes/cluster/kmeans.h) and the node becomes ai.whittle
// CodebookMatMul (lib/ops/codebook.cc): a K-entry float codebook and one packed index per weight
// (4-bit for K <= 16, 8-bit up to 256), which Whittle's runtime multiplies by directly.
// LowerCodebooks turns those nodes back into standard ONNX (Cast → Gather → Reshape → MatMul →
// Add) for runtimes without the op.
#pragma once

#include <memory>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

StatusOr<std::unique_ptr<Pass>> MakeClusterPass(PassOptions options);
const char* ClusterPassHelp();

// Replaces every ai.whittle CodebookMatMul of g by standard ops computing the same product
// (indices unpacked to one uint8 per weight). Returns how many nodes it lowered.
StatusOr<int> LowerCodebooks(Graph& g);

}  // namespace whittle
