// Resize's attributes and call inputs resolved the same way on every backend: ParseResize reads
// the attributes once (at load), ResolveResize the call's roi / scales / sizes into one scale and
// one roi interval per axis of X (the rules of the op's shape inference, which gave the output
// dims). kernels/resample_kernels.cc (CPU, reference) and kernels/cuda/resize.cc use them.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/reference/resample.h"

namespace whittle {

struct ResizeSetup {
  ResizeParams params;
  std::vector<int64_t> axes;  // attribute (opset 18), not yet normalised; empty: every axis
  enum class Policy { kStretch, kNotLarger, kNotSmaller } policy = Policy::kStretch;
  int opset = 0;
};

StatusOr<ResizeSetup> ParseResize(const KernelInit& init);
// scales: one per axis of X; roi: 2 * rank values for tf_crop_and_resize, else empty. Reads
// ctx.inputs 1..3 (roi, scales, sizes; scales is input 1 below opset 11) on the host.
Status ResolveResize(const ResizeSetup& s, const KernelContext& ctx, std::vector<double>* scales,
                     std::vector<double>* roi);

}  // namespace whittle
