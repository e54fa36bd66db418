#include "kernels/common/norm_shape.h"

#include <string>

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

bool IsFloatType(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

}  // namespace

StatusOr<BatchNormAttrs> ParseBatchNormAttrs(const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (!IsFloatType(dt))
    return Unimplemented(std::string("BatchNormalization supports float and double, got ") + DTypeName(dt));
  BatchNormAttrs a;
  a.epsilon = init.attrs.GetFloat("epsilon", 1e-5f);
  a.momentum = init.attrs.GetFloat("momentum", 0.9f);
  a.spatial = init.opset >= 9 || init.attrs.GetInt("spatial", 1) != 0;
  if (init.opset >= 14) {
    a.training = init.attrs.GetInt("training_mode", 0) != 0;
    a.running_outputs_only = true;
  } else if (init.attrs.Has("training_mode")) {
    return InvalidArgument("BatchNormalization training_mode is an attribute of opset 14+, not " + Str(init.opset) +
                           " (older opsets train when outputs past Y are asked for)");
  } else if (init.opset < 7) {
    a.training = init.attrs.GetInt("is_test", 0) == 0;
  } else {
    a.training_by_outputs = true;
  }
  return a;
}

StatusOr<LayerNormAttrs> ParseLayerNormAttrs(const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (!IsFloatType(dt))
    return Unimplemented(std::string("LayerNormalization supports float and double, got ") + DTypeName(dt));
  const int64_t stash = init.attrs.GetInt("stash_type", 1);
  if (stash != 1) return Unimplemented("LayerNormalization stash_type " + Str(stash) + " is not supported (only 1)");
  LayerNormAttrs a;
  a.axis = init.attrs.GetInt("axis", -1);
  a.epsilon = init.attrs.GetFloat("epsilon", 1e-5f);
  return a;
}

StatusOr<ChannelNormAttrs> ParseInstanceNormAttrs(const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (!IsFloatType(dt))
    return Unimplemented(std::string("InstanceNormalization supports float and double, got ") + DTypeName(dt));
  ChannelNormAttrs a;
  a.epsilon = init.attrs.GetFloat("epsilon", 1e-5f);
  return a;
}

StatusOr<ChannelNormAttrs> ParseGroupNormAttrs(const KernelInit& init) {
  const DType dt = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (!IsFloatType(dt))
    return Unimplemented(std::string("GroupNormalization supports float and double, got ") + DTypeName(dt));
  ChannelNormAttrs a;
  a.epsilon = init.attrs.GetFloat("epsilon", 1e-5f);
  if (!init.attrs.Has("num_groups")) return InvalidArgument("GroupNormalization needs the num_groups attribute");
  a.num_groups = init.attrs.GetInt("num_groups", 0);
  if (a.num_groups < 1) return InvalidArgument("num_groups must be >= 1, got " + Str(a.num_groups));
  const int64_t stash = init.attrs.GetInt("stash_type", 1);
  if (stash != 1 && stash != 11)
    return Unimplemented("GroupNormalization stash_type " + Str(stash) + " is not supported (1 and 11 are)");
  a.per_channel = init.opset >= 21;
  return a;
}

Status ResolveChannelNormShape(const ChannelNormAttrs& a, const Tensor& x, const Tensor& scale, const Tensor& bias,
                               ChannelNormShape* s) {
  const char* op = a.num_groups == 0 ? "InstanceNormalization" : "GroupNormalization";
  if (x.rank() < 2)
    return InvalidArgument(std::string(op) + " X must have rank >= 2 (N, C, ...), got " + DimsToString(x.dims()));
  s->batch = x.dim(0);
  s->channels = x.dim(1);
  s->inner = 1;
  for (int i = 2; i < x.rank(); ++i) s->inner *= x.dim(i);
  s->groups = a.num_groups == 0 ? s->channels : a.num_groups;
  s->per_channel = a.per_channel;
  if (s->groups == 0 || s->channels % s->groups != 0)
    return InvalidArgument(std::string(op) + " num_groups " + Str(s->groups) + " does not divide the " +
                           Str(s->channels) + " channels of X");
  const int64_t want = a.per_channel ? s->channels : s->groups;
  for (const Tensor* t : {&scale, &bias}) {
    if (t->dtype() != x.dtype())
      return InvalidArgument(std::string(op) + " scale and bias must have X's element type");
    if (t->rank() != 1 || t->dim(0) != want)
      return InvalidArgument(std::string(op) + " scale/bias " + DimsToString(t->dims()) + " must have shape [" +
                             Str(want) + "]");
  }
  return Status::Ok();
}

Status ResolveBatchNormShape(const Tensor& x, const Tensor* const params[4], bool spatial, BatchNormShape* s) {
  if (x.rank() < 2) return InvalidArgument("BatchNormalization X must have rank >= 2, got " + DimsToString(x.dims()));
  s->batch = x.dim(0);
  s->channels = x.dim(1);
  s->inner = 1;
  for (int i = 2; i < x.rank(); ++i) s->inner *= x.dim(i);
  s->per_element = !spatial;
  const int64_t want = spatial ? s->channels : s->channels * s->inner;
  static const char* kNames[4] = {"scale", "B", "mean", "var"};
  for (int i = 0; i < 4; ++i) {
    if (!params[i]) return InvalidArgument(std::string("BatchNormalization input ") + kNames[i] + " is missing");
    if (params[i]->dtype() != x.dtype())
      return InvalidArgument(std::string("BatchNormalization ") + kNames[i] + " must have X's element type");
    if (params[i]->numel() != want)
      return InvalidArgument(std::string("BatchNormalization ") + kNames[i] + " " +
                             DimsToString(params[i]->dims()) + " must have " + Str(want) + " values");
  }
  return Status::Ok();
}

