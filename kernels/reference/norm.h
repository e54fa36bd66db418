// Reference BatchNormalization (inference: Y = scale * (X - mean) / sqrt(var + epsilon) + B,
// per channel, or per element of X.shape[1:] when spatial = 0 in opsets < 9) and
// LayerNormalization (opset 17: normalise over dims [axis, rank), optional Mean and InvStdDev
// outputs in float32, the only supported stash_type). float and double; statistics in double.
// Training-mode BatchNormalization is rejected with Unimplemented.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/kernel.h"

namespace whittle {

// Shared by the reference and CPU kernels: X [N, C, ...] and four parameter tensors.
struct BatchNormShape {
  int64_t batch = 0, channels = 0, inner = 1;  // inner: product of dims after C
  bool per_element = false;                    // spatial = 0: parameters have X.shape[1:]
};
Status ResolveBatchNormShape(const Tensor& x, const Tensor* const params[4], bool spatial, BatchNormShape* s);
// Rejects training mode and training-only outputs.
Status CheckBatchNormInit(const KernelInit& init);

// LayerNorm geometry: rows of `inner` elements normalised independently; scale/bias have either
// `inner` elements (X.shape[axis:], leading 1s allowed) or one.
struct LayerNormShape {
  int64_t outer = 1, inner = 1;
};
Status ResolveLayerNormShape(const Tensor& x, int64_t axis, const Tensor& scale, const Tensor* bias,
                             LayerNormShape* s);
Status CheckLayerNormInit(const KernelInit& init);

StatusOr<std::unique_ptr<OpKernel>> CreateBatchNormReferenceKernel(const KernelInit& init);
StatusOr<std::unique_ptr<OpKernel>> CreateLayerNormReferenceKernel(const KernelInit& init);

}  // namespace whittle
