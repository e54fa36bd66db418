// OpDefs for BatchNormalization (inference and training: training_mode=1 from opset 14, outputs
// past Y in opsets 7-13, is_test=0 in opset 6; `spatial` of opsets < 9 is honoured) and LayerNormalization (opset 17; optional Mean and InvStdDev outputs, float32 as
// stash_type 1 prescribes; other stash types are rejected), InstanceNormalization (opset 6+:
// per (N, C) statistics over the spatial dims) and GroupNormalization (opsets 18 and 21: per
// (N, group) statistics; scale/bias per group in 18, per channel in 21; stash_type 1 or 11).
#include <cmath>
#include <string>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// Training is chosen as the opset defines it: training_mode=1 from opset 14 (outputs Y,
// running_mean, running_var), any output past Y in opsets 7-13 (Y, mean, var, saved_mean,
// saved_var: the spec's "output case #1"), is_test=0 in opset 6.
Status CheckBatchNorm(const Node& node, int opset) {
  bool extra = false;
  for (size_t i = 1; i < node.outputs.size(); ++i) extra |= node.outputs[i] >= 0;
  if (opset >= 14) {
    if (node.outputs.size() > 3)
      return InvalidArgument(node.DebugName() + ": BatchNormalization has at most 3 outputs (Y, running_mean, "
                             "running_var) from opset 14, got " + Str(static_cast<int64_t>(node.outputs.size())));
    if (extra && node.attrs.GetInt("training_mode", 0) == 0)
      return InvalidArgument(node.DebugName() + ": outputs running_mean and running_var are only produced with "
                             "training_mode=1");
  } else if (node.attrs.Has("training_mode")) {
    return InvalidArgument(node.DebugName() + ": training_mode is an attribute of opset 14+, not " + Str(opset) +
                           " (opsets 7-13 train when outputs past Y are asked for)");
  }
  if (opset < 7 && extra && node.attrs.GetInt("is_test", 0) != 0)
    return InvalidArgument(node.DebugName() + ": outputs past Y are only produced in training mode (is_test=0)");
  if (node.attrs.Has("momentum")) {
    const float m = node.attrs.GetFloat("momentum", 0.9f);
    if (!std::isfinite(m)) return InvalidArgument(node.DebugName() + ": momentum must be finite");
  }
  return Status::Ok();
}

Status InferBatchNorm(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  WH_RETURN_IF_ERROR(CheckInputsMatchX(ctx, 1, 4));
  const SymShape* x = ctx.InputShape(0);
  if (x && x->size() < 2) return ctx.Error("X must have rank >= 2 (N, C, ...), got " + SymShapeToString(*x));
  const bool spatial = ctx.opset() >= 9 || ctx.attrs().GetInt("spatial", 1) != 0;
  const Dim c = x ? (*x)[1] : Dim();
  // The statistics: [C], or X.shape[1:] for spatial = 0 (opsets < 9).
  std::optional<SymShape> stats;
  if (x) stats = spatial ? SymShape{c} : SymShape(x->begin() + 1, x->end());
  for (int i = 1; i < 5; ++i) {
    const SymShape* p = ctx.InputShape(i);
    if (!p) continue;
    if (spatial) {
      if (p->size() != 1) return ctx.Error("input " + Str(i) + " must be 1-D [C], got " + SymShapeToString(*p));
      if (c.known() && (*p)[0].known() && (*p)[0].value != c.value)
        return ctx.Error("input " + Str(i) + " " + SymShapeToString(*p) + " must have C=" + Str(c.value) + " values");
    } else if (!stats) {
      stats = *p;  // X's rank unknown: the parameters tell the statistics' shape
    }
  }
  ctx.SetOutput(0, dt, x ? std::optional<SymShape>(*x) : std::nullopt);
  for (int i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.HasOutput(i)) ctx.SetOutput(i, dt, spatial ? std::optional<SymShape>(SymShape{c}) : stats);
  return Status::Ok();
}

Status CheckLayerNorm(const Node& node, int) {
  const int64_t stash = node.attrs.GetInt("stash_type", 1);
  if (stash != 1)
    return Unimplemented(node.DebugName() + ": stash_type " + Str(stash) + " is not supported (only 1, float)");
  return Status::Ok();
}

Status InferLayerNorm(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  WH_RETURN_IF_ERROR(CheckInputsMatchX(ctx, 1, 2));
  const SymShape* x = ctx.InputShape(0);
  std::optional<SymShape> stats;
  if (x) {
    const int64_t rank = static_cast<int64_t>(x->size());
    auto axis = NormalizeAxis(ctx.attrs().GetInt("axis", -1), rank);
    if (!axis.ok()) return ctx.Error(axis.status().message());
    for (int i = 1; i < 3; ++i) {
      const SymShape* p = ctx.InputShape(i);
      if (p && static_cast<int64_t>(p->size()) > rank)
        return ctx.Error("input " + Str(i) + " " + SymShapeToString(*p) + " has a higher rank than X");
    }
    stats = *x;
    for (int64_t i = *axis; i < rank; ++i) (*stats)[static_cast<size_t>(i)] = Dim(1);
  }
  ctx.SetOutput(0, dt, x ? std::optional<SymShape>(*x) : std::nullopt);
  for (int i = 1; i < ctx.num_outputs() && i < 3; ++i)
    if (ctx.HasOutput(i)) ctx.SetOutput(i, DType::kFloat32, stats);
  return Status::Ok();
}

