// ONNX DFT, opsets 17 and 20:
//   opset 17: Y = DFT(X[, dft_length]), attributes axis (default 1), inverse, onesided
//   opset 20: Y = DFT(X[, dft_length][, axis]), the axis an input (default -2); attribute removed
// X float32/float64 [signal..., 1 or 2]; Y the same dtype and rank, the axis resized to the
// transform length (forward one-sided: length/2 + 1), ending in 2 (1 for the inverse one-sided
// transform). The rules live in lib/ir/dft_shape.h, shared with the kernel.
#include <string>

#include "lib/ir/dft_shape.h"
#include "lib/ops/op_def.h"

namespace whittle {
namespace {

Status CheckDftNode(const Node& node, int opset) {
  for (const char* name : {"inverse", "onesided"}) {
    const int64_t v = node.attrs.GetInt(name, 0);
    if (v != 0 && v != 1)
      return InvalidArgument(node.DebugName() + ": attribute " + name + " must be 0 or 1, got " + std::to_string(v));
  }
  if (opset >= 20 && node.attrs.Has("axis"))
    return InvalidArgument(node.DebugName() + ": DFT " + std::to_string(opset) +
                           " has no axis attribute (opset 20 made it the third input)");
  if (opset < 20 && node.inputs.size() > 2 && node.inputs[2] >= 0)
    return InvalidArgument(node.DebugName() + ": DFT " + std::to_string(opset) +
                           " takes at most 2 inputs (the axis input arrived in opset 20)");
  return Status::Ok();
}

Status InferDft(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  if (dt != DType::kUndefined && dt != DType::kFloat32 && dt != DType::kFloat64)
    return ctx.Error(std::string("input is ") + DTypeName(dt) + ", expected float32 or float64");
  for (int i : {1, 2}) {
    const DType t = ctx.InputDType(i);
    if (t != DType::kUndefined && t != DType::kInt32 && t != DType::kInt64)
      return ctx.Error(std::string(i == 1 ? "dft_length" : "axis") + " is " + DTypeName(t) + ", expected int32 or int64");
  }
  const bool inverse = ctx.attrs().GetInt("inverse", 0) != 0;
  const bool onesided = ctx.attrs().GetInt("onesided", 0) != 0;
  bool known = true;  // dft_length and axis known (or absent)
  int64_t dft_length = -1;
  if (ctx.HasInput(1)) {
    if (const Tensor* t = ctx.InputValue(1)) {
      auto v = DftScalarInput(*t, "dft_length");
      if (!v.ok()) return ctx.Error(v.status().message());
      if (*v < 1) return ctx.Error("dft_length must be >= 1, got " + std::to_string(*v));
      dft_length = *v;
    } else {
      known = false;
    }
  }
  int64_t axis = ctx.opset() >= 20 ? -2 : ctx.attrs().GetInt("axis", 1);
  if (ctx.opset() >= 20 && ctx.HasInput(2)) {
    if (const Tensor* t = ctx.InputValue(2)) {
      auto v = DftScalarInput(*t, "axis");
      if (!v.ok()) return ctx.Error(v.status().message());
      axis = *v;
    } else {
      known = false;
    }
  }
  const SymShape* in = ctx.InputShape(0);
  if (!in) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(in->size());
  const int64_t last = rank > 0 && in->back().known() ? in->back().value : -1;
  const int64_t out_comp = inverse && onesided ? 1 : 2;
  if (!known) {
    // The axis or the length comes at run time: only the rank and the last dim are known.
    if (rank < 2) return ctx.Error("input must have rank >= 2, got " + SymShapeToString(*in));
    SymShape out(static_cast<size_t>(rank), Dim());
    out.back() = Dim(out_comp);
    ctx.SetOutput(0, dt, out);
    return Status::Ok();
  }
  const int64_t a = axis < 0 ? axis + rank : axis;
  const int64_t axis_len = a >= 0 && a < rank && (*in)[static_cast<size_t>(a)].known() ? (*in)[static_cast<size_t>(a)].value : -1;
  auto s = ResolveDft(rank, axis, axis_len, last, dft_length, inverse, onesided);
  if (!s.ok()) return ctx.Error(s.status().message());
  SymShape out = *in;
  Dim& d = out[static_cast<size_t>(s->axis)];
  if (s->out_len >= 0) d = Dim(s->out_len);
  else if (dft_length >= 0 || onesided) d = Dim();  // else the (symbolic) signal length carries over
  out.back() = Dim(s->out_comp);
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

}  // namespace

void RegisterSignalOps(OpRegistry& r) {
  OpDef d;
  d.op_type = "DFT";
  d.since_opset = 17;
  d.min_inputs = 1;
  d.max_inputs = 3;
  d.attrs = {{"axis", AttrType::kInt}, {"inverse", AttrType::kInt}, {"onesided", AttrType::kInt}};
  d.check = CheckDftNode;
  d.infer = InferDft;
  d.max_opset = 20;
  r.Register(std::move(d));
}

}  // namespace whittle
