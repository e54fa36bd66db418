// Reference BatchNormalization (inference: Y = scale * (X - mean) / sqrt(var + epsilon) + B,
// per channel, or per element of X.shape[1:] when spatial = 0 in opsets < 9; training: the same
// with the batch mean and biased batch variance, plus the running/saved statistics outputs) and
// LayerNormalization (opset 17: normalise over dims [axis, rank), optional Mean and InvStdDev
// outputs in float32, the only supported stash_type), InstanceNormalization (per (N, C) over the
// spatial dims) and GroupNormalization (per (N, group); scale/bias per group in opset 18, per
// channel in 21). float and double; statistics in double (two passes).
// Attributes are parsed and checked by the family's factory (kernels/norm_kernels.cc).
#pragma once

#include "kernels/common/norm_shape.h"

namespace whittle::reference {

extern const NormFns kNormFns;

}  // namespace whittle::reference