// InstanceNormalization (scale and B of [C]) and GroupNormalization (scale and bias of
// [num_groups] before opset 21, [C] from 21): X [N, C, ...] with rank >= 2, Y like X.
Status InferChannelNorm(InferContext& ctx, const char* what, int64_t groups, bool per_channel) {
  const DType dt = ctx.InputDType(0);
  WH_RETURN_IF_ERROR(CheckInputsMatchX(ctx, 1, 2));
  const SymShape* x = ctx.InputShape(0);
  if (x && x->size() < 2) return ctx.Error("X must have rank >= 2 (N, C, ...), got " + SymShapeToString(*x));
  const Dim c = x ? (*x)[1] : Dim();
  if (groups > 0 && c.known() && c.value % groups != 0)
    return ctx.Error("num_groups " + Str(groups) + " does not divide the " + Str(c.value) + " channels of X");
  const Dim want = per_channel ? c : Dim(groups);
  for (int i = 1; i < 3; ++i) {
    const SymShape* p = ctx.InputShape(i);
    if (!p) continue;
    if (p->size() != 1) return ctx.Error("input " + Str(i) + " must be 1-D, got " + SymShapeToString(*p));
    if (want.known() && (*p)[0].known() && (*p)[0].value != want.value)
      return ctx.Error(std::string("input ") + Str(i) + " " + SymShapeToString(*p) + " must have " + Str(want.value) +
                       " values (" + what + ")");
  }
  ctx.SetOutput(0, dt, x ? std::optional<SymShape>(*x) : std::nullopt);
  return Status::Ok();
}

Status InferInstanceNorm(InferContext& ctx) { return InferChannelNorm(ctx, "one per channel", 0, true); }

Status CheckGroupNorm(const Node& node, int opset) {
  const int64_t g = node.attrs.GetInt("num_groups", 0);
  if (g < 1) return InvalidArgument(node.DebugName() + ": num_groups must be >= 1, got " + Str(g));
  if (node.attrs.Has("stash_type")) {
    if (opset < 21)
      return InvalidArgument(node.DebugName() + ": stash_type is an attribute of opset 21, not " + Str(opset));
    const int64_t stash = node.attrs.GetInt("stash_type", 1);
    if (stash != 1 && stash != 11)
      return Unimplemented(node.DebugName() + ": stash_type " + Str(stash) +
                           " is not supported (1 float and 11 double are)");
  }
  return Status::Ok();
}

Status InferGroupNorm(InferContext& ctx) {
  const bool per_channel = ctx.opset() >= 21;
  return InferChannelNorm(ctx, per_channel ? "one per channel" : "one per group", ctx.attrs().GetInt("num_groups", 1),
                          per_channel);
}

}  // namespace

void RegisterNormOps(OpRegistry& r) {
  OpDef bn;
  bn.op_type = "BatchNormalization";
  bn.min_inputs = 5;
  bn.max_inputs = 5;
  bn.min_outputs = 1;
  bn.max_outputs = 5;
  bn.attrs = {{"epsilon", AttrType::kFloat}, {"momentum", AttrType::kFloat}, {"spatial", AttrType::kInt},
              {"is_test", AttrType::kInt}, {"consumed_inputs", AttrType::kInts}, {"training_mode", AttrType::kInt}};
  bn.check = CheckBatchNorm;
  bn.infer = InferBatchNorm;
  r.Register(std::move(bn));

  OpDef ln;
  ln.op_type = "LayerNormalization";
  ln.since_opset = 17;
  ln.min_inputs = 2;
  ln.max_inputs = 3;
  ln.min_outputs = 1;
  ln.max_outputs = 3;
  ln.attrs = {{"axis", AttrType::kInt}, {"epsilon", AttrType::kFloat}, {"stash_type", AttrType::kInt}};
  ln.check = CheckLayerNorm;
  ln.infer = InferLayerNorm;
  r.Register(std::move(ln));

  OpDef in;
  in.op_type = "InstanceNormalization";
  in.since_opset = 6;
  in.min_inputs = 3;
  in.max_inputs = 3;
  in.attrs = {{"epsilon", AttrType::kFloat}};
  in.infer = InferInstanceNorm;
  r.Register(std::move(in));

  OpDef gn;
  gn.op_type = "GroupNormalization";
  gn.since_opset = 18;
  gn.max_opset = 21;  // 18 (scale per group) and 21 (per channel) both implemented
  gn.min_inputs = 3;
  gn.max_inputs = 3;
  gn.attrs = {{"epsilon", AttrType::kFloat}, {"num_groups", AttrType::kInt, true}, {"stash_type", AttrType::kInt}};
  gn.check = CheckGroupNorm;
  gn.infer = InferGroupNorm;
  r.Register(std::move(gn));
}

}  // namespace whittle
