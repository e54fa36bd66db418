// Fast CPU Resize (float32): the common case of image models (DeepLabV3's and LR-ASPP's bilinear
// upsampling of the logits to the input size, FPN and U-Net upsampling) where only the last two
// axes resize, in any mode the shared sampling tables describe (ResizeAxisTaps: nearest, linear,
// cubic, antialiased). Separable: each input row is resampled along the width into a scratch plane,
// then each output row is a weighted sum of scratch rows, vectorized along the width. Float
// arithmetic (the reference works in double; the results agree to float rounding). Everything
// else (other dtypes, other axes resized, tf_crop_and_resize's extrapolation) runs the reference.
#pragma once

#include "kernels/common/resample_fns.h"

namespace whittle::cpu {

extern const ResampleFns kResampleFns;

}  // namespace whittle::cpu
