// Sliding-window shape rules shared by Conv, the pools (lib/ops/pool.cc) and the integer convs
// (lib/ops/qlinear.cc); defined in lib/ops/conv.cc. Sizes follow ONNX 1.12: explicit pads,
// auto_pad SAME_UPPER/SAME_LOWER/VALID, dilations, ceil_mode (pools).
#pragma once

#include <optional>
#include <vector>

#include "lib/ops/op_def.h"

namespace whittle {

// kernel_shape/strides/pads/dilations/auto_pad/ceil_mode well-formed (rank-independent checks).
Status CheckWindowAttributes(const Node& node);
// Output spatial dims for input spatial dims `in` and kernel dims `kernel` (-1: unknown).
Status InferWindowOutput(const InferContext& ctx, const SymShape& in, const std::vector<int64_t>& kernel,
                         SymShape* out);
// Conv-style output shape [N, M, spatial...] for data input xi ([N, C, spatial...]) and weight wi
// ([M, C/group, k...]), with the rank, group and kernel_shape checks; nullopt when X's shape is
// unknown.
StatusOr<std::optional<SymShape>> InferConvOutput(const InferContext& ctx, int xi, int wi);

}  // namespace whittle
