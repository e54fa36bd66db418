// Reference kernel for the resampling ops (Resize, and Upsample, which is Resize with the
// asymmetric coordinate transform). Plain loops in double precision, one axis at a time, as the
// ONNX reference evaluates Resize; the result is converted to the output type at the end
// (integers: round half to even, saturated). The output arrives preallocated with the dims
// inference computed; scales and roi arrive resolved to full rank by the glue
// (kernels/resample_kernels.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/resample_fns.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// For one axis: for each output index y, n input indices (clamped into the input) and their
// weights, and whether y falls outside the crop (tf_crop_and_resize: the output is then the
// extrapolation value). identity: the axis is copied (same size, scale 1).
struct AxisTaps {
  bool identity = false;
  int n = 1;
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<uint8_t> outside;
};
// The sampling table of one axis of in_w elements resized to out_w (every backend's Resize
// samples by these).
StatusOr<AxisTaps> ResizeAxisTaps(const ResizeParams& p, int64_t in_w, int64_t out_w, double scale, double roi_start,
                                  double roi_end);

// scales: one per axis of in (1 for axes that are not resized); roi: [starts..., ends...] with
// 2 * rank values for tf_crop_and_resize, or empty (the whole input). out: dims from inference.
// Nearest mode works on every dtype; linear and cubic need a numeric or 16-bit float type.
Status ResizeReference(const Tensor& in, const std::vector<double>& scales, const std::vector<double>& roi,
                       const ResizeParams& p, Tensor* out);

namespace reference {
extern const ResampleFns kResampleFns;
}  // namespace reference

}  // namespace whittle
