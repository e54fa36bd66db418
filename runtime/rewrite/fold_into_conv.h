// What exporters leave next to a Conv that the Conv can compute itself:
//   FoldPadIntoConv: a constant-mode, zero-valued Pad of the spatial dims whose output only Convs
//     read (Keras' ZeroPadding2D before a strided conv, as tf2onnx writes it) becomes those Convs'
//     own padding (their explicit pads grow by the Pad's; auto_pad must be NOTSET).
//   FoldConvAffine: Mul or Add by a constant that is per output channel ([M,1,1], [1,M,1,1]) or
//     one value, as the Conv's only reader (tf2onnx's unfolded BatchNormalization scale and shift
//     after a depthwise conv), goes into the weight (Mul) and the bias; repeated, so Conv -> Mul
//     -> Add folds whole.
//   CropDeadConvTaps: a 2-D Conv whose input's spatial dims are static and some of whose kernel
//     rows or columns read only padding at every output position (DeepLabV3's ASPP: 3x3 convs
//     with dilation 12-36 on an 8x8 map are 1x1 convs) gets the kernel cut to the taps that read
//     the input, and its pads shrunk by the cut taps (same output, fewer multiplies).
// All need a constant float32 weight (and bias, when present); new initializers hold the
// results, the originals are left for Compact(). The folds add the nodes they removed to *count,
// CropDeadConvTaps the convs it cut.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FoldPadIntoConv(Graph& g, int* count);
Status FoldConvAffine(Graph& g, int* count);
Status CropDeadConvTaps(Graph& g, int* count);

}  // namespace whittle