Status ResolveBatchNormCall(const KernelContext& ctx, const BatchNormAttrs& a, BatchNormCall* call) {
  call->x = ctx.inputs[0];
  for (int i = 0; i < 4; ++i) call->params[i] = ctx.inputs.size() > static_cast<size_t>(i + 1) ? ctx.inputs[i + 1] : nullptr;
  WH_RETURN_IF_ERROR(ResolveBatchNormShape(*call->x, call->params, a.spatial, &call->shape));
  auto out = [&](size_t i) -> Tensor* { return i < ctx.outputs.size() ? ctx.outputs[i] : nullptr; };
  call->y = out(0);
  bool extra = false;
  for (size_t i = 1; i < ctx.outputs.size(); ++i) extra |= ctx.outputs[i] != nullptr;
  if (a.running_outputs_only && ctx.outputs.size() > 3)
    return InvalidArgument("BatchNormalization has at most 3 outputs (Y, running_mean, running_var) from opset 14");
  call->training = a.training || (a.training_by_outputs && extra);
  if (!call->training) {
    if (extra)
      return InvalidArgument("BatchNormalization outputs past Y are only produced in training mode" +
                             std::string(a.running_outputs_only ? " (training_mode=1)" : ""));
    return Status::Ok();
  }
  if (call->shape.count() == 0)
    return InvalidArgument("BatchNormalization in training mode needs a non-empty batch, X is " +
                           DimsToString(call->x->dims()));
  call->running_mean = out(1);
  call->running_var = out(2);
  call->saved_mean = out(3);
  call->saved_var = out(4);
  static const char* kNames[4] = {"running_mean", "running_var", "saved_mean", "saved_var"};
  Tensor* outs[4] = {call->running_mean, call->running_var, call->saved_mean, call->saved_var};
  for (int i = 0; i < 4; ++i) {
    if (!outs[i]) continue;
    if (outs[i]->dtype() != call->x->dtype() || outs[i]->numel() != call->shape.stats())
      return Internal(std::string("BatchNormalization output ") + kNames[i] + " was allocated as " +
                      DTypeName(outs[i]->dtype()) + " " + DimsToString(outs[i]->dims()) + ", expected " +
                      Str(call->shape.stats()) + " values of X's type");
  }
  return Status::Ok();
}

Status ResolveLayerNormShape(const Tensor& x, int64_t axis, const Tensor& scale, const Tensor* bias,
                             LayerNormShape* s) {
  const int64_t r = x.rank();
  if (axis < -r || axis >= r)
    return InvalidArgument("LayerNormalization axis " + Str(axis) + " is out of range for rank " + Str(r));
  if (axis < 0) axis += r;
  s->outer = 1;
  s->inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? s->outer : s->inner) *= x.dim(static_cast<int>(i));
  for (const Tensor* t : {&scale, bias}) {
    if (!t) continue;
    if (t->dtype() != x.dtype())
      return InvalidArgument("LayerNormalization Scale and B must have X's element type");
    if (t->numel() == 1 && t->rank() <= r - axis) continue;
    // Same trailing dims as X.shape[axis:], with optional leading 1s.
    bool ok = t->numel() == s->inner && t->rank() <= r;
    for (int i = 0; ok && i < t->rank(); ++i) {
      const int64_t xi = r - t->rank() + i;
      ok = xi >= axis ? t->dim(i) == x.dim(static_cast<int>(xi)) : t->dim(i) == 1;
    }
    if (!ok)
      return Unimplemented("LayerNormalization Scale/B " + DimsToString(t->dims()) + " must have shape X.shape[axis:] " +
                           "or a single value (other broadcasts are not supported)");
  }
  return Status::Ok();
}

Status ResolveLayerNormCall(const KernelContext& ctx, int64_t axis, LayerNormCall* call) {
  call->x = ctx.inputs[0];
  call->scale = ctx.inputs[1];
  call->bias = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
  WH_RETURN_IF_ERROR(ResolveLayerNormShape(*call->x, axis, *call->scale, call->bias, &call->shape));
  Tensor* mean = ctx.outputs.size() > 1 ? ctx.outputs[1] : nullptr;
  Tensor* inv = ctx.outputs.size() > 2 ? ctx.outputs[2] : nullptr;
  const int64_t rows = call->shape.outer;
  if ((mean && (mean->dtype() != DType::kFloat32 || mean->numel() != rows)) ||
      (inv && (inv->dtype() != DType::kFloat32 || inv->numel() != rows)))
    return Internal("LayerNormalization Mean/InvStdDev outputs must be float32 with one value per row");
  call->mean_out = mean ? mean->data<float>() : nullptr;
  call->inv_out = inv ? inv->data<float>() : nullptr;
  return Status::Ok();
}

}  // namespace whittle
