// BatchNormalization / LayerNormalization / InstanceNormalization / GroupNormalization pieces shared by every backend: the parsed attributes
// (checked once by the family's factory), shape resolution for concrete input dims, the per-call
// output checks, and NormFns, the per-backend table of kernel builders. A builder may return an
// ok null kernel ("not for these dtypes/attributes"): BackendTable::Make then builds the reference.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/kernel.h"

namespace whittle {

// BatchNormalization attributes, checked: inference only, X float or double.
struct BatchNormAttrs {
  float epsilon = 1e-5f;
  bool spatial = true;  // false only for spatial = 0 in opsets < 9
};
// Rejects training mode and element types other than float/double.
StatusOr<BatchNormAttrs> ParseBatchNormAttrs(const KernelInit& init);

// LayerNormalization attributes, checked: stash_type 1, X float or double.
struct LayerNormAttrs {
  int64_t axis = -1;
  float epsilon = 1e-5f;
};
StatusOr<LayerNormAttrs> ParseLayerNormAttrs(const KernelInit& init);

// X [N, C, ...] and four parameter tensors.
struct BatchNormShape {
  int64_t batch = 0, channels = 0, inner = 1;  // inner: product of dims after C
  bool per_element = false;                    // spatial = 0: parameters have X.shape[1:]
};
Status ResolveBatchNormShape(const Tensor& x, const Tensor* const params[4], bool spatial, BatchNormShape* s);
// Rejects the training-only outputs (Compute-time check shared by all backends).
Status CheckBatchNormOutputs(const KernelContext& ctx);

// LayerNorm geometry: rows of `inner` elements normalised independently; scale/bias have either
// `inner` elements (X.shape[axis:], leading 1s allowed) or one.
struct LayerNormShape {
  int64_t outer = 1, inner = 1;
};
Status ResolveLayerNormShape(const Tensor& x, int64_t axis, const Tensor& scale, const Tensor* bias,
                             LayerNormShape* s);

// One LayerNormalization call's tensors, resolved and checked: optional Mean and InvStdDev
// outputs are float32 with one value per row (nullptr when absent).
struct LayerNormCall {
  const Tensor* x = nullptr;
  const Tensor* scale = nullptr;
  const Tensor* bias = nullptr;
  LayerNormShape shape;
  float* mean_out = nullptr;
  float* inv_out = nullptr;
};
Status ResolveLayerNormCall(const KernelContext& ctx, int64_t axis, LayerNormCall* call);

// Base of every backend's LayerNormalization kernel: resolves and checks the call, then Run().
class LayerNormKernelBase : public OpKernel {
 public:
  explicit LayerNormKernelBase(const LayerNormAttrs& a) : attrs_(a) {}
  Status Compute(KernelContext& ctx) const final {
    LayerNormCall call;
    WH_RETURN_IF_ERROR(ResolveLayerNormCall(ctx, attrs_.axis, &call));
    return Run(call, *ctx.outputs[0], ctx.num_threads);
  }

 protected:
  virtual Status Run(const LayerNormCall& call, Tensor& y, int num_threads) const = 0;
  const LayerNormAttrs attrs_;
};

// InstanceNormalization (groups = C, scale/B per channel) and GroupNormalization attributes,
// checked once: X float or double, num_groups >= 1, stash_type 1 or 11 (statistics are computed
// in double either way). Opset 21 GroupNormalization has scale/bias per channel, opset 18 per group.
struct ChannelNormAttrs {
  float epsilon = 1e-5f;
  int64_t num_groups = 0;   // 0: one group per channel (InstanceNormalization)
  bool per_channel = true;  // scale/bias have C values (else num_groups)
};
StatusOr<ChannelNormAttrs> ParseInstanceNormAttrs(const KernelInit& init);
StatusOr<ChannelNormAttrs> ParseGroupNormAttrs(const KernelInit& init);

// X [N, C, ...] split into `groups` groups of C/groups channels: statistics per (n, group) over
// `group_size` = (C/groups) * inner elements; scale/bias index c (per_channel) or c / (C/groups).
struct ChannelNormShape {
  int64_t batch = 0, channels = 0, inner = 1, groups = 1;
  bool per_channel = true;
};
Status ResolveChannelNormShape(const ChannelNormAttrs& a, const Tensor& x, const Tensor& scale, const Tensor& bias,
                               ChannelNormShape* s);

// A backend's norm kernel builders (nullptr: the backend has none, the reference is used).
struct NormFns {
  KernelOr (*batch_norm)(const BatchNormAttrs& a, const KernelInit& init);
  KernelOr (*layer_norm)(const LayerNormAttrs& a, const KernelInit& init);
  KernelOr (*instance_norm)(const ChannelNormAttrs& a, const KernelInit& init);
  KernelOr (*group_norm)(const ChannelNormAttrs& a, const KernelInit& init);
};

}  // namespace whittle
