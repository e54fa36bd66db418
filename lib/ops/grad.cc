// Gradient ops (domain ai.whittle) that the training engine's autodiff emits into a training graph
// for the ops whose backward is not itself a forward op (float32 only):
//   dX = ConvGradInput(dY, W, X)   Conv's attributes; dX = d/dX sum(Conv(X, W) * dY), X's shape
//                                   (X is read for its shape only)
//   dW = ConvGradWeight(X, dY)     Conv's attributes, kernel_shape required; dW = d/dW of the same
//                                   sum, [M, C/group, k...] with M = dY's channels
//   dX = MaxPoolGrad(X, dY)        MaxPool's attributes; each dY element goes to its window's first
//                                   maximum in X (row-major tap order, padding never wins), summed
//                                   where windows overlap
//   dX = ReluGrad(Y, dY)           dX = Y > 0 ? dY : 0 elementwise, Y the Relu's output (Y > 0 is
//                                   the same set as X > 0); Y and dY of one shape, no broadcasting
//   dX = AveragePoolGrad(X, dY)    AveragePool's attributes; each dY element divided by its
//                                   window's divisor (as the forward counts it) and added to the
//                                   window's taps inside X
//   dX = GatherGrad(X, I, dY)      Gather's axis; dX = 0 with each dY slice added at its index
//                                   (negative from the end, repeats summed); X read for its shape
// Geometry is Conv's and MaxPool's (lib/ops/window.h): dY must have the shape the forward op gives.
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "lib/ops/window.h"

namespace whittle {
namespace {


std::string Str(int64_t v) { return std::to_string(v); }

Status CheckConvGrad(const Node& node, int) {
  WH_RETURN_IF_ERROR(CheckWindowAttributes(node));
  const int64_t group = node.attrs.GetInt("group", 1);
  if (group < 1) return InvalidArgument(node.DebugName() + ": group must be >= 1, got " + Str(group));
  return Status::Ok();
}

Status CheckPoolGrad(const Node& node, int) { return CheckWindowAttributes(node); }

// Every present input float32.
Status CheckFloat32(const InferContext& ctx, std::initializer_list<const char*> names) {
  int i = 0;
  for (const char* name : names) {
    const DType t = ctx.InputDType(i++);
    if (t != DType::kUndefined && t != DType::kFloat32)
      return ctx.Error(std::string(name) + " is " + DTypeName(t) + "; " + ctx.node().op_type +
                       " supports float32 only");
  }
  return Status::Ok();
}

// dY's shape against the one the forward op gives (unknown dims on either side pass).
Status CheckGradShape(const InferContext& ctx, const SymShape* dy, const SymShape& expected) {
  if (!dy) return Status::Ok();
  bool ok = dy->size() == expected.size();
  for (size_t i = 0; ok && i < dy->size(); ++i)
    ok = !(*dy)[i].known() || !expected[i].known() || (*dy)[i].value == expected[i].value;
  if (!ok)
    return ctx.Error("dY " + SymShapeToString(*dy) + " is not the forward output's shape " +
                     SymShapeToString(expected));
  return Status::Ok();
}

// ConvGradInput(dY, W, X): the forward Conv is Conv(X = input 2, W = input 1).
Status InferConvGradInput(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckFloat32(ctx, {"dY", "W", "X"}));
  WH_ASSIGN_OR_RETURN(std::optional<SymShape> y, InferConvOutput(ctx, 2, 1));
  if (y) WH_RETURN_IF_ERROR(CheckGradShape(ctx, ctx.InputShape(0), *y));
  const SymShape* x = ctx.InputShape(2);
  ctx.SetOutput(0, DType::kFloat32, x ? std::optional<SymShape>(*x) : std::nullopt);
  return Status::Ok();
}

// ConvGradWeight(X, dY): W is [M, C/group, kernel_shape...] with M = dY's channels.
Status InferConvGradWeight(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckFloat32(ctx, {"X", "dY"}));
  const SymShape* x = ctx.InputShape(0);
  const SymShape* dy = ctx.InputShape(1);
  const std::vector<int64_t> ks = ctx.attrs().GetInts("kernel_shape");
  const int64_t group = ctx.attrs().GetInt("group", 1);
  if (ks.empty()) return ctx.Error("kernel_shape is required");
  if (x && x->size() < 3) return ctx.Error("X must have rank >= 3 (N, C, spatial...), got " + SymShapeToString(*x));
  if (x && x->size() != ks.size() + 2)
    return ctx.Error("kernel_shape has " + Str(static_cast<int64_t>(ks.size())) + " values for X " +
                     SymShapeToString(*x));
  if (dy && dy->size() != ks.size() + 2)
    return ctx.Error("dY " + SymShapeToString(*dy) + " must have rank " + Str(static_cast<int64_t>(ks.size()) + 2) +
                     " (N, M and one dim per kernel_shape value)");
  Dim m = dy ? (*dy)[1] : Dim();
  if (m.known() && m.value % group != 0)
    return ctx.Error("group " + Str(group) + " does not divide the " + Str(m.value) + " channels of dY");
  Dim cg;
  if (x) {
    if ((*x)[1].known() && (*x)[1].value % group != 0)
      return ctx.Error("group " + Str(group) + " does not divide the " + Str((*x)[1].value) + " channels of X");
    if ((*x)[1].known()) cg = Dim((*x)[1].value / group);
    SymShape spatial;
    WH_RETURN_IF_ERROR(InferWindowOutput(ctx, SymShape(x->begin() + 2, x->end()), ks, &spatial));
    SymShape y{(*x)[0], m};
    y.insert(y.end(), spatial.begin(), spatial.end());
    WH_RETURN_IF_ERROR(CheckGradShape(ctx, dy, y));
  }
  SymShape w{m, cg};
  for (int64_t k : ks) w.push_back(Dim(k));
  ctx.SetOutput(0, DType::kFloat32, w);
  return Status::Ok();
}

