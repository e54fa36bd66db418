// Fast CPU Conv (float32): oneDNN's convolution or the direct stride-1 kernel (conv_direct.h) where
// they measure faster (see ConvPath), else im2col + Sgemm per (image, group, block of output rows), a direct path
// for 1x1 stride-1 unpadded kernels (no im2col) and a direct depthwise path; bias and the fused
// activation are applied to each output block while it is in cache. Work is split over OpenMP
// threads only when it is large enough to pay for it; im2col scratch is per thread and reused
// across calls. Constant W/B are captured at factory time. ConvTranspose (float32): per (image,
// group) one Sgemm W^T x X into columns, then col2im adds them into the output planes (threads
// split the output channels). Other dtypes: the builder returns an
// ok null kernel and the family's BackendTable builds the reference one.
#pragma once

#include "kernels/common/window.h"

namespace whittle::cpu {

extern const ConvFns kConvFns;

// Which implementation runs a float 2-D Conv with constant weights: kAuto measures the own path
// (im2col + Sgemm, direct depthwise), oneDNN's convolution (conv_onednn.h; not with a fused
// residual) and the direct stride-1 kernel (conv_direct.h) on the first call of each geometry and
// keeps the fastest for the process. WHITTLE_CONV=own|onednn|direct|auto sets it (a forced path
// that does not apply to a shape falls back to measuring); SetConvPath overrides (tests, benchmarks).
enum class ConvPath { kAuto = 0, kOwn = 1, kOneDnn = 2, kDirect = 3 };
void SetConvPath(ConvPath p);

}  // namespace whittle::cpu
