// Hidden-node pruning pass (`--prune`): removes hidden neurons (Gemm/MatMul output columns) and
// convolution channels, rewiring every consumer (next Gemm/MatMul rows, BatchNormalization
// entries, next Conv input channels, Flatten column blocks, depthwise convs, residual Add and
// Concat groups) so the saved model is physically smaller. Groups it cannot rewire safely are
// skipped with a reason, never left broken.
#pragma once

#include <memory>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

StatusOr<std::unique_ptr<Pass>> MakePrunePass(PassOptions options);
const char* PrunePassHelp();

}  // namespace whittle
