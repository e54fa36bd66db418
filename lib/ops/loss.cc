// Loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12/13 semantics).
// input/scores [N, C, d1..dk], target [N, d1..dk] (int32/int64), optional weight [C]. Output 0 is
// target-shaped for reduction 'none' and a scalar otherwise; SoftmaxCrossEntropyLoss's optional
// output 1 is the log-probabilities, shaped like scores.
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

Status CheckLoss(const Node& node, int) {
  const std::string r = node.attrs.GetString("reduction", "mean");
  if (r != "none" && r != "sum" && r != "mean")
    return InvalidArgument(node.DebugName() + ": reduction must be none, sum or mean, got '" + r + "'");
  return Status::Ok();
}

Status InferLoss(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  if (dt != DType::kFloat32 && dt != DType::kFloat64 && dt != DType::kFloat16)
    return ctx.Error(std::string("input must be a float tensor, got ") + DTypeName(dt));
  const DType tt = ctx.InputDType(1);
  if (tt != DType::kInt32 && tt != DType::kInt64) return ctx.Error("target must be int32 or int64");
  if (ctx.HasInput(2) && ctx.InputDType(2) != dt) return ctx.Error("weight must have the input's type");
  const SymShape* in = ctx.InputShape(0);
  const SymShape* target = ctx.InputShape(1);
  if (in && in->size() < 2) return ctx.Error("input must be [N, C, ...], got " + SymShapeToString(*in));
  if (in && target) {
    if (target->size() + 1 != in->size())
      return ctx.Error("target " + SymShapeToString(*target) + " must have rank " + std::to_string(in->size() - 1) +
                       " for input " + SymShapeToString(*in));
    for (size_t d = 0; d < target->size(); ++d) {
      const Dim& a = (*target)[d];
      const Dim& b = (*in)[d == 0 ? 0 : d + 1];
      if (a.known() && b.known() && a.value != b.value)
        return ctx.Error("target " + SymShapeToString(*target) + " does not match input " + SymShapeToString(*in));
    }
  }
  const SymShape* w = ctx.InputShape(2);
  if (w && w->size() != 1) return ctx.Error("weight must be 1-D [C], got " + SymShapeToString(*w));
  if (ctx.attrs().GetString("reduction", "mean") == "none")
    ctx.SetOutput(0, dt, target ? std::optional<SymShape>(*target) : std::nullopt);
  else
    ctx.SetOutput(0, dt, SymShape{});
  if (ctx.num_outputs() > 1) ctx.SetOutput(1, dt, in ? std::optional<SymShape>(*in) : std::nullopt);
  return Status::Ok();
}

}  // namespace

void RegisterLossOps(OpRegistry& r) {
  const std::vector<AttrSpec> attrs = {{"reduction", AttrType::kString}, {"ignore_index", AttrType::kInt}};
  r.Register(OpDef{"", "NegativeLogLikelihoodLoss", 12, 2, 3, 1, 1, attrs, CheckLoss, InferLoss});
  r.Register(OpDef{"", "SoftmaxCrossEntropyLoss", 12, 2, 3, 1, 2, attrs, CheckLoss, InferLoss});
}

}  // namespace whittle
