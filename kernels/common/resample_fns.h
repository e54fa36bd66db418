// The contract between the Resize / Upsample glue (kernels/resample_kernels.cc) and its backends:
// the resolved Resize parameters and ResampleFns, one instance per backend (reference::
// kResampleFns in kernels/reference/resample.h, cpu::kResampleFns in kernels/cpu/resample.h).
#pragma once

#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

enum class ResizeMode { kNearest, kLinear, kCubic };

// How an output coordinate maps to an input coordinate (ONNX coordinate_transformation_mode).
enum class ResizeCoord {
  kHalfPixel,
  kHalfPixelSymmetric,  // opset 19
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNN,  // opsets 11-12
  kTfCropAndResize,
};

// How nearest mode rounds the input coordinate. kSimple is Upsample's and Resize-10's rule (as
// ONNX Runtime implements them): floor on axes that upsample (scale >= 1), ceil on axes that
// downsample.
enum class ResizeNearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeParams {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  double cubic_coeff_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;            // linear and cubic only, when an axis downsamples
  double extrapolation_value = 0.0;  // tf_crop_and_resize outside [0, length - 1]
};

// The family's compute functions, one instance per backend (kernels/kernel.h BackendTable): the
// reference and the CPU (kernels/cpu/resample.h); a backend adds its row to kResample in
// kernels/resample_kernels.cc.
struct ResampleFns {
  Status (*resize)(const Tensor& in, const std::vector<double>& scales, const std::vector<double>& roi,
                   const ResizeParams& p, Tensor* out) = nullptr;
};

}  // namespace whittle