// MaxPoolGrad(X, dY): dY has MaxPool(X)'s shape.
Status InferMaxPoolGrad(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckFloat32(ctx, {"X", "dY"}));
  const SymShape* x = ctx.InputShape(0);
  if (!x) {
    ctx.SetOutput(0, DType::kFloat32, std::nullopt);
    return Status::Ok();
  }
  if (x->size() < 3) return ctx.Error("X must have rank >= 3 (N, C, spatial...), got " + SymShapeToString(*x));
  const std::vector<int64_t> ks = ctx.attrs().GetInts("kernel_shape");
  if (ks.size() != x->size() - 2)
    return ctx.Error("kernel_shape has " + Str(static_cast<int64_t>(ks.size())) + " values for X " +
                     SymShapeToString(*x));
  SymShape spatial;
  WH_RETURN_IF_ERROR(InferWindowOutput(ctx, SymShape(x->begin() + 2, x->end()), ks, &spatial));
  SymShape y{(*x)[0], (*x)[1]};
  y.insert(y.end(), spatial.begin(), spatial.end());
  WH_RETURN_IF_ERROR(CheckGradShape(ctx, ctx.InputShape(1), y));
  ctx.SetOutput(0, DType::kFloat32, *x);
  return Status::Ok();
}

// ReluGrad(Y, dY): dX has dY's shape; Y's must equal it (unknown dims on either side pass).
Status InferReluGrad(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckFloat32(ctx, {"Y", "dY"}));
  const SymShape* y = ctx.InputShape(0);
  const SymShape* dy = ctx.InputShape(1);
  if (y && dy) {
    bool ok = y->size() == dy->size();
    for (size_t i = 0; ok && i < y->size(); ++i)
      ok = !(*y)[i].known() || !(*dy)[i].known() || (*y)[i].value == (*dy)[i].value;
    if (!ok)
      return ctx.Error("Y " + SymShapeToString(*y) + " and dY " + SymShapeToString(*dy) +
                       " must have the same shape");
  }
  const SymShape* out = dy ? dy : y;
  ctx.SetOutput(0, DType::kFloat32, out ? std::optional<SymShape>(*out) : std::nullopt);
  return Status::Ok();
}

