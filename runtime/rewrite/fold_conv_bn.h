// Conv+BatchNormalization folding: an inference-mode BatchNormalization that is the single
// consumer of a Conv output, with constant float32 weight, bias and statistics, is folded into
// the Conv's weight and bias (new initializers; the originals are left for Compact()).
// Also used by passes/quantize before int8 calibration. Adds the folded count to *count.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FoldConvBatchNorm(Graph& g, int* count);

}  // namespace whittle
