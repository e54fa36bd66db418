// Fuses the MaxPool that CNNs put after a conv into the int8 conv before it: QConv (group 1,
// 1-D or 2-D, as the QDQ fusion wrote it) -> MaxPool with window = stride, no padding, dilation
// 1, floor mode and no Indices output, reading the QConv's bytes (the QDQ fusion moves MaxPool
// onto int8 data) and nothing else reading them, becomes one QConv with attribute _max_pool =
// the window. Where the CPU backend's channels-last byte kernel runs the conv, it pools the
// int32 accumulators of each window and requantizes only the pooled values, so neither the
// full-size output nor the separate pool is ever written (bit-identical: the requantizing
// epilogue is monotone). Elsewhere the kernel convolves into scratch and pools that.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FuseQConvMaxPool(Graph& g, int* count);

}  // namespace whittle
