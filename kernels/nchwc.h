// The blocked channel layout's kernels (ops in lib/ops/nchwc.cc): reorders, convolution and
// pooling on [N, C/b, H, W, b] tensors. NchwcBlock says which block a backend's NCHWc rewrite
// should use (runtime/rewrite/nchwc.h): 8 or 16, 0 for NHWC (one block of all channels), or none.
#pragma once

#include <optional>

#include "kernels/kernel.h"

namespace whittle {

// kCpu: the layout oneDNN's convolutions prefer on this CPU (cpu::OneDnnPreferredBlock()), unless
// the environment says WHITTLE_NCHWC=0; other backends: none.
std::optional<int> NchwcBlock(Backend backend);

}  // namespace whittle
