// Fast CPU BatchNormalization (inference, float32): per channel y = x * a + b with a, b folded
// once at factory time when the parameters are constant (per plane otherwise), planes spread
// over threads when large. LayerNormalization (float32): two passes per row in float with
// vectorisable loops, rows spread over threads when large. Other cases: the builders return an
// ok null kernel and the family's BackendTable builds the reference one.
#pragma once

#include "kernels/common/norm_shape.h"

namespace whittle::cpu {

extern const NormFns kNormFns;

}  // namespace whittle::cpu
