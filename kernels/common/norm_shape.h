// BatchNormalization / LayerNormalization / InstanceNormalization / GroupNormalization pieces shared by every backend: the parsed attributes
// (checked once by the family's factory), shape resolution for concrete input dims, the per-call
// output checks, and NormFns, the per-backend table of kernel builders. A builder may return an
// ok null kernel ("not for these dtypes/attributes"): BackendTable::Make then builds the reference.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/kernel.h"

namespace whittle {

// BatchNormalization attributes, checked: X float or double. Training (statistics of the batch
// normalise Y; the running statistics are updated with momentum) is chosen per opset: opset 14+
// by training_mode=1; opsets 7-13 by asking for any of outputs 1-4 (the spec's "output case #1",
// decided per call since only then are the outputs known); opset 6 by is_test=0.
struct BatchNormAttrs {
  float epsilon = 1e-5f;
  float momentum = 0.9f;
  bool spatial = true;              // false only for spatial = 0 in opsets < 9
  bool training = false;            // training regardless of the outputs asked for
  bool training_by_outputs = false; // opsets 7-13: training when an output past Y is present
  bool running_outputs_only = false;  // opset 14+: at most Y, running_mean, running_var
};
// Rejects element types other than float/double.
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
  // Number of statistics (C, or C * inner when per_element) and of X elements behind each one.
  int64_t stats() const { return per_element ? channels * inner : channels; }
  int64_t count() const { return per_element ? batch : batch * inner; }
};
Status ResolveBatchNormShape(const Tensor& x, const Tensor* const params[4], bool spatial, BatchNormShape* s);

// One BatchNormalization call's tensors, resolved and checked. In training the present statistic
// outputs (nullptr when absent) each have one value per statistic and X's element type:
// running_mean = input_mean * momentum + batch_mean * (1 - momentum), running_var likewise with
// the biased batch variance (as onnx.reference computes it); saved_mean / saved_var (opsets < 14)
// are the batch mean and biased batch variance.
struct BatchNormCall {
  const Tensor* x = nullptr;
  const Tensor* params[4] = {nullptr, nullptr, nullptr, nullptr};  // scale, B, input_mean, input_var
  BatchNormShape shape;
  bool training = false;
  Tensor* y = nullptr;
  Tensor* running_mean = nullptr;
  Tensor* running_var = nullptr;
  Tensor* saved_mean = nullptr;
  Tensor* saved_var = nullptr;
};
// Shared by every backend's Compute: shapes, the training decision, the outputs' types and sizes;
// an empty batch in training has no statistics and is refused.
Status ResolveBatchNormCall(const KernelContext& ctx, const BatchNormAttrs& a, BatchNormCall* call);

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
