// OpDefs of the reduction family: Reduce* (axes attribute; from opset 13 for ReduceSum and 18 for
// the others an optional axes input plus noop_with_empty_axes), ArgMax/ArgMin, and Softmax/LogSoftmax/Hardmax
// (before opset 13 the input is coerced to 2D at `axis`, default 1; from 13 the op is per-axis
// with default -1 — the output shape is the input's either way).
#include <algorithm>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

bool IsFloatDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}
bool IsNumericDType(DType t) {
  return t != DType::kUndefined && t != DType::kBool && t != DType::kString;
}

Status CheckInput0(const InferContext& ctx, bool float_only) {
  const DType t = ctx.InputDType(0);
  if (t == DType::kUndefined) return Status::Ok();
  if (float_only ? IsFloatDType(t) : IsNumericDType(t)) return Status::Ok();
  return ctx.Error(std::string("input must be a ") + (float_only ? "floating-point" : "numeric") + " tensor, got " +
                   DTypeName(t));
}

int PresentInputs(const Node& n) {
  int k = static_cast<int>(n.inputs.size());
  while (k > 0 && n.inputs[static_cast<size_t>(k - 1)] < 0) --k;
  return k;
}

// Output shape of a reduction over `axes` (normalised against the rank here).
StatusOr<SymShape> ReducedShape(const InferContext& ctx, const SymShape& in, std::vector<int64_t> axes, bool keepdims) {
  const int64_t rank = static_cast<int64_t>(in.size());
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  std::vector<bool> reduced(in.size(), false);
  for (int64_t a : axes) {
    auto n = NormalizeAxis(a, rank, "axes value");
    if (!n.ok()) return ctx.Error(n.status().message());
    if (reduced[static_cast<size_t>(*n)]) return ctx.Error("axis " + std::to_string(a) + " is repeated in axes");
    reduced[static_cast<size_t>(*n)] = true;
  }
  SymShape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduced[i]) out.push_back(in[i]);
    else if (keepdims) out.push_back(Dim(1));
  }
  return out;
}

// The opset from which op takes its axes as an optional input (with noop_with_empty_axes):
// 13 for ReduceSum, 18 for the others.
int AxesInputOpset(const std::string& op) { return op == "ReduceSum" ? 13 : 18; }

OpDef ReduceDef(const std::string& op) {
  const int axes_opset = AxesInputOpset(op);
  OpDef d;
  d.op_type = op;
  d.max_inputs = 2;
  d.max_opset = 18;  // the axes input (13/18); ReduceMax/Min 20 only added bool inputs (not implemented)
  d.attrs = {{"axes", AttrType::kInts}, {"keepdims", AttrType::kInt}, {"noop_with_empty_axes", AttrType::kInt}};
  d.check = [op, axes_opset](const Node& n, int opset) -> Status {
    if (opset >= axes_opset && n.attrs.Has("axes"))
      return InvalidArgument(n.DebugName() + ": from opset " + std::to_string(axes_opset) + " " + op +
                             " takes axes as an input, not an attribute");
    if (opset < axes_opset && (PresentInputs(n) > 1 || n.attrs.Has("noop_with_empty_axes")))
      return InvalidArgument(n.DebugName() + ": the axes input and noop_with_empty_axes need opset " +
                             std::to_string(axes_opset));
    return Status::Ok();
  };
  d.infer = [axes_opset](InferContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(CheckInput0(ctx, false));
    const DType dt = ctx.InputDType(0);
    const bool keepdims = ctx.attrs().GetInt("keepdims", 1) != 0;
    const bool axes_input = ctx.opset() >= axes_opset;
    const SymShape* in = ctx.InputShape(0);
    std::vector<int64_t> axes = ctx.attrs().GetInts("axes");
    if (axes_input && ctx.HasInput(1)) {
      const Tensor* t = ctx.InputValue(1);
      if (t && t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)
        return ctx.Error(std::string("axes must be int64, got ") + DTypeName(t->dtype()));
      if (!t) {
        // Axes only known at run time: with keepdims the rank survives, each dim 1 or unchanged.
        std::optional<SymShape> s;
        if (in && keepdims) {
          s = SymShape(in->size());
          for (size_t i = 0; i < in->size(); ++i)
            if ((*in)[i].known() && (*in)[i].value == 1) (*s)[i] = Dim(1);
        }
        ctx.SetOutput(0, dt, s);
        return Status::Ok();
      }
      axes = ToInt64Vector(*t);
    }
    if (!in) {
      ctx.SetOutput(0, dt, std::nullopt);
      return Status::Ok();
    }
    if (axes.empty() && axes_input && ctx.attrs().GetInt("noop_with_empty_axes", 0) != 0) {
      ctx.SetOutput(0, dt, *in);
      return Status::Ok();
    }
    WH_ASSIGN_OR_RETURN(SymShape out, ReducedShape(ctx, *in, axes, keepdims));
    ctx.SetOutput(0, dt, out);
    return Status::Ok();
  };
  return d;
}

OpDef ArgDef(const std::string& op) {
  OpDef d;
  d.op_type = op;
  d.attrs = {{"axis", AttrType::kInt}, {"keepdims", AttrType::kInt}, {"select_last_index", AttrType::kInt}};
  d.infer = [](InferContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(CheckInput0(ctx, false));
    const SymShape* in = ctx.InputShape(0);
    if (!in) {
      ctx.SetOutput(0, DType::kInt64, std::nullopt);
      return Status::Ok();
    }
    const bool keepdims = ctx.attrs().GetInt("keepdims", 1) != 0;
    WH_ASSIGN_OR_RETURN(SymShape out, ReducedShape(ctx, *in, {ctx.attrs().GetInt("axis", 0)}, keepdims));
    ctx.SetOutput(0, DType::kInt64, out);
    return Status::Ok();
  };
  return d;
}

OpDef SoftmaxDef(const std::string& op) {
  OpDef d;
  d.op_type = op;
  d.attrs = {{"axis", AttrType::kInt}};
  d.infer = [](InferContext& ctx) -> Status {
    WH_RETURN_IF_ERROR(CheckInput0(ctx, true));
    if (const SymShape* in = ctx.InputShape(0)) {
      const int64_t axis = ctx.attrs().GetInt("axis", ctx.opset() < 13 ? 1 : -1);
      auto n = NormalizeAxis(axis, static_cast<int64_t>(in->size()));
      if (!n.ok()) return ctx.Error(n.status().message());
    }
    return InferSameAsInput0(ctx);
  };
  return d;
}

}  // namespace

void RegisterReduceOps(OpRegistry& r) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
    r.Register(ReduceDef(op));
  for (const char* op : {"ArgMax", "ArgMin"}) r.Register(ArgDef(op));
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) r.Register(SoftmaxDef(op));
}

}  // namespace whittle