// AveragePoolGrad(X, dY): dY has AveragePool(X)'s shape.
Status InferAveragePoolGrad(InferContext& ctx) { return InferMaxPoolGrad(ctx); }

// GatherGrad(X, Indices, dY): dY has Gather(X, Indices)'s shape X[:axis] + Indices + X[axis+1:].
Status InferGatherGrad(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckFloat32(ctx, {"X"}));
  const DType it = ctx.InputDType(1), dt = ctx.InputDType(2);
  if (it != DType::kUndefined && it != DType::kInt64 && it != DType::kInt32)
    return ctx.Error(std::string("Indices is ") + DTypeName(it) + "; GatherGrad needs int32 or int64");
  if (dt != DType::kUndefined && dt != DType::kFloat32)
    return ctx.Error(std::string("dY is ") + DTypeName(dt) + "; GatherGrad supports float32 only");
  const SymShape* x = ctx.InputShape(0);
  const SymShape* ind = ctx.InputShape(1);
  if (x) {
    const int64_t r = static_cast<int64_t>(x->size());
    int64_t axis = ctx.attrs().GetInt("axis", 0);
    if (axis < -r || axis >= r) return ctx.Error("axis " + Str(axis) + " is out of range for X " + SymShapeToString(*x));
    if (axis < 0) axis += r;
    if (ind) {
      SymShape y(x->begin(), x->begin() + axis);
      y.insert(y.end(), ind->begin(), ind->end());
      y.insert(y.end(), x->begin() + axis + 1, x->end());
      WH_RETURN_IF_ERROR(CheckGradShape(ctx, ctx.InputShape(2), y));
    }
  }
  ctx.SetOutput(0, DType::kFloat32, x ? std::optional<SymShape>(*x) : std::nullopt);
  return Status::Ok();
}

std::vector<AttrSpec> ConvAttrSpecs(bool kernel_shape_required) {
  return {{"auto_pad", AttrType::kString},
          {"dilations", AttrType::kInts},
          {"group", AttrType::kInt},
          {"kernel_shape", AttrType::kInts, kernel_shape_required},
          {"pads", AttrType::kInts},
          {"strides", AttrType::kInts}};
}

}  // namespace

void RegisterGradOps(OpRegistry& r) {
  auto def = [&](const char* op, int inputs, std::vector<AttrSpec> attrs,
                 std::function<Status(const Node&, int)> check, std::function<Status(InferContext&)> infer) {
    OpDef d;
    d.domain = kWhittleDomain;
    d.op_type = op;
    d.min_inputs = d.max_inputs = inputs;
    d.attrs = std::move(attrs);
    d.check = std::move(check);
    d.infer = std::move(infer);
    r.Register(std::move(d));
  };
  def("ConvGradInput", 3, ConvAttrSpecs(false), CheckConvGrad, InferConvGradInput);
  def("ConvGradWeight", 2, ConvAttrSpecs(true), CheckConvGrad, InferConvGradWeight);
  def("MaxPoolGrad", 2,
      {{"auto_pad", AttrType::kString},
       {"ceil_mode", AttrType::kInt},
       {"dilations", AttrType::kInts},
       {"kernel_shape", AttrType::kInts, true},
       {"pads", AttrType::kInts},
       {"storage_order", AttrType::kInt},
       {"strides", AttrType::kInts}},
      CheckPoolGrad, InferMaxPoolGrad);
  def("ReluGrad", 2, {}, nullptr, InferReluGrad);
  def("AveragePoolGrad", 2,
      {{"auto_pad", AttrType::kString},
       {"ceil_mode", AttrType::kInt},
       {"count_include_pad", AttrType::kInt},
       {"dilations", AttrType::kInts},
       {"kernel_shape", AttrType::kInts, true},
       {"pads", AttrType::kInts},
       {"strides", AttrType::kInts}},
      CheckPoolGrad, InferAveragePoolGrad);
  def("GatherGrad", 3, {{"axis", AttrType::kInt}}, nullptr, InferGatherGrad);
}

}  // namespace whittle
