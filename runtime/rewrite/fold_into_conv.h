// What exporters leave next to a Conv that the Conv can compute itself:
//   FoldPadIntoConv: a constant-mode, zero-valued Pad of the spatial dims whose output only Convs
//     read (Keras' ZeroPadding2D before a strided conv, as tf2onnx writes it) becomes those Convs'
//     own padding (their explicit pads grow by the Pad's; auto_pad must be NOTSET).
//   FoldConvAffine: Mul or Add by a constant that is per output channel ([M,1,1], [1,M,1,1]) or
//     one value, as the Conv's only reader (tf2onnx's unfolded BatchNormalization scale and shift
//     after a depthwise conv), goes into the weight (Mul) and the bias; repeated, so Conv -> Mul
//     -> Add folds whole.
// Both need a constant float32 weight (and bias, when present); new initializers hold the
// results, the originals are left for Compact(). Each adds the nodes it removed to *count.
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status FoldPadIntoConv(Graph& g, int* count);
Status FoldConvAffine(Graph& g, int* count);

}  // namespace whittle
