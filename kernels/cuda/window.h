// The 2-D window geometry the CUDA backend's Conv, pool, col2im and binarized-conv launchers take
// (kernels/cuda/conv.h, pool.h, binary.h) and their device bodies read: plain int64 fields, so
// host code, device code and the CPU tests of the bodies share one definition. WindowOf
// (kernels/cuda/cuda_util.h) fills it from a node's attributes.
#pragma once

#include <cstdint>

namespace whittle::cuda {

// 2-D window geometry of Conv and the pools (pads begin/end, stride, dilation per spatial axis).
struct Window2d {
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t k_h = 0, k_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

}  // namespace whittle::cuda
